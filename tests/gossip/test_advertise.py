"""The advertised address, as Serf's agent's -advertise: what the other
members list and reach a member at, while its sockets stay bound to
--bind. Bound to 0.0.0.0 with an advertised loopback address (the peer
talks to it only there); behind a NAT (a network namespace whose nftables
turn 127.0.0.2 into 127.0.0.1); bound to 0.0.0.0 without it, a private
address of the host is chosen, or the member refuses to start, in namespaces
of their own, so nothing is sent on the machine's own network."""

import json
import os
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("msgpack")

from mcastmember import ConfigurationError  # noqa: E402
from mcastmember.gossip.fronts.addresses import choose_advertise  # noqa: E402
from mcastmember.gossip.fronts.aio import AsyncSerfService  # noqa: E402
from mcastmember.gossip.fronts.service import SerfService  # noqa: E402
from support import child_env, free_gossip_port, wait_until  # noqa: E402
from test_retry_join import DEMO, FAST, alive_names, on_front  # noqa: E402

# What a Serf agent adds around a member is written once, above the gossip
# engine; the default implementation (compiled or pure) changes only the hot
# path's matcher beneath it, so CI's compiled pass runs these (single_pass).
pytestmark = pytest.mark.single_pass


def listed(svc, name):
    """(addr, port, status) the member ``name`` is listed with by ``svc``."""
    return next(((m.addr, m.port, m.status.name.lower()) for m in svc.members() if m.name == name), None)


@pytest.mark.parametrize("front", ["threads", "asyncio"])
def test_a_member_bound_to_every_address_is_listed_and_reached_at_the_address_it_advertises(front):
    pa, pb = free_gossip_port("0.0.0.0"), free_gossip_port()
    with SerfService("b", "127.0.0.1", pb, **FAST) as b:
        def work(a, on):
            wait_until(lambda: listed(b, "a") == ("127.0.0.2", pa, "alive"))
            reached = b.join([("127.0.0.2", pa)])                  # TCP, to the advertised address
            acks = b.stats()["acks_received"]
            wait_until(lambda: b.stats()["acks_received"] >= acks + 3)       # its probes of a, by UDP there
            return reached, listed(b, "a"), on(lambda: (a.advertise, listed(a, "a"), alive_names(a.members())))

        reached, seen_by_b, (advertise, itself, names) = on_front(
            front, pa, {"advertise": "127.0.0.2", "retry_join": [f"127.0.0.1:{pb}"]}, work, bind="0.0.0.0")
    assert (reached.joined, reached.errors) == (1, ())
    assert seen_by_b == ("127.0.0.2", pa, "alive")
    assert (advertise, itself, names) == (("127.0.0.2", pa), ("127.0.0.2", pa, "alive"), ["a", "b"])


@pytest.mark.parametrize("cls", [SerfService, AsyncSerfService])
def test_the_advertised_port_may_differ_from_the_bound_one(cls):
    member = cls("a", "127.0.0.1", free_gossip_port(), advertise="127.0.0.2:7000")
    assert (member.advertise, member.node.engine.settings.advertise_port) == (("127.0.0.2", 7000), 7000)


@pytest.mark.parametrize("route, chosen", [("10.1.2.3", "10.1.2.3"), ("192.168.0.7", "192.168.0.7")])
def test_bound_to_every_address_a_private_address_of_the_host_is_advertised(route, chosen):
    assert choose_advertise("0.0.0.0", 7946, None, route=lambda version: route) == (chosen, 7946)


@pytest.mark.parametrize("route, why", [
    (None, "this host has no route"),
    ("8.8.8.8", "the host's routes send from 8.8.8.8, not a private address"),
    ("127.0.0.1", "the host's routes send from 127.0.0.1, not a private address"),
])
def test_bound_to_every_address_with_no_private_address_the_member_refuses_to_start(route, why):
    with pytest.raises(ConfigurationError) as caught:
        choose_advertise("0.0.0.0", 7946, None, route=lambda version: route)
    assert str(caught.value) == (f"bound to 0.0.0.0, no address to advertise can be chosen ({why}): give "
                                 "advertise (--advertise) the address the others reach this member at")


@pytest.mark.parametrize("cls", [SerfService, AsyncSerfService])
@pytest.mark.parametrize("advertise, message", [
    ("127.0.0", "advertise '127.0.0': '127.0.0' is not an IP address"),
    ("0.0.0.0", "advertise '0.0.0.0' is not a specific address"),
    ("127.0.0.2:70000", "advertise '127.0.0.2:70000': port '70000' is not between 1 and 65535"),
    ("::1", "advertise '::1' is not of the bind address's family (IPv4): others could not reach us there"),
])
def test_a_bad_advertise_address_is_refused_naming_the_setting(cls, advertise, message):
    with pytest.raises(ConfigurationError) as caught:
        cls("a", "127.0.0.1", 7946, advertise=advertise)
    assert str(caught.value) == message


def test_the_demo_advertises_the_address_given_while_bound_to_every_address():
    pa, pb = free_gossip_port("0.0.0.0"), free_gossip_port()
    with SerfService("b", "127.0.0.1", pb, **FAST) as b:
        demo = subprocess.Popen(DEMO + ["gossip", "--node", "a", "--bind", f"0.0.0.0:{pa}", "--advertise",
                                        "127.0.0.2", "--join", f"127.0.0.1:{pb}", "--json"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/")
        try:
            wait_until(lambda: listed(b, "a") == ("127.0.0.2", pa, "alive"))
            assert demo.poll() is None
        finally:
            demo.kill()
            demo.wait()


# --------------------------------------------------------- in namespaces

def _netns_missing():
    if os.geteuid() != 0:
        return "needs root to make a network namespace"
    missing = [tool for tool in ("unshare", "ip", "nft") if not shutil.which(tool)]
    return f"needs {', '.join(missing)}" if missing else None


netns = pytest.mark.skipif(_netns_missing() is not None, reason=_netns_missing() or "")

# Run in a namespace of its own (unshare -n): its loopback, maybe a veth
# pair's card with a private address and a default route, maybe a NAT; prints what
# the scenario saw as one JSON line.
_SCENARIO = r"""
import json, subprocess, sys
from support import free_gossip_port, wait_until
from mcastmember.gossip.fronts.service import SerfService

def sh(*args):
    subprocess.run(args, check=True, capture_output=True)

def listed(svc, name):
    return next(([m.addr, m.port, m.status.name.lower()] for m in svc.members() if m.name == name), None)

case = sys.argv[1]
fast = dict(probe_interval=0.2, probe_timeout=0.1, gossip_interval=0.05, push_pull_interval=2.0, tcp_timeout=1.0)
sh("ip", "link", "set", "lo", "up")
if case == "private":
    sh("ip", "link", "add", "v0", "type", "veth", "peer", "name", "v1")
    sh("ip", "addr", "add", "10.9.0.1/24", "dev", "v0")
    sh("ip", "link", "set", "v1", "up")
    sh("ip", "link", "set", "v0", "up")
    sh("ip", "route", "add", "default", "via", "10.9.0.254")
    bind, seen_at, settings = "0.0.0.0", "10.9.0.1", {}
else:   # behind a NAT: 127.0.0.2 is turned into 127.0.0.1, where the member is bound
    sh("nft", "add", "table", "ip", "nat")
    sh("nft", "add", "chain", "ip", "nat", "out", "{ type nat hook output priority -100; }")
    sh("nft", "add", "rule", "ip", "nat", "out", "ip", "daddr", "127.0.0.2", "dnat", "to", "127.0.0.1")
    bind, seen_at, settings = "127.0.0.1", "127.0.0.2", {"advertise": "127.0.0.2"}
pa, pb = free_gossip_port(bind), free_gossip_port("127.0.0.3")
with SerfService("b", "127.0.0.3", pb, **fast) as b, \
        SerfService("a", bind, pa, retry_join=[f"127.0.0.3:{pb}"], retry_interval=0.2, **fast, **settings) as a:
    wait_until(lambda: listed(b, "a") == [seen_at, pa, "alive"])
    reached = b.join([(seen_at, pa)])
    acks = b.stats()["acks_received"]
    wait_until(lambda: b.stats()["acks_received"] >= acks + 3)
    print(json.dumps({"advertise": list(a.advertise), "port": pa, "listed": listed(b, "a"),
                      "joined": reached.joined, "errors": list(reached.errors)}))
"""


def _in_netns(*args, setup="ip link set lo up"):
    return subprocess.run(["unshare", "-n", "sh", "-c", f'{setup} && exec "$@"', "sh", *args],
                          capture_output=True, text=True, timeout=60, env=child_env(), cwd="/")


@netns
@pytest.mark.parametrize("case, seen_at", [("private", "10.9.0.1"), ("nat", "127.0.0.2")])
def test_in_a_namespace_the_peer_lists_and_reaches_the_member_at_its_advertised_address(case, seen_at):
    done = _in_netns(sys.executable, "-c", _SCENARIO, case)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen == {"advertise": [seen_at, seen["port"]], "port": seen["port"],
                    "listed": [seen_at, seen["port"], "alive"], "joined": 1, "errors": []}


@netns
def test_bound_to_every_address_on_a_host_with_no_route_the_demo_exits_2_with_one_sentence():
    done = _in_netns(*DEMO, "gossip", "--node", "a", "--bind", "0.0.0.0:7946")
    assert (done.returncode, done.stderr) == (
        2, "mcast-demo gossip: error: --bind 0.0.0.0:7946: bound to 0.0.0.0, no address to advertise can be "
           "chosen (this host has no route): give advertise (--advertise) the address the others reach this "
           "member at\n")
