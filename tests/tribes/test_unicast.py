"""Unicast heartbeats through both fronts, on loopback addresses (127.0.0.x):
all see all without multicast, a goodbye reaches every peer, a stranger is
refused, and one node hears multicast and unicast members at once."""

import socket
import threading
import time

import pytest

from mcastmember.tribes.kernel import codec as _codec

from support import heartbeat, wait_until

NODES = ["127.0.0.1", "127.0.0.2", "127.0.0.3"]


@pytest.fixture
def cluster(running_front, group_port):
    def make(address, member_port, **settings):
        settings.setdefault("multicast", False)
        return running_front(member_port, interface=address, **settings)
    return make


def hosts(node):
    return sorted(socket.inet_ntoa(m.host) for m in node.members())


def test_three_nodes_see_each_other_by_unicast_and_a_goodbye_reaches_all(cluster):
    peers = ",".join(NODES)
    nodes = [cluster(address, 4001 + i, peers=peers) for i, address in enumerate(NODES)]
    for i, node in enumerate(nodes):
        wait_until(lambda: hosts(node) == sorted(set(NODES) - {NODES[i]}))
    nodes[2].stop()
    for node in nodes[:2]:
        node.events.wait_for(lambda e: e.kind == "removed" and e.reason == "shutdown")
        assert node.events.kinds(4003) == [("added", None), ("removed", "shutdown")]
    stats = nodes[0].stats()
    assert stats["peers"] == 2 and stats["unicast_sent"] > 0
    assert stats["unicast_send_errors"] == 0 and stats["refused_unlisted"] == 0


def test_a_stranger_is_refused_unless_unknown_peers_are_accepted(cluster, group_port):
    strict = cluster("127.0.0.1", 4001, peers=["127.0.0.2"])
    lenient = cluster("127.0.0.3", 4003, peers=["127.0.0.2"], accept_unknown=True)
    forger = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    forger.bind(("127.0.0.9", 0))
    try:
        packet = heartbeat(_codec.impl, port=4009, uid=b"\x09" * 16, host=b"\x7f\x00\x00\x09")
        for address in ("127.0.0.1", "127.0.0.3"):
            forger.sendto(packet, (address, group_port))
        wait_until(lambda: strict.stats()["refused_unlisted"] == 1)
        wait_until(lambda: hosts(lenient) == ["127.0.0.9"])
        assert strict.members() == []
    finally:
        forger.close()


def test_one_node_hears_multicast_and_unicast_members_at_once(cluster):
    both = cluster("127.0.0.1", 4001, multicast=True, peers=["127.0.0.2"])
    unicast_only = cluster("127.0.0.2", 4002, peers=["127.0.0.1"])
    multicast_only = cluster("127.0.0.1", 4003, multicast=True)
    wait_until(lambda: sorted(m.port for m in both.members()) == [4002, 4003])
    wait_until(lambda: [m.port for m in unicast_only.members()] == [4001])
    wait_until(lambda: [m.port for m in multicast_only.members()] == [4001])


def test_keyed_unicast_members_are_authenticated_and_an_unkeyed_peer_is_dropped(cluster):
    ring = [(1, bytes(range(32)))]
    peers = ",".join(NODES)
    a = cluster("127.0.0.1", 4001, peers=peers, keys=ring)
    b = cluster("127.0.0.2", 4002, peers=peers, keys=ring)
    cluster("127.0.0.3", 4003, peers=peers)                    # listed, but without the key
    wait_until(lambda: {m.port: m.authenticated for m in a.members()} == {4002: True})
    wait_until(lambda: {m.port: m.authenticated for m in b.members()} == {4001: True})
    wait_until(lambda: a.stats().get("auth.no_trailer", 0) > 0)
    assert a.stats()["refused_unlisted"] == 0
    b.stop()
    a.events.wait_for(lambda e: e.kind == "removed" and e.reason == "shutdown")
    assert a.events.kinds(4002) == [("added", None), ("removed", "shutdown")]


class SlowDns:
    """A DNS server on loopback that holds its first answer back ``delay``
    seconds, so that a lookup stays in flight: ``name`` has the A record
    ``address`` (and no AAAA)."""

    def __init__(self, name, address, delay):
        import dns.message
        import dns.rrset
        self._message, self._rrset = dns.message, dns.rrset
        self.name, self.address, self.delay = name, address, delay
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.server = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.asked = threading.Event()
        self.answered = threading.Event()
        self._closing = threading.Event()
        # A short receive timeout lets close() stop the thread before the
        # socket goes: a thread still reading a closed socket's number would
        # read the next socket given that number (the next test's).
        self.sock.settimeout(0.05)
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        while not self._closing.is_set():
            try:
                data, source = self.sock.recvfrom(4096)
            except socket.timeout:
                continue
            query = self._message.from_wire(data)
            if not self.asked.is_set():
                self.asked.set()
                time.sleep(self.delay)
            reply = self._message.make_response(query)
            question = query.question[0]
            if question.rdtype == 1:        # A
                reply.answer.append(self._rrset.from_text(question.name, 0, "IN", "A",
                                                          self.address))
            self.sock.sendto(reply.to_wire(), source)
            self.answered.set()

    def close(self):
        self._closing.set()
        self._thread.join(5)
        self.sock.close()


def test_dns_members_wait_calmly_while_a_lookup_is_in_flight(cluster):
    # With dns_members nothing else is due while the answer is awaited: the
    # threaded front's loop once crashed on the infinite deadline, again and
    # again until the answer came (internal_errors, "membership driver failed").
    pytest.importorskip("dns.message", reason="dnspython is not installed")
    server = SlowDns("members.test", "127.0.0.2", delay=0.5)
    try:
        node = cluster("127.0.0.1", 4001, dns="members.test", dns_members=True,
                       dns_servers=[server.server])
        assert server.asked.wait(5)
        assert server.answered.wait(5)
        wait_until(lambda: [(m.host, m.port) for m in node.members()] == [
            (b"\x7f\x00\x00\x02", 4001)])
        stats = node.stats()
        assert (stats["internal_errors"], stats["lookups_answered"]) == (0, 1)
    finally:
        server.close()


def test_a_strangers_copy_of_a_members_heartbeat_keeps_nobody_alive(cluster, group_port):
    """A listed peer's heartbeat, then the very same bytes from an address
    that is not a peer: refused and counted like any stranger's, so the peer,
    silent itself, expires at its drop time. (The bytes match a known member:
    they must not pass as its heartbeat on the way that skips parsing.)"""
    node = cluster("127.0.0.1", 4001, peers=["127.0.0.2"])
    packet = heartbeat(_codec.impl, port=4002, uid=b"\x02" * 16, host=b"\x7f\x00\x00\x02")
    peer, stranger = (socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(2))
    try:
        peer.bind(("127.0.0.2", 0))
        stranger.bind(("127.0.0.9", 0))
        peer.sendto(packet, ("127.0.0.1", group_port))
        node.events.wait_for(lambda e: e.kind == "added")
        refused = node.stats()["refused_unlisted"]
        for _ in range(12):                      # 1.2 s: three drop times (400 ms)
            stranger.sendto(packet, ("127.0.0.1", group_port))
            time.sleep(0.1)                      # paced: the stranger's heartbeats span the silence
        wait_until(lambda: node.events.kinds(4002) == [("added", None), ("removed", "expired")])
        assert node.stats()["refused_unlisted"] == refused + 12
    finally:
        peer.close()
        stranger.close()
