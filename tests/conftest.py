"""Shared fixtures: both codec implementations and a group port per test.
Vectors and loopback settings live in support.py."""

import importlib
import os
import random
import socket

import pytest

import mcastmember
from mcastmember.tribes.kernel import codec as _codec
from mcastmember.tribes.kernel import _fast_py

from tribes import build_harness

try:
    _fast = importlib.import_module("mcastmember.tribes.kernel._fast")
    _MISSING = None
except ImportError as error:
    _fast, _MISSING = None, error

IMPLEMENTATIONS = [pytest.param(_fast_py, id="python"),
                   pytest.param(_fast, id="compiled",
                                marks=pytest.mark.skipif(_fast is None,
                                                         reason="MCASTMEMBER_NO_EXTENSIONS=1: "
                                                                "pure Python only"))]


def pytest_configure(config):
    """The suite refuses to run without the compiled extension unless
    MCASTMEMBER_NO_EXTENSIONS=1 says that pure Python is what is tested: a
    contributor must not believe the compiled path passed when it never ran
    (as when `python -m pytest` imports the source folder, where it is not
    built)."""
    if _fast is not None or _codec._FORCE_PYTHON:
        return
    where = os.path.dirname(mcastmember.__file__)
    if _codec.source_tree() is not None:
        why = (f"the tests imported mcastmember from its source folder {where}, where the "
               "compiled extension is not built (python -m pytest puts the current folder "
               "first on sys.path): install it (pip install '.[test]') and run `pytest` "
               "itself, or build it in place (python setup.py build_ext --inplace)")
    else:
        why = (f"the mcastmember installed at {where} has no compiled extension that loads "
               f"({_MISSING}): reinstall it where a C compiler is available")
    raise pytest.UsageError(f"{why}; or set MCASTMEMBER_NO_EXTENSIONS=1 to test the "
                            "pure-Python implementation alone.")


def pytest_collection_modifyitems(items):
    # Marked so that a second pass with the other default implementation
    # (CI's pure-Python pass) can leave out what it would only repeat:
    # -m "not both_codecs" (see .ci/run).
    for item in items:
        if "codec" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.both_codecs)


@pytest.fixture(params=IMPLEMENTATIONS)
def codec(request):
    """Each codec test runs against the pure-Python twin and the compiled module."""
    return request.param


@pytest.fixture
def group_port():
    """A group port of its own for each test, so concurrent runs never cross."""
    for _ in range(50):
        port = random.randint(20000, 60000)
        probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            probe.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
        finally:
            probe.close()
    pytest.skip("no free UDP port")


@pytest.fixture(scope="session")
def classpath(tmp_path_factory):
    """Tomcat's jars and the compiled interop harness (tests/interop), or a skip."""
    path, reason = build_harness(tmp_path_factory.mktemp("tribes-classes"))
    if path is None:
        pytest.skip(reason)
    return path


@pytest.fixture(params=["asyncio", "threads"])
def running_front(request, group_port):
    """A factory of started members of one kind of front (fronts.FRONTS) on
    the test's group port; all are closed afterwards."""
    from fronts import FRONTS
    made = []

    def make(member_port, **settings):
        node = FRONTS[request.param](group_port, member_port, **settings)
        made.append(node)
        node.start()
        return node
    yield make
    for node in made:
        node.close()
