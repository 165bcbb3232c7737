"""Which implementation runs, and who is told: a copy of the installed
package without its compiled extension, laid out as a source checkout
(setup.py beside it), as an install built with MCASTMEMBER_NO_EXTENSIONS=1,
or with an extension that does not load, imported by a fresh interpreter.
A mistake (the checkout, the broken extension) warns at import; the demo and
the doctor say that pure Python runs whenever nobody asked for it; the test
suite refuses to run without the extension unless asked. The network: only
loopback (interface 127.0.0.1, TTL 0)."""

import importlib.machinery
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import mcastmember

INSTALLED = pathlib.Path(mcastmember.__file__).parent
TESTS = pathlib.Path(__file__).parent
NOTE = "the pure-Python implementation runs: "


def layout(tmp_path, checkout=False, broken=False):
    """A folder holding a copy of the package without its extension."""
    root = tmp_path / "root"
    shutil.copytree(INSTALLED, root / "mcastmember",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyd"))
    if checkout:
        (root / "setup.py").write_text("")
    if broken:
        suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
        (root / "mcastmember" / "tribes" / "kernel" / f"_fast{suffix}").write_bytes(b"not a shared object")
    return root


def python(root, code, *args, forced=False):
    """(stdout, stderr) of `python -c code` in root: the copy is imported."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCASTMEMBER_")}
    env["PYTHONWARNINGS"] = "default"
    if forced:
        env["MCASTMEMBER_NO_EXTENSIONS"] = "1"
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=60, check=True)
    return done.stdout, done.stderr


IMPLEMENTATION = "import mcastmember; print(mcastmember.implementation())"


def warning(text):
    return f"RuntimeWarning: mcastmember: {NOTE}{text}"


def test_a_checkout_without_the_extension_warns_at_import(tmp_path):
    root = layout(tmp_path, checkout=True)
    out, err = python(root, IMPLEMENTATION)
    assert out == "python\n"
    assert warning(f"mcastmember is imported from its source folder {root}, where the compiled "
                   "extension is not built: install it (pip install .) and run from another "
                   "folder, build it in place (python setup.py build_ext --inplace), or set "
                   "MCASTMEMBER_NO_EXTENSIONS=1 to choose pure Python") in err
    assert python(root, IMPLEMENTATION, forced=True) == ("python\n", "")


def test_an_extension_that_does_not_load_warns_at_import(tmp_path):
    out, err = python(layout(tmp_path, broken=True), IMPLEMENTATION)
    assert out == "python\n"
    assert warning("the compiled extension is installed but does not load (") in err
    assert "reinstall mcastmember, or set MCASTMEMBER_NO_EXTENSIONS=1 to choose pure Python" in err


# mcast-demo join (line view, then JSON lines) and the doctor, in the copy
DEMO = """
import sys
from mcastmember.tools.cli import main
port = sys.argv[1]
loopback = ["228.0.0.4", "--port", port, "--interface", "127.0.0.1", "--ttl", "0"]
# No TCP listener: a concurrent run holding port 4001 would add its warning.
main(["join", *loopback, "--member-port", "4001", "--no-tcp-listener", "--duration", "0"])
print("--")
main(["join", *loopback, "--member-port", "4001", "--no-tcp-listener", "--duration", "0",
      "--json"])
print("--")
main(["doctor", *loopback, "--wait", "0"])
"""


@pytest.mark.network
def test_an_install_without_the_extension_is_quiet_at_import_and_the_demo_says_so(
        tmp_path, group_port):
    root = layout(tmp_path)
    assert python(root, IMPLEMENTATION) == ("python\n", "")
    why = ("the compiled extension is not installed (the package was built without it): "
           "reinstall mcastmember where a C compiler is available, or set "
           "MCASTMEMBER_NO_EXTENSIONS=1 to choose pure Python")
    out, err = python(root, DEMO, str(group_port))
    line_view, json_lines, doctor = out.split("--\n")
    assert line_view.splitlines()[1][len("HH:MM:SS "):] == f"note: {NOTE}{why}"
    assert json_lines == ""
    assert err == f"mcast-demo: note: {NOTE}{why}\n"
    assert doctor.splitlines()[0] == f"NOTE {NOTE}{why}"
    # asked for: nothing to say beyond the codec's name in the header
    out, err = python(root, DEMO, str(group_port), forced=True)
    line_view, json_lines, doctor = out.split("--\n")
    assert "(python codec, auth off)" in line_view.splitlines()[0]
    assert "note" not in out.lower() and err == ""


SUITE = "def test_one():\n    pass\n"


@pytest.mark.skipif(not (TESTS.parent / "pyproject.toml").exists(),
                    reason="needs the source tree (pyproject.toml)")
def test_the_suite_refuses_a_source_folder_without_the_extension(tmp_path):
    root = layout(tmp_path, checkout=True)
    (root / "tests").mkdir()
    for name in ("conftest.py", "support.py", "tribes.py"):
        shutil.copy2(TESTS / name, root / "tests" / name)
    (root / "tests" / "test_one.py").write_text(SUITE)
    shutil.copy2(TESTS.parent / "pyproject.toml", root / "pyproject.toml")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCASTMEMBER_")}
    # python -m pytest, as a contributor might: the current folder comes first
    command = [sys.executable, "-m", "pytest", "-q", "tests/test_one.py"]
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == pytest.ExitCode.USAGE_ERROR
    assert (f"ERROR: the tests imported mcastmember from its source folder {root / 'mcastmember'}, "
            "where the compiled extension is not built (python -m pytest puts the current "
            "folder first on sys.path): install it (pip install '.[test]') and run `pytest` "
            "itself, or build it in place (python setup.py build_ext --inplace); or set "
            "MCASTMEMBER_NO_EXTENSIONS=1 to test the pure-Python implementation alone."
            ) in done.stderr
    env["MCASTMEMBER_NO_EXTENSIONS"] = "1"
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.network
def test_the_demo_from_a_checkout_says_pure_python_runs_once(tmp_path, group_port):
    root = layout(tmp_path, checkout=True)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("MCASTMEMBER_") and k != "PYTHONWARNINGS"}
    command = [sys.executable, "-m", "mcastmember", "join", "228.0.0.4", "--port",
               str(group_port), "--interface", "127.0.0.1", "--ttl", "0", "--member-port",
               "4001", "--no-tcp-listener", "--duration", "0"]
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stderr == ""
    notes = [line for line in done.stdout.splitlines() if NOTE in line]
    assert [line[len("HH:MM:SS "):] for line in notes] == [
        f"note: {NOTE}mcastmember is imported from its source folder {root}, where the "
        "compiled extension is not built: install it (pip install .) and run from another "
        "folder, build it in place (python setup.py build_ext --inplace), or set "
        "MCASTMEMBER_NO_EXTENSIONS=1 to choose pure Python"]


MATCHER = ("from mcastmember.gossip.memberlist import matcher\n"
           "print(matcher.DEFAULT.__name__.rpartition('.')[2])\n"
           "print(matcher.FALLBACK)\n")


def test_the_gossip_matcher_is_chosen_and_explained_as_the_heartbeat_kernel_is(tmp_path):
    """One chooser for every compiled module: the gossip matcher's twin runs
    under the same switch, with the same explained fallback and warnings."""
    checkout = layout(tmp_path / "checkout", checkout=True)
    why = (f"mcastmember is imported from its source folder {checkout}, where the compiled "
           "extension is not built: install it (pip install .) and run from another "
           "folder, build it in place (python setup.py build_ext --inplace), or set "
           "MCASTMEMBER_NO_EXTENSIONS=1 to choose pure Python")
    out, err = python(checkout, MATCHER)
    assert out == f"_matcher_py\n{NOTE}{why}\n"
    assert warning(why) in err
    assert python(checkout, MATCHER, forced=True) == ("_matcher_py\nNone\n", "")
    installed = layout(tmp_path / "installed")
    why = ("the compiled extension is not installed (the package was built without it): "
           "reinstall mcastmember where a C compiler is available, or set "
           "MCASTMEMBER_NO_EXTENSIONS=1 to choose pure Python")
    assert python(installed, MATCHER) == (f"_matcher_py\n{NOTE}{why}\n", "")
    broken = layout(tmp_path / "broken")
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    (broken / "mcastmember" / "gossip" / "memberlist" / f"_matcher{suffix}").write_bytes(b"not a shared object")
    out, err = python(broken, MATCHER)
    assert out.startswith(f"_matcher_py\n{NOTE}the compiled extension is installed but does not load (")
    assert warning("the compiled extension is installed but does not load (") in err
