"""mcast-demo gossip as scripts use it: a demo process and a Python Serf
member on loopback (joins, tags, user events both ways, a clean leave on
SIGTERM), its keyring file following `serf keys`, and bad input."""

import base64
import json
import os
import signal
import subprocess

import pytest

pytest.importorskip("msgpack")

from mcastmember.gossip.fronts.service import SerfService  # noqa: E402
from mcastmember.gossip.serf.node import KeyResult, SerfMemberEvent  # noqa: E402
from support import next_line, wait_until  # noqa: E402
from test_cli import DEMO, run  # noqa: E402
from test_serf_service import free_port, view  # noqa: E402

# mcast-demo gossip is the gossip engine's front, one implementation whose hot
# path's two are compared elsewhere: CI's compiled pass runs these (single_pass).
pytestmark = pytest.mark.single_pass

K1, K2 = bytes(range(16)), bytes(range(16, 32))


def b64(key):
    return base64.b64encode(key).decode()


def start(tmp_path, *args):
    return subprocess.Popen(DEMO + ["gossip", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=tmp_path)


def lines_until(proc, predicate, timeout=15.0):
    """The JSON lines of ``proc`` until one satisfies ``predicate`` (all read
    so far)."""
    seen = []

    def matched():
        try:
            line = next_line(proc, timeout)
        except (AssertionError, EOFError) as error:    # no line in time, or the demo ended
            raise AssertionError(f"{error}; so far {seen}") from None
        seen.append(json.loads(line))
        return predicate(seen[-1])
    wait_until(matched, timeout, interval=0, message=lambda: f"a matching line; so far {seen}")
    return seen


def test_the_demo_joins_a_python_member_shows_events_and_leaves_on_sigterm(tmp_path):
    pb = free_port("127.0.0.2")
    with SerfService("b", "127.0.0.2", pb, tags={"role": "db"}, seed=2) as b:
        events = []
        b.add_listener(events.append)
        pa = free_port("127.0.0.1")
        demo = start(tmp_path, "--bind", f"127.0.0.1:{pa}", "--join", f"127.0.0.2:{pb}", "--node", "a",
                     "--tag", "role=web", "--tag", "dc=x=1", "--json")
        try:
            seen = lines_until(demo, lambda e: e.get("member", {}).get("name") == "b")
            assert sorted((e["event"], e["reason"], e["member"]["name"]) for e in seen) \
                == [("added", None, "a"), ("added", None, "b")]
            assert [e["member"] for e in seen if e["member"]["name"] == "b"] == [
                {"name": "b", "addr": "127.0.0.2", "port": pb, "tags": {"role": "db"}, "status": "alive"}]
            wait_until(lambda: view(b).get("a") == ("127.0.0.1", "alive", {"role": "web", "dc": "x=1"}))
            b.user_event("deploy", b"v1")
            user = lines_until(demo, lambda e: e["event"] == "user")[-1]
            assert (user["name"], user["payload"], user["payload_hex"]) == ("deploy", "v1", b"v1".hex())
            demo.send_signal(signal.SIGTERM)
            assert demo.wait(20) == 0, demo.stderr.read()
            wait_until(lambda: view(b)["a"][1] == "left", timeout=10)
            assert [e.kind for e in events if isinstance(e, SerfMemberEvent) and e.member.name == "a"] \
                == ["joined", "left"]
        finally:
            demo.kill()
            demo.wait()


def test_a_member_that_leaves_is_removed_with_reason_left(tmp_path):
    pa, pb = free_port("127.0.0.1"), free_port("127.0.0.2")
    demo = start(tmp_path, "--bind", f"127.0.0.1:{pa}", "--node", "a", "--json", "--duration", "600")
    try:
        lines_until(demo, lambda e: e["event"] == "added")
        b = SerfService("b", "127.0.0.2", pb, seed=2)
        b.start()
        try:
            assert b.join([("127.0.0.1", pa)]).joined == 1
            lines_until(demo, lambda e: e.get("member", {}).get("name") == "b")
            assert b.leave().ok
        finally:
            b.stop()
        removed = lines_until(demo, lambda e: e["event"] == "removed")[-1]
        assert (removed["reason"], removed["member"]["name"], removed["member"]["status"]) == ("left", "b", "left")
    finally:
        demo.send_signal(signal.SIGINT)
        assert demo.wait(20) == 0


def test_the_keyring_file_follows_key_rotation_and_stays_private(tmp_path):
    keyring = tmp_path / "keyring.json"
    keyring.write_text(json.dumps([b64(K1)]))
    keyring.chmod(0o600)
    pa, pb = free_port("127.0.0.1"), free_port("127.0.0.2")
    demo = start(tmp_path, "--bind", f"127.0.0.1:{pa}", "--node", "a", "--keyring-file", str(keyring), "--json")
    try:
        lines_until(demo, lambda e: e["event"] == "added")
        with SerfService("b", "127.0.0.2", pb, keys=(K1,), seed=2) as b:
            results = []
            b.add_listener(lambda e: isinstance(e, KeyResult) and results.append(e))
            assert b.join([("127.0.0.1", pa)]).joined == 1
            for op, key, expected in (("install", K2, [K1, K2]), ("use", K2, [K2, K1]), ("remove", K1, [K2])):
                b.key_operation(op, key)
                wait_until(lambda: len(results) == 1)
                result = results.pop()
                assert (op, result.ok, result.num_resp) == (op, True, 2)
                wait_until(lambda: json.loads(keyring.read_text()) == [b64(k) for k in expected])
                assert oct(keyring.stat().st_mode & 0o777) == oct(0o600)
            assert [e["event"] for e in lines_until(demo, lambda e: e["event"] == "keyring")][-1] == "keyring"
            assert b.leave().ok
    finally:
        demo.send_signal(signal.SIGTERM)
        assert demo.wait(20) == 0, demo.stderr.read()


@pytest.mark.parametrize("args, message", [
    (["--bind", "0.0.0.0", "--advertise", "0.0.0.0"], "--advertise '0.0.0.0' is not a specific address"),
    (["--bind", "127.0.0.1:70000"], "--bind 127.0.0.1:70000: port '70000' is not 1-65535"),
    (["--bind", "127.0.0.1", "--join", "10.1.2.3"], "--bind 127.0.0.1 is loopback, so 10.1.2.3:7946 cannot "
                                                    "reach this node: give --bind this host's address on "
                                                    "that network"),
    (["--encrypt", "bm90IGEga2V5"], "--encrypt: the key is 9 bytes, not 16, 24 or 32"),
    (["--encrypt", "%%%"], "--encrypt: the key is not base64"),
    (["--encrypt", b64(K1), "--keyring-file", "k"], "--encrypt and --keyring-file cannot be given together: "
                                                   "put the key in the keyring file"),
    (["--tag", "role"], "--tag role: give KEY=VALUE"),
    (["--duration", "-1"], "--duration must be a positive number of seconds"),
    (["--keyring-file", "missing.json"], "keyring file missing.json: No such file or directory"),
])
def test_bad_arguments_are_one_sentence_and_status_2(tmp_path, args, message):
    done = run(["gossip", *args], tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", f"mcast-demo gossip: error: {message}\n")


@pytest.mark.parametrize("content, mode, message", [
    ('["' + b64(K1) + '"]', 0o644, " can be read or written by every user of this host (mode 644): chmod 600 it"),
    ("[]", 0o600, ": no keys"),
    ('{"a": 1}', 0o600, ": not a JSON list of base64 keys, the primary first"),
    ('["AAAA"]', 0o600, ": key 1 is 3 bytes, not 16, 24 or 32"),
    ('["%%"]', 0o600, ": key 1 is not base64"),
])
def test_a_bad_keyring_file_is_refused(tmp_path, content, mode, message):
    path = tmp_path / "k.json"
    path.write_text(content)
    path.chmod(mode)
    done = run(["gossip", "--bind", "127.0.0.1:1", "--keyring-file", "k.json"], tmp_path)
    assert (done.returncode, done.stderr) == (2, f"mcast-demo gossip: error: keyring file k.json{message}\n")


def test_a_taken_port_and_an_unreachable_seed_exit_1(tmp_path):
    port = free_port("127.0.0.1")
    with SerfService("holder", "127.0.0.1", port):
        done = run(["gossip", "--bind", f"127.0.0.1:{port}"], tmp_path)
    assert done.returncode == 1
    assert done.stderr == f"mcast-demo gossip: cannot bind 127.0.0.1:{port}: {os.strerror(98)}\n"
    closed = free_port("127.0.0.2")
    done = run(["gossip", "--bind", f"127.0.0.1:{free_port('127.0.0.1')}", "--join", f"127.0.0.2:{closed}"],
               tmp_path)
    assert done.returncode == 1
    assert done.stderr == (f"mcast-demo gossip: cannot join 127.0.0.2:{closed}: connect: "
                           f"{os.strerror(111)} (mcast-demo doctor --gossip with these flags tells why)\n")


def test_piped_without_json_it_prints_a_line_per_event(tmp_path):
    port = free_port("127.0.0.1")
    done = run(["gossip", "--bind", f"127.0.0.1:{port}", "--node", "a", "--tag", "role=web", "--duration", "0"],
               tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    lines = [line.split(" ", 1) for line in done.stdout.splitlines()]
    assert all(len(stamp) == 8 and stamp[2] == stamp[5] == ":" for stamp, _ in lines)
    said = [text for _, text in lines]
    # our own join comes from the dispatcher thread, maybe before the first line
    assert sorted(said[:2]) == [f"added: a 127.0.0.1:{port} tags role=web",
                                f"gossiping as a on 127.0.0.1:{port} (encryption off, tags role=web)"]
    assert said[2:] == [f"removed (left): a 127.0.0.1:{port} tags role=web", "left the cluster"]


def test_a_keyring_file_its_group_may_read_is_taken_with_a_warning(tmp_path):
    path = tmp_path / "k.json"
    path.write_text(json.dumps([b64(K1), b64(K2)]))
    path.chmod(0o640)
    port = free_port("127.0.0.1")
    done = run(["gossip", "--bind", f"127.0.0.1:{port}", "--keyring-file", "k.json", "--duration", "0", "--json"],
               tmp_path)
    assert (done.returncode, done.stderr) == (0, "mcast-demo gossip: warning: keyring file k.json can be read or "
                                                 "written by its group (mode 640): every user in it can forge "
                                                 "members; chmod 600 it unless the group is this service's own\n")


def _no_serf():
    import shutil
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from netlab import Lan
    return Lan.available() or (None if shutil.which("serf") else "Serf is not installed (apt-get install serf)")


@pytest.mark.skipif(_no_serf() is not None, reason=_no_serf() or "")
def test_the_docs_walk_through_with_a_real_serf_agent(tmp_path):
    """docs/gossip.md's steps, on two network namespaces: the demo joins `serf
    agent`, both list each other, `serf event` reaches the demo, Ctrl-C shows `left`."""
    from netlab import Lan

    with Lan(hosts=2, prefix="sgc") as lan:
        go, py = lan.address(0), lan.address(1)

        def serf(*args):
            done = subprocess.run(["ip", "netns", "exec", lan.hosts[0], "serf", *args], capture_output=True,
                                  text=True, timeout=10)
            return done.stdout if done.returncode == 0 else None

        def members():
            out = serf("members", "-format", "json")
            return {m["name"]: (m["addr"], m["status"], m["tags"]) for m in json.loads(out)["members"]} if out else {}

        agent = lan.run(0, ["serf", "agent", "-node", "go1", "-bind", f"{go}:7946", "-tag", "role=go"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        demo = None
        try:
            wait_until(lambda: "go1" in members(), timeout=10)
            demo = lan.run(1, DEMO + ["gossip", "--bind", py, "--join", go, "--node", "py1", "--tag", "role=py",
                                      "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
            seen = lines_until(demo, lambda e: e.get("member", {}).get("name") == "go1")
            assert seen[-1]["member"] == {"name": "go1", "addr": go, "port": 7946, "tags": {"role": "go"},
                                          "status": "alive"}
            wait_until(lambda: members().get("py1", (0, ""))[1] == "alive", timeout=10)
            assert members()["py1"] == (f"{py}:7946", "alive", {"role": "py"})
            assert serf("event", "deploy", "v42") is not None
            user = lines_until(demo, lambda e: e["event"] == "user")[-1]
            assert (user["name"], user["payload"]) == ("deploy", "v42")
            demo.send_signal(signal.SIGINT)
            assert demo.wait(20) == 0
            wait_until(lambda: members()["py1"][1] == "left", timeout=10)
        finally:
            for proc in (demo, agent):
                if proc is not None and proc.poll() is None:
                    proc.send_signal(signal.SIGINT)
                    try:
                        proc.wait(10)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait()
