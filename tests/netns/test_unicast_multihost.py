"""Hosts where multicast cannot pass find each other by unicast alone:
network namespaces whose switch floods no multicast and
whose routing tables hold no multicast route, discovering each other through
a real DNS server (dnsmasq, started here) and through a static list. A crash
is expired at the drop time, a goodbye is seen at once, a host added to DNS
joins within one interval and one period, a DNS outage costs nothing, a
stranger is refused, and events alternate with nothing lost. Last, with
multicast let through for it, one node hears a multicast-only and a
unicast-only node at once.

Host 0 of each cluster runs the API (``netlab.service_command``, for its
stats), the others ``mcast-demo join --json``; both run on the implementation
the suite runs on (MCASTMEMBER_NO_EXTENSIONS is inherited). Needs root, and
dnsmasq and dnspython for the DNS cases; skipped with the reason otherwise."""

import errno
import signal
import socket
import threading
import time
import uuid

import pytest

from mcastmember.tribes.kernel import codec as _codec
from mcastmember.tribes.kernel import _fast_py

from mcastmember.tribes.wire import layout as _layout

import dnslab
from netlab import (JsonProcess, Lan, assert_alternating, count_datagrams, demo_command, event,
                    run_in_netns, service_command, wait_added, wait_all_see_all)
from support import heartbeat, wait_until

FREQUENCY, DROP_TIME, DNS_INTERVAL = 0.1, 0.6, 0.1
# What the readers of the processes' output and a busy two-core machine add
# to a measured time: the goodbye is asserted within 100 ms + this.
SCHEDULING_SLACK = 0.05
# ... and an expiry or a DNS change, which wait on the engine's timers too,
# within their bound + this.
TIMER_SLACK = 0.1
NAME = "members.test"
NODES, LATE, DNS_HOST, STRANGER = (0, 1, 2), 3, 4, 5
GROUP = "228.0.0.4"
MODES = ["static", "dns"]

pytestmark = [pytest.mark.network,
              pytest.mark.skipif(Lan.available() is not None, reason=str(Lan.available()))]


@pytest.fixture(scope="module")
def lan():
    with Lan(6) as network:
        for index in range(6):
            network.block_multicast(index)
        yield network


@pytest.fixture(scope="module")
def dns_server(lan, tmp_path_factory):
    reason = dnslab.available()
    if reason:
        pytest.skip(reason)
    pytest.importorskip("dns.resolver", reason="dnspython is not installed")
    server = dnslab.DnsServer(lan.hosts[DNS_HOST], lan.address(DNS_HOST),
                              tmp_path_factory.mktemp("dns"))
    server.records = {NAME: [lan.address(i) for i in NODES]}
    server.start()
    yield server
    server.stop()


@pytest.fixture
def dns(lan, dns_server):
    """The server, running, with the three nodes (and nobody else) under NAME."""
    if dns_server.proc is None:
        dns_server.start()
    if dns_server.records != {NAME: [lan.address(i) for i in NODES]}:
        dns_server.set({NAME: [lan.address(i) for i in NODES]})
    return dns_server


def demo_argv(settings):
    """``mcast-demo join --json`` with the options that give ``settings``."""
    argv = demo_command() + ["join", "--json"]
    for key, value in settings.items():
        if key == "address":
            argv += [value] if value else []
        elif key == "multicast":
            argv += [] if value else ["--no-multicast"]
        else:
            flag = "--dns-server" if key == "dns_servers" else "--" + key.replace("_", "-")
            argv += [flag, ",".join(value) if isinstance(value, list) else str(value)]
    return argv


class Cluster:
    """Nodes on ``lan`` that find each other by unicast through ``mode``
    (the static list of NODES, or NAME in DNS)."""

    def __init__(self, lan, mode):
        self.lan, self.mode = lan, mode
        self.procs = {}
        self.started = []          # every process, restarted ones too

    def settings(self, index):
        settings = {"address": None, "multicast": False, "interface": self.lan.address(index),
                    "frequency": int(FREQUENCY * 1000), "drop_time": int(DROP_TIME * 1000)}
        if self.mode == "static":
            settings["peers"] = [self.lan.address(i) for i in NODES]
        else:
            settings.update(dns=NAME, dns_servers=[self.lan.address(DNS_HOST)],
                            dns_interval=int(DNS_INTERVAL * 1000))
        return settings

    def start(self, index, settings=None):
        """Host ``index``'s node: the API on host 0, mcast-demo elsewhere."""
        settings = settings or self.settings(index)
        if settings.get("multicast", True) is False:
            assert self.lan.multicast_routes(index) == []
        argv = service_command(settings) if index == 0 else demo_argv(settings)
        proc = self.procs[index] = JsonProcess(self.lan, index, argv)
        self.started.append(proc)
        return proc

    def start_all(self):
        procs = [self.start(index) for index in NODES]
        wait_all_see_all(self.lan, procs)
        return procs

    def close(self):
        for proc in self.started:
            proc.stop(signal.SIGKILL)


@pytest.fixture(params=MODES)
def cluster(request, lan):
    if request.param == "dns":
        request.getfixturevalue("dns")
    nodes = Cluster(lan, request.param)
    yield nodes
    nodes.close()


def history(proc, host):
    """What ``proc`` said about member ``host``: [(event, reason), ...]."""
    return [(item["event"], item["reason"]) for _, item in proc.lines
            if item["event"] in ("added", "removed") and item["member"]["host"] == host]


def assert_nothing_lost(cluster):
    assert_alternating(cluster.lan, cluster.started)
    for proc in cluster.started:
        assert [item for _, item in proc.lines if item["event"] == "events_lost"] == []


def wait_stats(proc, key, at_least, timeout=10.0):
    """``proc``'s stats once ``stats[key]`` reached ``at_least``."""
    return wait_until(lambda: (stats := proc.stats()).get(key, 0) >= at_least and stats, timeout,
                      interval=FREQUENCY, message=lambda: f"{key} >= {at_least}")


def send_from(address, packets, targets):
    """Send each of ``packets`` from ``address`` to each of ``targets``."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.bind((address, 0))
        for packet in packets:
            for target in targets:
                sock.sendto(packet, (target, 45564))
    finally:
        sock.close()


def multicast_send():
    """Try to send to GROUP as the routing table has it (no card named, no
    address bound, either of which picks a card without a route): the
    errno, or None when it went."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.sendto(b"anyone?", (GROUP, 45564))
        return None
    except OSError as error:
        return error.errno
    finally:
        sock.close()


def test_multicast_cannot_pass_on_this_lan(lan):
    """The premise: no host has a multicast route (a plain send to the group
    fails: no route), and what a socket sends anyway by naming its card
    (IP_MULTICAST_IF) reaches nobody, while unicast does."""
    for index in range(6):
        assert lan.multicast_routes(index) == []
        assert run_in_netns(lan.hosts[index], multicast_send) == errno.ENETUNREACH

    def named_card_send():
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF,
                            socket.inet_aton(lan.address(0)))
            for _ in range(10):
                sock.sendto(b"multicast", (GROUP, 45564))
                time.sleep(0.02)
            sock.sendto(b"unicast", (lan.address(1), 45564))
        finally:
            sock.close()

    heard, listening = {}, threading.Event()
    listener = threading.Thread(target=lambda: heard.update(
        run_in_netns(lan.hosts[1], count_datagrams, GROUP, 45564, "eth0", 1.5, listening)))
    listener.start()
    assert listening.wait(15.0)
    run_in_netns(lan.hosts[0], named_card_send)
    listener.join()
    assert heard == {lan.address(0): 1}            # the unicast datagram alone


def test_all_see_all_without_multicast(cluster):
    # Host 0 first, and in DNS its first answer: a heartbeat that came
    # before it would be refused (nobody is a peer yet), and counted.
    procs = [cluster.start(0)]
    if cluster.mode == "dns":
        wait_stats(procs[0], "lookups_answered", 1)
    procs += [cluster.start(index) for index in NODES[1:]]
    wait_all_see_all(cluster.lan, procs)
    time.sleep(3 * FREQUENCY)                      # on purpose: nothing more may come
    for proc in procs:
        for other in NODES:
            if other != proc.index:
                assert history(proc, cluster.lan.address(other)) == [("added", None)]
    stats = procs[0].stats()
    assert stats["implementation"] == _codec.IMPLEMENTATION     # the one this suite runs
    assert stats["peers"] == 2 and stats["members"] == 2
    assert stats["unicast_sent"] > 0 and stats["unicast_send_errors"] == 0
    assert stats["refused_unlisted"] == 0
    assert [k for k, v in stats.items() if k.startswith("lookups_failed") and v] == []
    assert stats["lookups_answered"] >= (1 if cluster.mode == "dns" else 0)
    assert_nothing_lost(cluster)


def test_a_killed_host_expires_at_the_drop_time_and_a_goodbye_is_seen_at_once(cluster):
    procs = cluster.start_all()
    lan = cluster.lan
    killed = time.monotonic()
    procs[2].stop(signal.SIGKILL)
    for proc in procs[:2]:
        seen, item = proc.wait_for(event("removed", lan.address(2)), timeout=3)
        assert item["reason"] == "expired"
        # silent for at most one period before the kill, dropped a drop time after that
        assert DROP_TIME - FREQUENCY <= seen - killed <= DROP_TIME + FREQUENCY + TIMER_SLACK

    back = cluster.start(2)                        # a new process: a new unique id
    procs = [procs[0], procs[1], back]
    for proc in procs[:2]:
        wait_added(proc, lan.address(2), 2)
    for index in (0, 1):
        back.wait_for(event("added", lan.address(index)))
    leaving = procs[1]
    stopped = time.monotonic()
    leaving.proc.send_signal(signal.SIGTERM)
    for proc in (procs[0], back):
        seen, item = proc.wait_for(event("removed", lan.address(1)), timeout=3)
        assert item["reason"] == "shutdown"
        assert seen - stopped <= 0.1 + SCHEDULING_SLACK
    assert leaving.proc.wait(5) == 0

    twice = [("added", None), ("removed", "expired"), ("added", None)]
    assert history(procs[0], lan.address(2)) == twice
    assert history(procs[1], lan.address(2)) == twice + [("removed", "stopped")]   # it left
    assert history(procs[0], lan.address(1)) == [("added", None), ("removed", "shutdown")]
    assert history(back, lan.address(1)) == [("added", None), ("removed", "shutdown")]
    assert history(back, lan.address(0)) == [("added", None)]
    assert_nothing_lost(cluster)


@pytest.mark.parametrize("cluster", ["dns"], indirect=True)
def test_a_host_added_to_dns_joins_within_an_interval_and_a_period(cluster, dns, lan):
    procs = cluster.start_all()
    late = cluster.start(LATE)
    # Not in DNS yet: it hears nobody (nobody sends to it) and its heartbeats are refused.
    wait_stats(procs[0], "refused_unlisted", 3)
    assert [item for _, item in late.lines if item["event"] != "stats"] == []
    changed = time.monotonic()
    dns.set({NAME: [lan.address(i) for i in (*NODES, LATE)]})
    for proc in procs:
        seen, _ = proc.wait_for(event("added", lan.address(LATE)), timeout=3)
        assert seen - changed <= DNS_INTERVAL + FREQUENCY + TIMER_SLACK
    for index in NODES:
        seen, _ = late.wait_for(event("added", lan.address(index)), timeout=3)
        assert seen - changed <= DNS_INTERVAL + FREQUENCY + TIMER_SLACK
    time.sleep(2 * FREQUENCY)                      # on purpose: no second event may come
    for proc in procs:
        assert history(proc, lan.address(LATE)) == [("added", None)]
        assert history(late, lan.address(proc.index)) == [("added", None)]
    assert procs[0].stats()["peers"] == 3
    assert_nothing_lost(cluster)


@pytest.mark.parametrize("cluster", ["dns"], indirect=True)
def test_the_dns_server_gone_longer_than_the_drop_time_changes_nothing(cluster, dns):
    procs = cluster.start_all()
    before = [list(proc.lines) for proc in procs]
    dns.proc.kill()
    dns.proc.wait(5)
    dns.proc = None
    # Longer than the drop time, and than a query's 2 s timeout: at least
    # one query fails while the server is away.
    time.sleep(2.5)                                # on purpose: no member may be lost meanwhile
    stats = wait_stats(procs[0], "lookups_failed.timeout", 1)
    dns.start()
    assert stats["peers"] == 2 and stats["members"] == 2
    failures = {key: value for key, value in stats.items()
                if key.startswith("lookups_failed") and value}
    assert list(failures) == ["lookups_failed.timeout"] and failures["lookups_failed.timeout"] >= 1
    wait_stats(procs[0], "lookups_answered", stats["lookups_answered"] + 1, timeout=5)
    time.sleep(DROP_TIME)                          # on purpose: a drop time, in which no event may come
    for proc, lines in zip(procs, before):
        assert [item for _, item in proc.lines if item["event"] != "stats"] == \
            [item for _, item in lines if item["event"] != "stats"]
    for proc in procs[1:]:                         # mcast-demo logged it, once (rate-limited)
        # a lookup whose A was answered just before the kill fails in part
        # (its AAAA timed out): the same complaint, in the same rate limit
        assert (proc.stderr.count(f"cannot resolve {NAME} (timeout")
                + proc.stderr.count(f"{NAME} answered in part (timeout")) == 1, proc.stderr
    assert_nothing_lost(cluster)


def test_a_forged_heartbeat_from_an_unlisted_host_is_refused(cluster):
    """From a namespace that is neither listed nor in DNS: a new member in
    its own name, copies of host 1's heartbeat (the bytes that refresh it
    without parsing) and a goodbye in its name. All refused, counted, and
    nobody's table changes."""
    procs = cluster.start_all()
    lan = cluster.lan
    refused = procs[0].stats()["refused_unlisted"]
    stranger = lan.address(STRANGER)
    joining = heartbeat(_fast_py, port=4000, uid=uuid.uuid4().bytes,
                        host=socket.inet_aton(stranger))
    _, added = procs[0].wait_for(event("added", lan.address(1)))
    one = added["member"]

    def as_one(command):
        return _fast_py.encode(1, one["port"], -1, -1, socket.inet_aton(one["host"]), command,
                               bytes.fromhex(one["domain_hex"]), bytes.fromhex(one["unique_id"]),
                               bytes.fromhex(one["payload_hex"]))
    forged = [joining] * 3 + [as_one(b"")] * 3 + [as_one(_layout.SHUTDOWN_COMMAND)]
    targets = [lan.address(i) for i in NODES]
    run_in_netns(lan.hosts[STRANGER], send_from, stranger, forged, targets)
    wait_stats(procs[0], "refused_unlisted", refused + 7)
    time.sleep(3 * FREQUENCY)                      # on purpose: no more refusals, no stranger added
    assert procs[0].stats()["refused_unlisted"] == refused + 7
    for proc in procs:
        assert history(proc, stranger) == []
        for other in NODES:
            if other != proc.index:
                assert history(proc, lan.address(other)) == [("added", None)]
    assert_nothing_lost(cluster)


def test_a_node_doing_both_hears_a_multicast_only_and_a_unicast_only_node(lan):
    """Multicast let through for hosts 0 and 2 only (flooding and a route):
    host 0 heartbeats on the group and to host 1 by unicast, host 1 by
    unicast alone, host 2 on the group alone."""
    for index in (0, 2):
        lan.block_multicast(index, blocked=False)
    nodes = Cluster(lan, "static")
    address = lan.address
    timing = {"frequency": int(FREQUENCY * 1000), "drop_time": int(DROP_TIME * 1000)}
    try:
        both = nodes.start(0, {"address": GROUP, "multicast": True,
                                     "interface": address(0), "peers": [address(1)], **timing})
        unicast = nodes.start(1, {"address": None, "multicast": False,
                                        "interface": address(1), "peers": [address(0)],
                                        **timing})
        multicast = nodes.start(2, {"address": GROUP, "interface": address(2), **timing})
        for observer, host in ((both, 1), (both, 2), (unicast, 0), (multicast, 0)):
            observer.wait_for(event("added", address(host)), timeout=5)
        time.sleep(3 * FREQUENCY)                  # a few heartbeats both ways before the goodbye
        stopped = time.monotonic()
        both.proc.send_signal(signal.SIGTERM)
        for proc in (unicast, multicast):          # its goodbye goes both ways
            seen, _ = proc.wait_for(event("removed", address(0), "shutdown"), timeout=3)
            assert seen - stopped <= 0.1 + SCHEDULING_SLACK
        assert both.proc.wait(5) == 0
        assert history(both, address(1)) == [("added", None), ("removed", "stopped")]
        assert history(both, address(2)) == [("added", None), ("removed", "stopped")]
        for proc in (unicast, multicast):
            assert history(proc, address(0)) == [("added", None), ("removed", "shutdown")]
        assert history(unicast, address(2)) == [] and history(multicast, address(1)) == []
        assert_nothing_lost(nodes)
    finally:
        nodes.close()
        for index in (0, 2):
            lan.block_multicast(index)
