"""The examples run as documented and see each other (loopback only)."""

import os
import pathlib
import subprocess
import sys

import pytest

from support import next_line, rest_of_stdout

EXAMPLES = pathlib.Path(__file__).parent.parent / "examples"
pytestmark = pytest.mark.network


def test_async_and_threaded_examples_see_each_other(tmp_path, group_port):
    follower = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "async_service.py"), "--member-port", "4101",
         "--port", str(group_port), "--duration", "3"], stdout=subprocess.PIPE, text=True, cwd=tmp_path,
        env=dict(os.environ, PYTHONUNBUFFERED="1"))
    joined = next_line(follower)          # it is up: the worker's first heartbeat is heard
    threaded = subprocess.run(
        [sys.executable, str(EXAMPLES / "cluster_service.py"), "--member-port", "4102",
         "--port", str(group_port), "--role", "worker", "--duration", "1.2"], capture_output=True, text=True,
        cwd=tmp_path, timeout=30)
    out = joined + "\n" + rest_of_stdout(follower)
    follower.wait(30)
    assert follower.returncode == 0 and threaded.returncode == 0
    assert "added  127.0.0.1:4102 worker" in out
    assert "removed shutdown 127.0.0.1:4102 worker" in out
    assert out.rstrip().endswith("left the group")
    assert "peer 127.0.0.1:4101 joined as api" in threaded.stderr
    assert "workers I can use now: none" in threaded.stderr
