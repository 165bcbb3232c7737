"""IPv6 groups and cards chosen by name, on hosts made of network namespaces
(loopback carries no IPv6 multicast; veth pairs on a bridge do), and a Tomcat
McastService on an IPv6 group.

Each host runs ``mcast-demo join GROUP --interface eth0 --json`` (the
threaded front), one runs AsyncMembership in-process: all see all with
16-byte hosts, a crash expires, a goodbye removes at once, a partition splits
and heals; on a host with two cards only the chosen card carries heartbeats,
and with both chosen a member is one member however many cards hear it; bad
values get one clear line; cards with only a link-local address work, and
one still in duplicate address detection is named as the cause. Tomcat's
McastService (plain, and its cluster stack) and Python members see each
other, leave and expire both ways on ff02:: and ff05:: (see the notes before
the Tomcat tests for what Tomcat needs). Needs root (skipped otherwise); the
Tomcat tests also need Java and Tomcat's jars.
"""

import asyncio
import ipaddress
import signal
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from mcastmember.tribes.fronts.aio import AsyncMembership

from netlab import (JsonProcess, Lan, added, assert_alternating, check_partition_heals,
                    count_datagrams, demo_command, event, run_in_netns, wait_added, wait_all_see_all)
from tribes import TribesNode

FREQUENCY, DROP_TIME = 100, 400         # ms
PORT = 45564
pytestmark = [pytest.mark.network,
              pytest.mark.skipif(Lan.available() is not None, reason=str(Lan.available()))]


def demo(group, interface, member_port=4000, frequency=FREQUENCY, drop_time=DROP_TIME):
    return demo_command() + ["join", group, "--interface", interface, "--member-port",
                             str(member_port), "--frequency", str(frequency), "--drop-time",
                             str(drop_time), "--json"]


def start_all(lan, group, interface="eth0", hosts=None):
    return [JsonProcess(lan, i, demo(group, interface))
            for i in (range(len(lan.hosts)) if hosts is None else hosts)]


def stop_all(procs):
    for proc in procs:
        proc.stop(signal.SIGKILL)


@pytest.fixture
def lan():
    with Lan(3, ipv6=True) as network:
        yield network


@pytest.fixture
def lan_without_ula():
    with Lan(2) as network:
        yield network


@pytest.mark.parametrize("group", ["ff02::4", "ff05::4"])
def test_ipv6_all_see_all_then_a_kill_expires_and_a_goodbye_is_instant(lan, group):
    procs = start_all(lan, group)
    try:
        wait_all_see_all(lan, procs, address=lan.address6)
        for proc in procs:
            for _, item in proc.lines:      # the 16-byte host, as text
                assert ipaddress.ip_address(item["member"]["host"]).version == 6
        killed = time.monotonic()
        procs[2].stop(signal.SIGKILL)
        for proc in procs[:2]:
            seen, item = proc.wait_for(event("removed", lan.address6(2)), timeout=3)
            assert item["reason"] == "expired"
            print(f"{group}: host {proc.index} expired the killed host after "
                  f"{(seen - killed) * 1000:.0f} ms (drop time {DROP_TIME})")
            assert seen - killed < 2.0
        stopped = time.monotonic()
        procs[1].proc.send_signal(signal.SIGTERM)
        seen, item = procs[0].wait_for(event("removed", lan.address6(1)), timeout=3)
        assert item["reason"] == "shutdown"
        print(f"{group}: goodbye seen after {(seen - stopped) * 1000:.0f} ms")
        assert seen - stopped < DROP_TIME / 1000      # not an expiry
        assert procs[1].proc.wait(5) == 0
    finally:
        stop_all(procs)
    assert_alternating(lan, procs)


def test_ipv6_partition_splits_and_heals(lan):
    procs = start_all(lan, "ff02::4")
    try:
        wait_all_see_all(lan, procs, address=lan.address6)
        check_partition_heals(lan, procs, address=lan.address6)
    finally:
        stop_all(procs)


async def _async_member(group, enough, **settings):
    """AsyncMembership on eth0 (in this thread's namespace): wait until
    ``enough(members)``, stay long enough to be seen, then leave."""
    async with AsyncMembership(group, PORT, interface="eth0", member_port=4000,
                               frequency=FREQUENCY, drop_time=DROP_TIME, **settings) as member:
        seen = await member.wait_for(enough, timeout=5)
        await asyncio.sleep(3 * FREQUENCY / 1000)     # three more heartbeats, for the other side's wait
        return [(m.address, len(m.host)) for m in seen], member.local_member.address


def test_ipv6_asyncio_front_sees_and_is_seen_on_a_link_scoped_group(lan):
    procs = start_all(lan, "ff02::4", hosts=[1, 2])
    try:
        others = [lan.address6(1), lan.address6(2)]
        seen, me = run_in_netns(lan.hosts[0], lambda: asyncio.run(_async_member(
            "ff02::4", lambda members: {m.address for m in members} >= set(others))))
        assert sorted(seen) == [(host, 16) for host in others]
        assert me == lan.address6(0)
        for proc in procs:
            proc.wait_for(event("added", me))
            proc.wait_for(event("removed", me, "shutdown"))
    finally:
        stop_all(procs)
    assert_alternating(lan, procs)


def test_ipv6_link_local_hosts_only_and_a_card_down_and_up(lan_without_ula):
    """Cards with only their link-local address (what a fresh veth or a plain
    LAN gives): members advertise it, 16 bytes, and see each other. Host 0's
    card goes down (its link-local address goes with it) and up again: each
    expires the other, and they are back, nothing doubled."""
    lan = lan_without_ula
    procs = start_all(lan, "ff02::4")
    try:
        hosts = [proc.wait_for(lambda item: item["event"] == "added")[1]["member"]["host"]
                 for proc in procs]
        assert all(ipaddress.ip_address(host).is_link_local for host in hosts), hosts
        assert hosts[0] != hosts[1]
        lan.link(0, "down")
        for proc, other in zip(procs, hosts):
            proc.wait_for(event("removed", other, "expired"), timeout=3)
        time.sleep(0.6)          # on purpose: the link stays down a while longer
        up = time.monotonic()
        lan.link(0, "up")
        for proc, other in zip(procs, hosts):
            wait_added(proc, other, 2)
        print(f"link-local: back in each other's table {time.monotonic() - up:.2f} s after up")
    finally:
        stop_all(procs)
    assert_alternating(lan, procs)


def test_a_tcp_listener_on_a_card_with_only_its_link_local_address(lan_without_ula):
    """tomcat=True on such a card: the TCP listener binds the link-local
    address with its card (the OS refuses it without), on both fronts, and
    the other host reaches it."""
    lan = lan_without_ula
    proc = JsonProcess(lan, 1, demo("ff02::4", "eth0") + ["--tomcat"])

    def connect(address):
        socket.create_connection((address, 4000), timeout=3).close()
        return True

    try:
        [(peer, _)], me = run_in_netns(lan.hosts[0], lambda: asyncio.run(_async_member(
            "ff02::4", lambda members: members, tcp_listener=True)))
        assert ipaddress.ip_address(peer).is_link_local
        assert run_in_netns(lan.hosts[0], connect, f"{peer}%eth0")
        proc.wait_for(event("removed", me, "shutdown"))
    finally:
        proc.stop(signal.SIGKILL)


def test_an_ipv6_address_still_in_duplicate_address_detection_is_named_as_the_cause(
        lan_without_ula):
    """Just after an address is added (a card just up), the kernel does not
    let it be used for a second or more: say so, not just "cannot assign"."""
    lan = lan_without_ula
    lan.sysctl(0, "net.ipv6.conf.eth0.accept_dad=1")
    lan.sysctl(0, "net.ipv6.conf.eth0.dad_transmits=30")     # tentative for 30 s
    subprocess.run(["ip", "-n", lan.hosts[0], "addr", "add", "fd00:250::77/64", "dev", "eth0"],
                   check=True, timeout=30)
    proc = lan.run(0, demo("ff05::4", "fd00:250::77"), stdout=subprocess.PIPE,
                   stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=30)
    print(err.strip())
    assert proc.returncode == 1, (out, err)
    assert len(err.strip().splitlines()) == 1, err
    assert "fd00:250::77" in err and "duplicate address detection" in err, err


# -- a host on two bridges ---------------------------------------------------------
A, B, C, D = range(4)     # A and D on both bridges, B on bridge 0 only, C on bridge 1 only


@pytest.fixture
def two_bridges():
    with Lan(4, ipv6=True, bridges=[[0, 1], [0], [1], [0, 1]]) as network:
        yield network


def _advertised(lan, group, index):
    """What host ``index`` advertises: its first card's address of the group's family."""
    bridge = lan.bridges[index][0]
    return lan.address6(index, bridge) if ":" in group else lan.address(index, bridge)


@pytest.mark.parametrize("group", ["228.0.0.4", "ff02::4", "ff05::4"])
def test_a_multi_homed_host_heartbeats_only_on_the_cards_it_is_given(two_bridges, group):
    lan = two_bridges
    host = lambda i: _advertised(lan, group, i)    # noqa: E731
    source = lan.address6 if ":" in group else lan.address
    cards = {A: "eth0", B: "eth0", C: "eth0", D: "eth0,eth1"}
    procs = [JsonProcess(lan, i, demo(group, cards[i])) for i in (A, B, D)]
    try:
        procs[0].wait_for(event("added", host(B)))
        procs[0].wait_for(event("added", host(D)))
        # Bridge 1, seen from C's card: D's heartbeats, never A's.
        heard = run_in_netns(lan.hosts[C], count_datagrams, group, PORT, cards[C], 1.0)
        print(f"{group}, A on eth0 only: bridge 1 heard {heard}")
        own = {lan.address(A, 1), lan.address6(A, 1), lan.address(A), lan.address6(A)}
        assert not own & set(heard), heard
        assert heard.get(source(D, 1), 0) > 0     # the counter does hear bridge 1
    finally:
        stop_all(procs)

    # Both cards at once: B and C each see A, and A sees B, C and D (heard on
    # both cards) once each.
    cards[A] = "eth0,eth1"
    procs = [JsonProcess(lan, i, demo(group, cards[i])) for i in (A, B, C, D)]
    try:
        for observer in procs[1:]:
            observer.wait_for(event("added", host(A)))
        for other in (B, C, D):
            procs[0].wait_for(event("added", host(other)))
        heard = run_in_netns(lan.hosts[C], count_datagrams, group, PORT, cards[C], 0.5)
        print(f"{group}, A on eth0 and eth1: bridge 1 heard {heard}")
        assert heard.get(source(A, 1), 0) > 0
        time.sleep(2 * FREQUENCY / 1000)     # on purpose: B and C must NOT hear each other meanwhile
    finally:
        stop_all(procs)
    for observer in procs:
        for other in (A, B, C, D):
            if other != observer.index:
                count = len(added(observer, host(other)))
                assert count == (0 if {observer.index, other} == {B, C} else 1), \
                    (observer.index, other, observer.lines)
    assert_alternating(lan, procs)


# -- bad values: one clear line, exit status 2 ---------------------------------------
BAD = {
    "no such card": (["ff02::4", "--interface", "nosuch0"], "nosuch0"),
    "address not on the host": (["ff05::4", "--interface", "fd00:250::99"], "fd00:250::99"),
    "IPv4 address not on the host": (["228.0.0.4", "--interface", "10.250.0.99"], "10.250.0.99"),
    "IPv4 group, IPv6 card address": (["228.0.0.4", "--interface", "fd00:250::1"], "IPv6"),
    "IPv6 group, IPv4 card address": (["ff05::4", "--interface", "10.250.0.1"], "IPv4"),
    "unicast IPv6 address as group": (["fd00:250::2", "--interface", "eth0"], "multicast"),
    "unicast IPv4 address as group": (["10.250.0.2", "--interface", "eth0"], "multicast"),
    "link-scoped group without a card": (["ff02::4"], "interface"),
}


def test_bad_values_each_get_one_clear_line_and_exit_2():
    with Lan(1, ipv6=True) as lan:
        runs = {name: lan.run(0, demo_command() + ["join", *argv], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
                for name, (argv, _) in BAD.items()}
        said = {}
        for name, proc in runs.items():
            out, err = proc.communicate(timeout=30)
            said[name] = err.strip()
            print(f"{name}: {said[name]}")
            assert proc.returncode == 2, (name, out, err)
            assert out == "" and len(said[name].splitlines()) == 1, (name, err)
            assert BAD[name][1] in err, (name, err)
    # A card that is not there is answered with the cards that are.
    assert "eth0" in said["no such card"] and "fd00:250::1" in said["no such card"]


# -- Tomcat on an IPv6 group -------------------------------------------------------------
# Tomcat's McastService given a bind address (mcastBindAddress, the
# Membership's "bind" attribute) binds its socket to the group and sends and
# joins on that address's card. An unscoped link-local group (ff02::4) then
# fails with "SocketException: Invalid argument" (Linux needs the card to
# bind a link-scoped address, and Tomcat falls back to binding the port only
# on a BindException), so the group names the card: ff02::4%eth0. Without a
# bind address the JDK chooses the card (here the only one) and ff02::4 works
# as it is. A site-scope group needs no scope either way.
TOMCAT_GROUPS = [pytest.param("ff02::4%eth0", True, id="ff02-scoped-bound"),
                 pytest.param("ff05::4", True, id="ff05-bound"),
                 pytest.param("ff02::4", False, id="ff02-unbound")]
TOMCAT_TIMING = {"frequency": 250, "drop_time": 1500}


def tomcat_node(lan, classpath, index, group, mode="plain", bind_socket=True):
    """A Tomcat node on host ``index``, its card's IPv6 address as its host."""
    return TribesNode(classpath, mode, group, PORT, 4000, bind=lan.address6(index), ttl=1,
                      netns=lan.hosts[index], bind_socket=bind_socket, **TOMCAT_TIMING)


@pytest.mark.parametrize("tomcat_group, bind_socket", TOMCAT_GROUPS)
def test_tomcat_and_python_see_each_other_leave_and_expire_on_an_ipv6_group(
        lan, classpath, tomcat_group, bind_socket):
    group = tomcat_group.split("%")[0]
    label = tomcat_group + ("" if bind_socket else ", no bind address")
    drop = TOMCAT_TIMING["drop_time"] / 1000
    # Python members on host 2: one killed, one stopped, one that watches.
    ports = (4001, 4002, 4003)
    pythons = [JsonProcess(lan, 2, demo(group, "eth0", port, **TOMCAT_TIMING)) for port in ports]
    killed_py, leaving_py, watcher = pythons
    tomcats = []
    try:
        with ThreadPoolExecutor(2) as pool:     # the two JVMs start at once
            tomcats = list(pool.map(lambda i: tomcat_node(
                lan, classpath, i, tomcat_group, bind_socket=bind_socket), (0, 1)))
        python_host = ipaddress.ip_address(lan.address6(2))
        for node in tomcats:                    # Tomcat sees Python, 16-byte hosts...
            for port in ports:
                _, member = node.wait_event("ADDED", port)
                assert ipaddress.ip_address(member.host) == python_host
        for proc in pythons:                    # ...and Python sees Tomcat
            for i, node in enumerate(tomcats):
                _, item = proc.wait_for(event("added", lan.address6(i)), timeout=10)
                assert item["member"]["port"] == 4000
                assert bytes.fromhex(item["member"]["unique_id"]) == node.unique_id

        stopped = time.monotonic()              # Tomcat leaves: Python drops it at once
        tomcats[1].stop()
        seen, _ = watcher.wait_for(event("removed", lan.address6(1), "shutdown"))
        print(f"{label}: Tomcat's goodbye seen by Python after {seen - stopped:.3f} s")

        stopped = time.monotonic()              # Python leaves: Tomcat drops it at once
        leaving_py.proc.send_signal(signal.SIGTERM)
        seen, _ = tomcats[0].wait_event("GONE", ports[1])
        print(f"{label}: Python's goodbye seen by Tomcat after {seen - stopped:.3f} s")
        assert seen - stopped < drop / 2        # not an expiry

        killed = time.monotonic()               # Python dies: Tomcat expires it
        killed_py.stop(signal.SIGKILL)
        seen, _ = tomcats[0].wait_event("GONE", ports[0])
        print(f"{label}: Tomcat expired the killed Python after {seen - killed:.3f} s "
              f"(drop time {drop} s)")

        killed = time.monotonic()               # Tomcat dies: Python expires it
        tomcats[0].kill()
        seen, _ = watcher.wait_for(event("removed", lan.address6(0), "expired"), timeout=10)
        print(f"{label}: Python expired the killed Tomcat after {seen - killed:.3f} s")
    finally:
        for node in tomcats:
            node.kill()
        stop_all(pythons)
    assert_alternating(lan, pythons)


def test_tomcats_cluster_stack_lists_a_python_member_and_reaches_it_over_ipv6(lan, classpath):
    """GroupChannel + NioReceiver + TcpFailureDetector on ff05::4: Tomcat
    lists a --tomcat member (its failure detector reaches our TCP listener
    on the IPv6 address), and what Tomcat sends it is answered at once."""
    python = JsonProcess(lan, 1, demo("ff05::4", "eth0", 4001, **TOMCAT_TIMING) + ["--tomcat"])
    stack = None
    try:
        stack = tomcat_node(lan, classpath, 0, "ff05::4", mode="stack")
        _, member = stack.wait_event("ADDED", 4001)
        assert ipaddress.ip_address(member.host) == ipaddress.ip_address(lan.address6(1))
        python.wait_for(event("added", lan.address6(0)))
        sent = stack.command("send 4001 6", ("SENT", "FAILED"))
        replies, elapsed = stack.command("rpc 4001", "RPC").split()[1:]
        print(f"stack over IPv6: {sent}; RPC answered in {elapsed} ms")
        assert sent.startswith("SENT") and replies == "0" and int(elapsed) < 5000
        stack.stop()
        python.wait_for(event("removed", lan.address6(0), "shutdown"))
    finally:
        if stack is not None:
            stack.kill()
        python.stop(signal.SIGKILL)
