"""mcast-demo doctor --gossip for a member started as a serf agent is: a
seed that is not up (refused or silent, by TCP and by UDP) with what --join
and --retry-join do about it, a label the seed does not take (memberlist >=
0.3 closes the stream; memberlist 0.2 reads the label header as an unknown
message), and the address given to --advertise. On loopback, against Python
members and crafted memberlist seeds."""

import json
import socket
import threading

import pytest

pytest.importorskip("msgpack")

from mcastmember.gossip.fronts.service import SerfService  # noqa: E402
from mcastmember.gossip.memberlist import framing, messages  # noqa: E402
from mcastmember.gossip.memberlist.crypto import Keyring  # noqa: E402
from mcastmember.gossip.memberlist.label import split_label  # noqa: E402
from mcastmember.gossip.memberlist.layout import MessageType, NodeState  # noqa: E402
from mcastmember.tools.cli import main  # noqa: E402
from test_cli_gossip import K1, b64  # noqa: E402
from test_serf_service import free_port  # noqa: E402

JOIN_ADVICE = ("mcast-demo gossip --join gives up at once when no seed answers: --retry-join keeps trying "
               "until the seed is up, as serf agent -retry-join does")
SERF_VSN = bytes((1, 5, 2, 2, 5, 4))


def doctor(capsys, *extra, bind=None):
    bind = bind or f"127.0.0.1:{free_port('127.0.0.1')}"
    status = main(["doctor", "--gossip", "--bind", bind, "--node", "doc", "--wait", "1", "--json", *extra])
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is (status == 0)
    return status, report["checks"]


def by_name(checks):
    return {c["name"]: c for c in checks}


def closed_port(host):
    """A port nothing listens on, by TCP or UDP."""
    return free_port(host)


def test_a_seed_that_is_not_up_is_refused_by_tcp_and_udp_with_what_to_do(capsys):
    seed = f"127.0.0.2:{closed_port('127.0.0.2')}"
    port = seed.split(":")[1]
    status, checks = doctor(capsys, "--join", seed)
    assert status == 1
    assert checks[1:] == [
        {"name": "seed_tcp", "status": "fail",
         "detail": f"{seed} refuses TCP connections: nothing listens on port {port} there (the seed is not up?)",
         "fix": f"start the seed's agent (serf agent -bind {seed}), or join the port it binds; {JOIN_ADVICE}"},
        {"name": "seed_udp", "status": "fail",
         "detail": f"{seed} refuses UDP too: nothing listens on UDP port {port} there",
         "fix": "start the seed's agent there (serf members on it tells whether it runs)"}]


def test_a_seed_down_beside_one_that_answers_is_a_warning(capsys):
    down = f"127.0.0.3:{closed_port('127.0.0.3')}"
    port = free_port("127.0.0.2")
    with SerfService("py1", "127.0.0.2", port):
        status, checks = doctor(capsys, "--join", f"{down},127.0.0.2:{port}")
    assert status == 0
    assert [(c["name"], c["status"]) for c in checks] == [
        ("gossip_bind", "pass"), ("seed_tcp", "warn"), ("seed_udp", "warn"), ("seed_tcp", "pass"),
        ("label", "pass"), ("key", "pass"), ("protocol", "pass"), ("name", "pass"), ("seed_udp", "pass")]
    assert checks[1]["detail"].endswith(f"(the seed is not up?) (the join goes through 127.0.0.2:{port})")


class CraftedSeed:
    """A memberlist node reduced to what it does with a stream's label:
    ``rules`` 0.3 (the label header checked against ``label``, a stream
    without the right one closed unanswered, replies without a header) or
    0.2 (no labels: a label header is an unknown message type, the stream
    closed; with ``key``, a stream that starts unencrypted is answered with
    memberlist's error, encrypted)."""

    def __init__(self, rules, label=b"", key=None):
        self.rules, self.label, self.key = rules, label, key
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.4", 0))
        self.listener.listen(8)
        self.address = f"127.0.0.4:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _reply(self, request):
        keyring = Keyring((self.key,)) if self.key else None
        got, start = split_label(request)
        if self.rules == "0.3" and got != self.label:
            return b""
        if self.rules == "0.2" and request[:1] == bytes((MessageType.HAS_LABEL,)):
            if keyring is None:
                return b""
            error = messages.Err(error="Encryption is configured but remote state is not encrypted")
            return framing.encode_stream(messages.encode(error), keyring=keyring)
        node = messages.PushNodeState(name="go1", addr=bytes([127, 0, 0, 4]), port=7946, meta=b"",
                                      incarnation=1, state=NodeState.ALIVE, vsn=SERF_VSN)
        return framing.encode_stream(messages.encode_push_pull(messages.PushPull(False, [node], b"")),
                                     keyring=keyring)

    def _serve(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                reply = self._reply(conn.recv(65536))
                if reply:
                    conn.sendall(reply)

    def close(self):
        self.listener.close()


@pytest.fixture
def crafted(request):
    seed = CraftedSeed(*request.param)
    yield seed
    seed.close()


LABEL_FIX = "--label with the cluster's label (the seed's memberlist configuration names it)"
NO_LABEL_FIX = "leave out --label on this node (or give every member the same label)"


@pytest.mark.parametrize("crafted", [("0.3", b"blue")], indirect=True)
def test_a_seed_that_takes_neither_our_label_nor_none_has_another(capsys, crafted):
    status, checks = doctor(capsys, "--join", crafted.address, "--label", "green")
    assert status == 1
    assert checks[1:] == [
        {"name": "seed_tcp", "status": "pass", "detail": f"{crafted.address} takes TCP connections", "fix": None},
        {"name": "label", "status": "fail",
         "detail": f"{crafted.address} closed the connection without an answer, with this node's label 'green' "
                   "and without a label: the labels differ (memberlist >= 0.3 closes a stream whose label it "
                   "does not take, and names the label only in its configuration)",
         "fix": LABEL_FIX}]


@pytest.mark.parametrize("crafted", [("0.3", b"blue")], indirect=True)
def test_a_seed_that_expects_a_label_we_lack_is_named(capsys, crafted):
    status, checks = doctor(capsys, "--join", crafted.address)
    assert status == 1
    assert by_name(checks)["label"] == {
        "name": "label", "status": "fail",
        "detail": f"{crafted.address} closed the connection without an answer: it expects a label "
                  "(memberlist >= 0.3 closes a stream that lacks its label), or is no memberlist node",
        "fix": LABEL_FIX}


@pytest.mark.parametrize("crafted, extra", [
    (("0.2",), []),
    (("0.2", b"", K1), ["--encrypt", b64(K1)]),
], indirect=["crafted"], ids=["plain", "encrypted"])
def test_a_seed_without_labels_is_told_from_our_label(capsys, crafted, extra):
    status, checks = doctor(capsys, "--join", crafted.address, "--label", "green", *extra)
    assert status == 1
    assert [c["name"] for c in checks] == ["gossip_bind", "seed_tcp", "label"]
    assert checks[2] == {
        "name": "label", "status": "fail",
        "detail": f"{crafted.address} refused this node's label 'green' and answers without one: it has no "
                  "label (memberlist 0.2, as Debian's serf agent, or no label set)",
        "fix": NO_LABEL_FIX}


@pytest.mark.parametrize("extra, advice", [
    ([], "with --retry-join this member tries again every 30 s, for as long as it runs (--retry-max 0): "
         "it joins once the seed is up"),
    (["--retry-interval", "2s", "--retry-max", "3"],
     "with --retry-join this member tries again every 2 s, 3 more times at most (--retry-max), then exits 1: "
     "it joins once the seed is up"),
], ids=["defaults", "interval-and-max"])
def test_a_retry_join_seed_not_up_is_checked_and_the_retries_told(capsys, extra, advice):
    seed = f"127.0.0.2:{closed_port('127.0.0.2')}"
    status, checks = doctor(capsys, "--retry-join", seed, *extra)
    assert status == 1
    assert [(c["name"], c["status"]) for c in checks] == [("gossip_bind", "pass"), ("seed_tcp", "fail"),
                                                          ("seed_udp", "fail")]
    assert checks[1]["fix"] == f"start the seed's agent (serf agent -bind {seed}), or join the port it binds; {advice}"


def test_join_and_retry_join_seeds_are_each_checked_once(capsys):
    port = free_port("127.0.0.2")
    seed = f"127.0.0.2:{port}"
    with SerfService("py1", "127.0.0.2", port):
        status, checks = doctor(capsys, "--join", seed, "--retry-join", seed)
    assert (status, [c["name"] for c in checks].count("seed_tcp")) == (0, 1)


def test_an_advertised_address_of_this_host_that_is_not_bound_fails(capsys):
    port = free_port("127.0.0.2")
    seed = f"127.0.0.2:{port}"
    bind = f"127.0.0.5:{free_port('127.0.0.5')}"
    with SerfService("py1", "127.0.0.2", port):
        status, checks = doctor(capsys, "--join", seed, "--advertise", "127.0.0.6:7000", bind=bind)
    assert status == 1
    assert checks[1] == {
        "name": "advertise", "status": "fail",
        "detail": f"--advertise 127.0.0.6:7000 is this host's, but the member binds {bind}: members dial "
                  "127.0.0.6:7000, where it does not listen",
        "fix": f"--advertise {bind}, or --bind 127.0.0.6:7000"}


def test_advertising_the_bound_address_passes(capsys):
    port = free_port("127.0.0.2")
    bind = f"127.0.0.5:{free_port('127.0.0.5')}"
    with SerfService("py1", "127.0.0.2", port):
        status, checks = doctor(capsys, "--join", f"127.0.0.2:{port}", "--advertise", bind, bind=bind)
    assert (status, checks[1]) == (0, {"name": "advertise", "status": "pass",
                                       "detail": f"{bind} is the address and port bound", "fix": None})
