"""mcast-demo doctor --gossip: why a gossip member does not join its seed,
each cause against a Python Serf member on loopback (a TCP-only proxy for
UDP, a crafted memberlist node for the protocol range), and a real
`serf agent` in a network namespace."""

import json
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

pytest.importorskip("msgpack")

from mcastmember.gossip.fronts.service import SerfService  # noqa: E402
from mcastmember.gossip.memberlist import framing
from mcastmember.gossip.memberlist import messages  # noqa: E402
from mcastmember.gossip.memberlist.layout import NodeState  # noqa: E402
from mcastmember.tools.cli import main  # noqa: E402
from test_cli_gossip import K1, K2, b64  # noqa: E402
from test_serf_service import free_port  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from netlab import Lan  # noqa: E402
from support import wait_until  # noqa: E402


def doctor(capsys, seed, *extra, node="doc"):
    status = main(["doctor", "--gossip", "--bind", f"127.0.0.1:{free_port('127.0.0.1')}", "--join", seed,
                   "--node", node, "--wait", "1", "--json", *extra])
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is (status == 0)
    return status, {c["name"]: c for c in report["checks"]}


def verdicts(checks):
    return [(name, c["status"]) for name, c in checks.items()]


ALL_PASS = [("gossip_bind", "pass"), ("seed_tcp", "pass"), ("label", "pass"), ("key", "pass"),
            ("protocol", "pass"), ("name", "pass"), ("seed_udp", "pass")]


@pytest.fixture
def seed(request):
    port = free_port("127.0.0.2")
    with SerfService("py1", "127.0.0.2", port, **getattr(request, "param", {})) as svc:
        yield f"127.0.0.2:{port}", svc


def test_a_reachable_seed_with_the_same_settings_passes_every_check(capsys, seed):
    status, checks = doctor(capsys, seed[0])
    assert (status, verdicts(checks)) == (0, ALL_PASS)
    assert checks["seed_tcp"]["detail"] == f"{seed[0]} answered a push/pull: 1 node, all alive"
    assert checks["seed_udp"]["detail"] == f"{seed[0]} acked a ping by UDP"


@pytest.mark.parametrize("seed, extra, detail", [
    ({"keys": (K1,)}, [], "{seed} encrypts its traffic; this node does not"),
    ({}, ["--encrypt", b64(K1)], "this node encrypts its traffic; {seed} does not"),
    ({"keys": (K1,)}, ["--encrypt", b64(K2)], "none of this node's keys decrypts {seed}'s answer"),
], indirect=["seed"])
def test_an_encryption_mismatch_is_named(capsys, seed, extra, detail):
    status, checks = doctor(capsys, seed[0], *extra)
    assert (status, verdicts(checks)) == (1, [("gossip_bind", "pass"), ("seed_tcp", "pass"), ("label", "pass"),
                                              ("key", "fail")])
    assert checks["key"]["detail"] == detail.format(seed=seed[0])


@pytest.mark.parametrize("seed", [{"label": b"blue"}], indirect=True)
def test_a_label_mismatch_is_named_with_the_label_to_use(capsys, seed):
    status, checks = doctor(capsys, seed[0], "--label", "green")
    assert (status, verdicts(checks)) == (1, [("gossip_bind", "pass"), ("seed_tcp", "pass"), ("label", "fail")])
    assert checks["label"]["detail"] == f"{seed[0]} labels its traffic 'blue'; this node 'green'"
    assert checks["label"]["fix"] == "--label blue on this node (one label for the whole cluster)"


def test_a_name_taken_in_the_cluster_fails(capsys, seed):
    status, checks = doctor(capsys, seed[0], node="py1")
    assert (status, checks["name"]["status"]) == (1, "fail")
    assert checks["name"]["detail"] == f"the cluster has a node named 'py1' at {seed[0]} (alive)"
    assert checks["name"]["fix"] == "--node with a name no other member has"


def relay(listener, target):
    """Accept on ``listener`` and pipe each connection to ``target`` (TCP only)."""
    def pipe(a, b):
        while data := a.recv(65536):
            b.sendall(data)
        b.shutdown(socket.SHUT_WR)

    def serve():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(target)
            threading.Thread(target=pipe, args=(conn, upstream), daemon=True).start()
            threading.Thread(target=pipe, args=(upstream, conn), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()


def test_tcp_through_but_udp_dropped_fails_on_udp(capsys, seed):
    host, port = seed[0].split(":")
    front = free_port("127.0.0.3")
    with socket.socket() as listener, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:
        listener.bind(("127.0.0.3", front))
        listener.listen(4)
        silent.bind(("127.0.0.3", front))       # held, never answered: as a firewall dropping UDP
        relay(listener, (host, int(port)))
        status, checks = doctor(capsys, f"127.0.0.3:{front}")
    assert (status, verdicts(checks)) == (1, ALL_PASS[:-1] + [("seed_udp", "fail")])
    assert checks["seed_udp"]["detail"] == (f"127.0.0.3:{front} answers by TCP but not by UDP: "
                                            f"no ack to 3 pings")


def test_a_memberlist_node_outside_serfs_protocol_range_fails(capsys):
    """A plain memberlist application (delegate versions 0-0, as Alertmanager's) is no Serf cluster."""
    node = messages.PushNodeState(name="am1", addr=bytes([127, 0, 0, 4]), port=9094, meta=b"", incarnation=1,
                                  state=NodeState.ALIVE, vsn=bytes((1, 5, 2, 0, 0, 0)))
    reply = framing.encode_stream(messages.encode_push_pull(messages.PushPull(False, [node], b"")))
    port = free_port("127.0.0.4")
    with socket.socket() as listener:
        listener.bind(("127.0.0.4", port))
        listener.listen(1)

        def answer():
            conn, _ = listener.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(reply)

        threading.Thread(target=answer, daemon=True).start()
        status, checks = doctor(capsys, f"127.0.0.4:{port}")
    assert (status, checks["protocol"]["status"]) == (1, "fail")
    assert checks["protocol"]["detail"] == ("node 'doc' delegate protocol version (5) is incompatible: [2, 0]: "
                                            "the seed's cluster is not a Serf cluster, or a Serf too old or "
                                            "too new for this one")


def _no_serf():
    return Lan.available() or (None if shutil.which("serf") else "Serf is not installed (apt-get install serf)")


@pytest.mark.skipif(_no_serf() is not None, reason=_no_serf() or "")
def test_against_a_real_serf_agent_with_encryption(capsys):
    from netlab import run_in_netns

    with Lan(hosts=2, prefix="sdc") as lan:
        seed = f"{lan.address(0)}:7946"
        agent = lan.run(0, ["serf", "agent", "-node", "go1", "-bind", seed, "-rpc-addr", "127.0.0.1:7373",
                            "-encrypt", b64(K1)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            members = ["ip", "netns", "exec", lan.hosts[0], "serf", "members", "-rpc-addr", "127.0.0.1:7373"]
            # the agent is up when its RPC answers
            wait_until(lambda: subprocess.run(members, capture_output=True).returncode == 0, interval=0.1)
            args = ["doctor", "--gossip", "--bind", lan.address(1), "--join", seed, "--wait", "2", "--json"]
            results = []
            for extra in ([], ["--encrypt", b64(K1)], ["--encrypt", b64(K1), "--label", "dc1"]):
                results.append(run_in_netns(lan.hosts[1], main, args + extra))
                checks = {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
                results += [verdicts(checks), checks["label" if "--label" in extra else "key"]["detail"]]
        finally:
            agent.terminate()
            agent.wait(10)
    assert results == [1, [("gossip_bind", "pass"), ("seed_tcp", "pass"), ("label", "pass"), ("key", "fail")],
                       f"{seed} encrypts its traffic; this node does not",
                       0, ALL_PASS, "both encrypt, with a key in common",
                       # memberlist 0.2 reads a label header as an unknown message: the label told apart
                       1, [("gossip_bind", "pass"), ("seed_tcp", "pass"), ("label", "fail")],
                       f"{seed} refused this node's label 'dc1' and answers without one: it has no label "
                       "(memberlist 0.2, as Debian's serf agent, or no label set)"]
