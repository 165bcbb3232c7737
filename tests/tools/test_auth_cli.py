"""mcast-demo with keys: keygen, --key-file (bad files are one line and exit
2), authenticated members in the JSON output. Loopback only."""

import os

import pytest

from mcastmember.tribes.wire import auth

from support import GROUP
from test_cli import read_event, run, start_join


def key_file(tmp_path, text, name="keys", mode=0o600):
    path = tmp_path / name
    path.write_text(text)
    os.chmod(path, mode)
    return str(path)


def test_keygen_prints_a_key_file_line(tmp_path):
    result = run(["keygen", "--id", "7"], tmp_path)
    assert result.returncode == 0 and result.stderr == ""
    ring = auth.HeartbeatKeys.from_file(key_file(tmp_path, result.stdout))
    assert list(ring.keys) == [7] and ring.signing_id == 7
    assert run(["keygen"], tmp_path).stdout != result.stdout        # random
    bad = run(["keygen", "--id", "0"], tmp_path)
    assert bad.returncode == 2 and "not 1-255" in bad.stderr


@pytest.mark.parametrize("text, message", [
    (None, "No such file"),
    ("1 abcd\n", "line 1: the key has 4 hex digits, not 64"),
    ("# a comment\n\n1 " + "00" * 32 + "\n1 " + "11" * 32 + "\n",
     "line 4: key id 1 already on line 3"),
    ("300 " + "00" * 32, "line 1: key id 300 is not 1-255"),
    ("", "no keys"),
])
def test_bad_key_files_get_one_line_and_exit_2(tmp_path, text, message):
    path = str(tmp_path / "missing") if text is None else key_file(tmp_path, text)
    result = run(["join", GROUP, "--interface", "127.0.0.1", "--ttl", "0", "--key-file", path],
                 tmp_path)
    assert result.returncode == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_auth_without_a_key_file_is_refused(tmp_path):
    result = run(["join", GROUP, "--interface", "127.0.0.1", "--ttl", "0", "--auth",
                  "enforce"], tmp_path)
    assert result.returncode == 2 and "--auth enforce needs --key-file" in result.stderr


def test_a_world_readable_key_file_is_refused(tmp_path):
    path = key_file(tmp_path, auth.new_key_line() + "\n", mode=0o644)
    result = run(["join", GROUP, "--interface", "127.0.0.1", "--ttl", "0", "--key-file", path],
                 tmp_path)
    assert result.returncode == 2
    assert result.stderr == (f"mcast-demo join: error: key file {path} can be read or written "
                             "by every user of this host (mode 644): chmod 600 it\n")


@pytest.mark.network
def test_a_group_readable_key_file_is_warned_about(group_port, tmp_path):
    path = key_file(tmp_path, auth.new_key_line() + "\n", mode=0o640)
    result = run(["join", GROUP, "--port", str(group_port), "--interface", "127.0.0.1",
                  "--ttl", "0", "--key-file", path, "--duration", "0.2", "--no-tcp-listener"],
                 tmp_path)     # (no listener: a concurrent run holding port 4000 would warn)
    assert result.returncode == 0
    assert result.stderr == (f"mcast-demo join: warning: key file {path} can be read or "
                             "written by its group (mode 640): every user in it can forge "
                             "members; chmod 600 it unless the group is this service's own\n")


@pytest.mark.network
def test_json_says_which_members_are_authenticated(group_port, tmp_path):
    keys = key_file(tmp_path, auth.new_key_line(3) + "\n")
    # no TCP listeners: fixed member ports, which another run may hold
    quiet = "--no-tcp-listener"
    watcher = start_join(group_port, 4001, tmp_path, "--key-file", keys, "--auth", "permissive",
                         quiet)
    others = []
    try:
        others.append(start_join(group_port, 4002, tmp_path, "--key-file", keys, quiet))
        others.append(start_join(group_port, 4003, tmp_path, quiet))
        seen = {}
        while len(seen) < 2:
            event, _ = read_event(watcher)
            seen[event["member"]["port"]] = (event["event"], event["member"]["authenticated"])
        assert seen == {4002: ("added", True), 4003: ("added", False)}
    finally:
        for proc in [watcher] + others:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("kind, message", [
    ("device", "not a regular file"),              # /dev/zero was read until MemoryError
    ("fifo", "not a regular file"),                # a FIFO hung, waiting for a writer
    ("big", "70068 bytes, more than a key file's 65536"),
])
def test_a_key_file_that_is_not_a_small_regular_file_is_one_line(tmp_path, kind, message):
    if kind == "device":
        path = "/dev/zero"
    elif kind == "fifo":
        path = str(tmp_path / "fifo")
        os.mkfifo(path, 0o600)
    else:
        path = key_file(tmp_path, "#" * 70000 + "\n" + auth.new_key_line() + "\n")
    result = run(["join", GROUP, "--interface", "127.0.0.1", "--ttl", "0", "--key-file", path],
                 tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith(f"mcast-demo join: error: key file {path}: {message}")
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
