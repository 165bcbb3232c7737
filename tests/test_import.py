"""What `import mcastmember` costs and which implementation it picked."""

import importlib.util
import os
import subprocess
import sys

import pytest

import mcastmember

# The names the gossip extra (msgpack, cryptography) backs; the packaging
# check runs these tests with the package installed alone.
GOSSIP_NAMES = ("SerfService", "AsyncSerfService", "GossipMember")
GOSSIP_EXTRA = all(importlib.util.find_spec(m) is not None for m in ("msgpack", "cryptography"))


def _python(code, **env):
    run_env = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=run_env, check=True).stdout.strip()


def test_import_does_not_load_construct_or_the_service():
    out = _python("import sys, mcastmember; mcastmember.decode; "
                  "print(sorted(m for m in ('construct', 'mcastmember.tribes.fronts.service', 'threading', "
                  "'mcastmember.tribes.wire.schema') if m in sys.modules))")
    assert "construct" not in out and "mcastmember.tribes.wire.schema" not in out
    assert "mcastmember.tribes.fronts.service" not in out


def test_import_does_not_load_prometheus_client_or_the_metrics():
    """mcastmember.metrics (the optional Prometheus collector) is imported
    only by who asks for it, mcast-demo only with --metrics-port."""
    out = _python("import sys, mcastmember, mcastmember.tools.cli; mcastmember.McastService; "
                  "mcastmember.AsyncMembership; print(sorted(m for m in ('prometheus_client', "
                  "'mcastmember.metrics') if m in sys.modules))")
    assert out == "[]"


def test_import_and_the_fronts_do_not_load_the_gossip_engine():
    """mcastmember.gossip (its engine included) is loaded only by who asks for it."""
    out = _python("import sys, mcastmember, mcastmember.tools.cli; mcastmember.McastService; "
                  "mcastmember.AsyncMembership; "
                  "print(sorted(m for m in sys.modules if m.startswith('mcastmember.gossip')))")
    assert out == "[]"


def test_import_does_not_load_the_gossip_extra_nor_the_gossip_fronts():
    """SerfService, AsyncSerfService and GossipMember are names of the
    package, loaded (with msgpack and cryptography) only on first use."""
    out = _python("import sys, mcastmember; mcastmember.McastService; mcastmember.AsyncMembership; "
                  "print(sorted(m for m in sys.modules if m.partition('.')[0] in ('msgpack', 'cryptography') "
                  "or m.startswith('mcastmember.tribes.fronts.gossip')))")
    assert out == "[]"
    if not GOSSIP_EXTRA:
        pytest.skip("the gossip extra is not installed (the packaging check installs the package alone)")
    out = _python("import sys, mcastmember; from mcastmember import AsyncSerfService, GossipMember, SerfService; "
                  "print(AsyncSerfService.__module__, SerfService.__module__, GossipMember.__name__, "
                  "'msgpack' in sys.modules)")
    assert out == "mcastmember.gossip.fronts.aio mcastmember.gossip.fronts.service GossipMember True"


@pytest.mark.parametrize("missing", ["msgpack", "cryptography"])
@pytest.mark.parametrize("name", ["SerfService", "AsyncSerfService", "GossipMember"])
def test_without_the_gossip_extra_a_gossip_name_says_what_to_install(missing, name):
    if missing == "cryptography" and importlib.util.find_spec("msgpack") is None:
        pytest.skip("msgpack is missing too, and is named first")
    out = _python(f"import sys; sys.modules[{missing!r}] = None\n"
                  "import mcastmember\n"
                  f"try:\n    mcastmember.{name}\n"
                  "except ModuleNotFoundError as error:\n    print(type(error).__name__, error.name, error)")
    assert out == (f"ModuleNotFoundError {missing} the gossip fronts need the gossip extra (msgpack and "
                   "cryptography): pip install 'mcastmember[gossip]'")


def test_no_extensions_forces_pure_python():
    assert _python("import mcastmember; print(mcastmember.implementation())",
                   MCASTMEMBER_NO_EXTENSIONS="1") == "python"


def test_extension_really_loaded_when_required():
    """CI sets MCASTMEMBER_REQUIRE_EXTENSIONS=1 for the compiled run: it must be in use."""
    forced_python = os.environ.get("MCASTMEMBER_NO_EXTENSIONS") == "1"
    expected = "python" if forced_python else None
    if os.environ.get("MCASTMEMBER_REQUIRE_EXTENSIONS") == "1" and not forced_python:
        expected = "compiled"
    if expected is not None:
        assert mcastmember.implementation() == expected
    else:
        assert mcastmember.implementation() in ("compiled", "python")


def test_public_names_resolve():
    for name in mcastmember.__all__:
        if name in GOSSIP_NAMES and not GOSSIP_EXTRA:
            with pytest.raises(ModuleNotFoundError, match=r"pip install 'mcastmember\[gossip\]'"):
                getattr(mcastmember, name)
            continue
        assert getattr(mcastmember, name) is not None


def test_all_lists_every_lazy_name_and_the_checkers_see_each():
    """__all__ is spelled out (the checkers read it), as is each name's import
    under TYPE_CHECKING: both must stay the names __getattr__ loads."""
    import ast
    assert mcastmember.__all__ == sorted(mcastmember._EXPORTS)
    with open(mcastmember.__file__, encoding="utf-8") as source:
        tree = ast.parse(source.read())
    seen = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for imp in node.body:
                if isinstance(imp, ast.ImportFrom):
                    for alias in imp.names:
                        assert alias.asname == alias.name    # re-exported
                        seen[alias.name] = imp.module
    assert seen == mcastmember._EXPORTS


def test_fronts_load_without_docstrings():
    """python -OO strips docstrings: the fronts still load (takes_settings
    appends ServiceConfig's list of settings only when there is one)."""
    out = subprocess.run([sys.executable, "-OO", "-c",
                          "import inspect, mcastmember; front = mcastmember.McastService; "
                          "mcastmember.AsyncMembership; "
                          "print(front.__doc__, 'ttl' in inspect.signature(front).parameters)"],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert out == "None True"
