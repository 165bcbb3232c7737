"""The agent RPC of a gossip member (``rpc_addr``), on both fronts, with a
raw msgpack client: each command answers with the agent's own shapes
(headers, bodies, stream records), the handshake and the token come first,
streams carry what their filter names until stopped, a query streams its
acks, responses and end, a monitor the log lines at its level and above,
and a leave asked by RPC stops the member (and ends mcast-demo gossip,
whose --rpc-addr is checked as the setting). Loopback only, under a second
each."""

import base64
import logging
import shutil
import subprocess
import sys
import types

import pytest

pytest.importorskip("msgpack")

from mcastmember.gossip.fronts.service import SerfService  # noqa: E402
from mcastmember.gossip.serf.events import QueryReceived  # noqa: E402
from rpc_client import FAST, FRONTS, RpcClient, on_front  # noqa: E402
from support import free_gossip_port, free_tcp_port, wait_until  # noqa: E402

# What a Serf agent adds around a member is written once, above the gossip
# engine; the default implementation (compiled or pure) changes only the hot
# path's matcher beneath it, so CI's compiled pass runs these (single_pass).
pytestmark = pytest.mark.single_pass


#: a member that stops is marked failed within half a second or so
QUICK_FAILURE = {"suspicion_mult": 1, "suspicion_max_timeout_mult": 1, "probe_interval": 0.1, "probe_timeout": 0.05}


def record(name, port, tags, addr=b"\x7f\x00\x00\x01", status="alive"):
    """A member as Serf's agent lists it (its RPC's Member)."""
    return {"Addr": addr, "DelegateCur": 5, "DelegateMax": 5, "DelegateMin": 2, "Name": name, "Port": port,
            "ProtocolCur": 2, "ProtocolMax": 5, "ProtocolMin": 1, "Status": status, "Tags": tags}


def second_member(**settings):
    """py2 on 127.0.0.2, answering every query it gets with b"py2 here"."""
    svc = SerfService("py2", "127.0.0.2", free_gossip_port("127.0.0.2"), tags={"role": "db"}, **{**FAST, **settings})
    svc.add_listener(lambda e: svc.respond(e, b"py2 here") if isinstance(e, QueryReceived) else None)
    return svc.start()


@pytest.mark.parametrize("front", FRONTS)
def test_the_handshake_comes_first_then_the_token(front):
    def work(svc, on):
        addr = svc.rpc_address
        with RpcClient(addr) as early:
            assert early.call("members") == ({"Error": "Handshake required", "Seq": 1}, None)
            assert early.closed()
        with RpcClient(addr) as client:
            assert client.call("handshake", {"Version": 2})[0] == {"Error": "Unsupported IPC version", "Seq": 1}
            client.handshake()
            assert client.call("handshake", {"Version": 1})[0]["Error"] == "Handshake already performed"
            assert client.call("members") == ({"Error": "Authentication required", "Seq": 4}, None)
            assert client.call("auth", {"AuthKey": "wrong"})[0]["Error"] == "Invalid authentication token"
            assert client.call("auth", {"AuthKey": "s3cret"})[0]["Error"] == ""
            head, body = client.call("members")
            assert (head, [m["Name"] for m in body["Members"]]) == ({"Error": "", "Seq": 7}, ["py1"])
            assert client.call("bogus") == ({"Error": "Unsupported command", "Seq": 8}, None)
            assert client.closed()
        stats = on(svc.stats)
        return {k: stats[k] for k in ("rpc_auth_failures", "rpc_requests", "rpc_requests_bad",
                                      "rpc_connections_accepted")}

    assert on_front(front, work, rpc_auth="s3cret") == {"rpc_auth_failures": 2, "rpc_requests": 9,
                                                        "rpc_requests_bad": 1, "rpc_connections_accepted": 2}


@pytest.mark.parametrize("front", FRONTS)
def test_members_filtered_members_tags_and_info_are_the_agents(front):
    py2 = second_member()

    def work(svc, on):
        with RpcClient(svc.rpc_address) as client:
            client.handshake()
            stream = client.send("stream", {"Type": "member-join"})
            assert client.read() == {"Error": "", "Seq": stream}
            join = client.send("join", {"Existing": [f"127.0.0.2:{py2.port}"], "Replay": False})
            got = {}
            while len(got) < 2:         # the stream's record and the join's answer, in either order
                head, body = client.read(), client.read()
                if body.get("Members", [{}])[0].get("Name") != "py1":   # (our own, if handed out after start)
                    got[head["Seq"]] = body
            assert got == {join: {"Num": 1}, stream: {"Event": "member-join", "Members": [
                record("py2", py2.port, {"role": "db"}, b"\x7f\x00\x00\x02")]}}
            wait_until(lambda: len(on(svc.members)) == 2)
            head, body = client.call("members")
            assert body == {"Members": [record("py1", svc.port, {"role": "py"}),
                                        record("py2", py2.port, {"role": "db"}, b"\x7f\x00\x00\x02")]}
            names = {}
            for key, flt in (("tag", {"Tags": {"role": "d.*"}, "Status": "", "Name": ""}),
                             ("name", {"Tags": {}, "Status": "", "Name": "py1"}),
                             ("status", {"Tags": {}, "Status": "failed", "Name": ""}),
                             ("unanchored", {"Tags": {"role": "d"}, "Status": "", "Name": ""})):
                names[key] = [m["Name"] for m in client.call("members-filtered", flt)[1]["Members"]]
            assert names == {"tag": ["py2"], "name": ["py1"], "status": [], "unanchored": []}
            assert client.call("tags", {"Tags": {"zone": "a"}, "DeleteTags": ["role"]})[0]["Error"] == ""
            assert on(lambda: svc.node.tags) == {"zone": "a"}
            info = client.call("stats")[1]
            assert (info["agent"], info["tags"], info["event_handlers"]) == (
                {"name": "py1"}, {"zone": "a"}, {"user:deploy": "true", "member-join:": "true"})
            assert {k: info["serf"][k] for k in ("members", "failed", "left", "encrypted")} == {
                "members": "2", "failed": "0", "left": "0", "encrypted": "false"}
            own = client.call("get-coordinate", {"Node": "py1"})[1]
            unknown = client.call("get-coordinate", {"Node": "nobody"})[1]
            assert (own["Ok"], len(own["Coord"]["Vec"]), unknown["Ok"]) == (True, 8, False)

    try:
        on_front(front, work, tags={"role": "py"}, event_handlers=("user:deploy,member-join=true",))
    finally:
        py2.stop()


@pytest.mark.parametrize("front", FRONTS)
def test_a_stream_carries_the_events_its_filter_names_until_stopped(front):
    def work(svc, on):
        with RpcClient(svc.rpc_address) as client:
            client.handshake()
            assert client.call("stream", {"Type": "member-bogus"})[0]["Error"] == "Invalid event filter"
            stream = client.send("stream", {"Type": "user:deploy,member-leave"})
            assert client.read() == {"Error": "", "Seq": stream}
            assert client.call("event", {"Name": "other", "Payload": b"x", "Coalesce": True})[0]["Error"] == ""
            assert client.call("event", {"Name": "deploy", "Payload": b"v1", "Coalesce": False})[0]["Error"] == ""
            # the first record is the second event's: "other" is not in the filter
            assert client.record(stream) == {"Event": "user", "LTime": 2, "Name": "deploy", "Payload": b"v1",
                                             "Coalesce": False}
            assert client.call("stop", {"Stop": stream})[0] == {"Error": "", "Seq": stream + 3}
            client.call("event", {"Name": "deploy", "Payload": b"v2", "Coalesce": False})
            # a stopped stream sends nothing more: the next bytes are the answer to the next request
            assert client.call("members")[0] == {"Error": "", "Seq": stream + 5}
            big = client.call("event", {"Name": "deploy", "Payload": b"x" * 600, "Coalesce": False})[0]
            assert big["Error"].startswith("user event exceeds")
            return on(svc.stats)["rpc_streams_open"]

    assert on_front(front, work) == 0


@pytest.mark.parametrize("front", FRONTS)
def test_a_query_streams_its_acks_responses_and_end(front):
    py2 = second_member()

    def work(svc, on):
        on(lambda: svc.join([("127.0.0.2", py2.port)]))
        wait_until(lambda: len(on(svc.members)) == 2 and len(py2.members()) == 2)
        with RpcClient(svc.rpc_address) as client:
            client.handshake()
            assert client.call("query", {"Name": "_serf_x", "Payload": b""})[0]["Error"] == \
                "Queries cannot contain the '_serf_' prefix"
            seq = client.send("query", {"Name": "whoami", "Payload": b"?", "RequestAck": True,
                                        "Timeout": 400_000_000, "FilterNodes": [], "FilterTags": {},
                                        "RelayFactor": 0})
            assert client.read() == {"Error": "", "Seq": seq}
            records = []
            while not records or records[-1]["Type"] != "done":
                records.append(client.record(seq))
            acks = sorted(r["From"] for r in records if r["Type"] == "ack")
            answers = [(r["From"], r["Payload"]) for r in records if r["Type"] == "response"]
            assert (acks, answers, records[-1]) == (["py1", "py2"], [("py2", b"py2 here")],
                                                    {"Type": "done", "From": "", "Payload": None})

    try:
        on_front(front, work)
    finally:
        py2.stop()


@pytest.mark.parametrize("front", FRONTS)
def test_a_streamed_query_is_answered_by_respond(front):
    def work(svc, on):
        with RpcClient(svc.rpc_address) as watcher, RpcClient(svc.rpc_address) as asker:
            watcher.handshake()
            asker.handshake()
            stream = watcher.send("stream", {"Type": "query:ping-me"})
            assert watcher.read() == {"Error": "", "Seq": stream}
            seq = asker.send("query", {"Name": "ping-me", "Payload": b"hi", "Timeout": 300_000_000})
            assert asker.read() == {"Error": "", "Seq": seq}
            query = watcher.record(stream)
            assert {k: query[k] for k in ("Event", "ID", "Name", "Payload")} == {
                "Event": "query", "ID": 1, "Name": "ping-me", "Payload": b"hi"}
            assert watcher.call("respond", {"ID": 9, "Payload": b"?"})[0]["Error"] == "No pending queries matching ID"
            assert watcher.call("respond", {"ID": 1, "Payload": b"pong"})[0]["Error"] == ""
            assert asker.record(seq) == {"Type": "response", "From": "py1", "Payload": b"pong"}
            assert asker.record(seq)["Type"] == "done"

    on_front(front, work)


@pytest.mark.parametrize("front", FRONTS)
def test_a_monitor_gets_the_log_lines_at_its_level_and_above(front, monkeypatch):
    monkeypatch.setattr(logging.getLogger("mcastmember"), "level", logging.DEBUG)
    handlers = list(logging.getLogger("mcastmember").handlers)

    def work(svc, on):
        # the lines are taken by a filter: no handler added, so an application that
        # configured no logging still gets Python's last-resort output of warnings
        assert logging.getLogger("mcastmember").handlers == handlers
        with RpcClient(svc.rpc_address) as client:
            client.handshake()
            assert client.call("monitor", {"LogLevel": "loud"})[0]["Error"] == "Unknown log level: LOUD"
            seq = client.send("monitor", {"LogLevel": "warn"})
            assert client.read() == {"Error": "", "Seq": seq}
            assert client.call("monitor", {"LogLevel": "info"})[0]["Error"] == "Monitor already exists"
            logging.getLogger("mcastmember").info("below the monitor's level")
            logging.getLogger("mcastmember").warning("rpc test line %d", 7)
            line = client.record(seq)["Log"]
            assert line[19:] == " [WARN] rpc test line 7" and line[4] == line[7] == "/"

    on_front(front, work)


@pytest.mark.parametrize("front", FRONTS)
def test_keys_are_listed_installed_used_and_removed(front):
    old, new = bytes(range(16)), bytes(range(16, 32))
    b64 = {k: base64.b64encode(k).decode() for k in (old, new)}

    def work(svc, on):
        with RpcClient(svc.rpc_address) as client:
            client.handshake()
            listed = client.call("list-keys")
            assert listed == ({"Error": "", "Seq": 2}, {"Messages": {}, "Keys": {b64[old]: 1}, "NumNodes": 1,
                                                         "NumErr": 0, "NumResp": 1})
            for command, key in (("install-key", new), ("use-key", new), ("remove-key", old)):
                head, body = client.call(command, {"Key": b64[key]})
                assert (head["Error"], body["NumResp"], body["NumErr"]) == ("", 1, 0)
            assert client.call("list-keys")[1]["Keys"] == {b64[new]: 1}
            bad = client.call("install-key", {"Key": "not base64!"})[0]["Error"]
            assert bad.startswith("illegal base64 data")
            return on(lambda: svc.node.engine.keyring.keys)

    assert on_front(front, work, keys=[old]) == (new,)


@pytest.mark.parametrize("front", FRONTS)
def test_force_leave_marks_a_failed_member_left_and_leave_stops_the_member(front):
    def work(svc, on):
        py2 = second_member(**QUICK_FAILURE)
        on(lambda: svc.join([("127.0.0.2", py2.port)]))
        wait_until(lambda: len(on(svc.members)) == 2)
        py2.stop()          # no leave: it fails
        wait_until(lambda: [m.status.name for m in on(svc.members)] == ["ALIVE", "FAILED"])
        with RpcClient(svc.rpc_address) as client:
            client.handshake()
            bad = client.call("join", {"Existing": ["nowhere"], "Replay": False})
            assert bad == ({"Error": "seed 'nowhere': 'nowhere' is not an IP address", "Seq": 2}, {"Num": 0})
            assert client.call("force-leave", {"Node": "py2"})[0] == {"Error": "", "Seq": 3}
            assert [m.status.name for m in on(svc.members)] == ["ALIVE", "LEFT"]
            assert client.call("leave") == ({"Error": "", "Seq": 4}, None)
            wait_until(lambda: not svc.running)

    on_front(front, work, leave_propagate_delay=0.1, **QUICK_FAILURE)


@pytest.fixture
def serfclient():
    # serfclient 1.2.0 reads its own version with pkg_resources, which
    # setuptools no longer ships: give it one that answers, if it is missing
    if "pkg_resources" not in sys.modules:
        try:
            import pkg_resources  # noqa: F401
        except ImportError:
            sys.modules["pkg_resources"] = types.SimpleNamespace(
                get_distribution=lambda name: types.SimpleNamespace(version="unknown"))
    return pytest.importorskip("serfclient")


@pytest.mark.parametrize("front", FRONTS)
def test_serfclient_from_pypi_lists_members_sends_an_event_and_streams(front, serfclient):
    def work(svc, on):
        host, port = svc.rpc_address
        client = serfclient.SerfClient(host, port)
        members = client.members().body["Members"]
        assert [(m["Name"], m["Port"], m["Status"], m["Tags"]) for m in members] == [
            ("py1", svc.port, "alive", {"role": "py"})]
        # (another name than the stream's: a record right behind the stream's answer, in one read,
        # is one serfclient takes for its answer)
        assert client.event("warm-up", "v9", coalesce=False).head == {"Error": "", "Seq": 2}
        streamer = serfclient.SerfClient(host, port)
        stream = streamer.stream("user:deploy").body
        client.event("deploy", "v10", coalesce=False)
        got = next(stream).body
        return {k: got[k] for k in ("Event", "Name", "Payload")}

    assert on_front(front, work, tags={"role": "py"}) == {"Event": "user", "Name": "deploy", "Payload": b"v10"}


DEMO = [shutil.which("mcast-demo")] if shutil.which("mcast-demo") else [sys.executable, "-m", "mcastmember"]


def test_the_demo_answers_on_its_rpc_address_and_a_serf_leave_ends_it():
    rpc = ("127.0.0.1", free_tcp_port())
    demo = subprocess.Popen(DEMO + ["gossip", "--bind", f"127.0.0.1:{free_gossip_port()}", "--node", "d1",
                                    "--rpc-addr", f"{rpc[0]}:{rpc[1]}", "--rpc-auth", "tok", "--json"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd="/")
    try:
        wait_until(lambda: _answers(rpc), message="the demo's RPC")
        with RpcClient(rpc) as client:
            client.handshake(auth="tok")
            assert [m["Name"] for m in client.call("members")[1]["Members"]] == ["d1"]
            assert client.call("leave") == ({"Error": "", "Seq": 4}, None)
        assert (demo.wait(15), demo.stderr.read()) == (0, "")
    finally:
        demo.kill()
        demo.wait()


def _answers(addr):
    try:
        with RpcClient(addr, timeout=1.0) as client:
            client.handshake()
            return True
    except OSError:
        return False


@pytest.mark.parametrize("value, said", [
    ("nope", "--rpc-addr 'nope': 'nope' is not an IP address"),
    ("127.0.0.1:0", "--rpc-addr '127.0.0.1:0': port '0' is not between 1 and 65535"),
])
def test_a_bad_rpc_address_is_one_sentence_and_status_2(value, said):
    done = subprocess.run(DEMO + ["gossip", "--rpc-addr", value], capture_output=True, text=True, cwd="/",
                          timeout=30)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", f"mcast-demo gossip: error: {said}\n")
