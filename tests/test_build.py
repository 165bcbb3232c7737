"""The build of the compiled extensions (setup.py), run on a copy of the
source tree with a stand-in C compiler, so that no test waits for a real
compile: a build that cannot compile stops with a message naming the switch
that asks for pure Python; that switch builds nothing; the extension is
linked stripped unless the flags ask for debug information or a sanitizer.
Needs the source tree (the checkout or the sdist) and Cython."""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

SOURCE = pathlib.Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(not (SOURCE / "setup.py").exists(),
                                reason="needs the source tree (setup.py)")

# A stand-in compiler: records each command line, writes the file asked for
# with -o, and succeeds (or fails, with FAKE_CC_FAIL=1).
FAKE_CC = """#!{python}
import os, sys
with open(os.environ["FAKE_CC_LOG"], "a") as log:
    log.write(" ".join(sys.argv[1:]) + "\\n")
if os.environ.get("FAKE_CC_FAIL") == "1":
    sys.exit("fake cc: cannot compile")
out = sys.argv[sys.argv.index("-o") + 1]
open(out, "wb").close()
"""


@pytest.fixture
def tree(tmp_path):
    """A copy of what setup.py reads (the generated C too, when it is newer
    than the .pyx, so Cython does not run again)."""
    pytest.importorskip("Cython", reason="the build needs Cython")
    copy = tmp_path / "src"
    copy.mkdir()
    for name in ("setup.py", "pyproject.toml", "README.md", "LICENSE", "MANIFEST.in"):
        if (SOURCE / name).exists():
            shutil.copy2(SOURCE / name, copy / name)
    shutil.copytree(SOURCE / "mcastmember", copy / "mcastmember",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    return copy


def build(tree, tmp_path, fail=False, **env):
    cc = tmp_path / "fake-cc"
    cc.write_text(FAKE_CC.format(python=sys.executable))
    cc.chmod(0o755)
    log = tmp_path / "cc.log"
    run_env = {k: v for k, v in os.environ.items()
               if k not in ("CFLAGS", "LDFLAGS", "MCASTMEMBER_NO_EXTENSIONS",
                            "MCASTMEMBER_REQUIRE_EXTENSIONS")}
    run_env.update(CC=str(cc), FAKE_CC_LOG=str(log), FAKE_CC_FAIL="1" if fail else "0", **env)
    run_env.pop("LDSHARED", None)
    done = subprocess.run([sys.executable, "setup.py", "-q", "build_ext",
                           "--build-lib", str(tmp_path / "lib"),
                           "--build-temp", str(tmp_path / "temp")],
                          cwd=tree, env=run_env, capture_output=True, text=True, timeout=120)
    lines = log.read_text().splitlines() if log.exists() else []
    built = sorted(p.name.split(".")[0] for p in (tmp_path / "lib").rglob("*.so"))
    return done, lines, built


def test_a_build_that_cannot_compile_stops_and_names_the_switch(tree, tmp_path):
    done, _, built = build(tree, tmp_path, fail=True)
    assert done.returncode != 0
    assert built == []
    last = done.stderr.strip().splitlines()[-1]
    assert "could not build the compiled extension" in done.stderr
    assert "MCASTMEMBER_NO_EXTENSIONS=1" in last


def test_no_extensions_builds_nothing(tree, tmp_path):
    done, lines, built = build(tree, tmp_path, fail=True, MCASTMEMBER_NO_EXTENSIONS="1")
    assert done.returncode == 0, done.stderr
    assert (lines, built) == ([], [])


def link_lines(lines):
    """The link command of each extension: the heartbeat kernel and the gossip matcher."""
    links = [line.split() for line in lines if "-shared" in line.split()]
    assert len(links) == 2, lines
    return links


def test_the_extension_is_linked_stripped(tree, tmp_path):
    done, lines, built = build(tree, tmp_path)
    assert done.returncode == 0, done.stderr
    assert built == ["_fast", "_matcher"]
    assert all("-s" in line for line in link_lines(lines))


@pytest.mark.parametrize("flags", [dict(CFLAGS="-g -O1"), dict(LDFLAGS="-fsanitize=address")])
def test_debug_and_sanitizer_builds_keep_their_symbols(tree, tmp_path, flags):
    done, lines, built = build(tree, tmp_path, **flags)
    assert done.returncode == 0, done.stderr
    assert all("-s" not in line for line in link_lines(lines))
