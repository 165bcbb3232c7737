"""A running Serf member (SerfService on loopback) under abuse from a peer
that sends what it likes: suspect floods about a live member, replayed
deaths and alives at old incarnations, a storm of joins under new names, a
push/pull announcing a huge state. No live member is removed, the tables
stay within their bounds, and the counters say what happened. The same
cases over hours, with memory measured: bench/gossip_abuse.py. The
simulator (many engines, no sockets) covers them at scale elsewhere."""

import socket

import pytest

pytest.importorskip("msgpack")

from mcastmember.gossip.fronts.service import SerfService  # noqa: E402
from mcastmember.gossip.memberlist import framing
from mcastmember.gossip.memberlist import messages  # noqa: E402
from mcastmember.gossip.serf.node import SerfMemberEvent  # noqa: E402
from support import wait_until  # noqa: E402
from test_serf_service import free_port, view  # noqa: E402

VSN = bytes((1, 5, 2, 2, 5, 4))
MAX_NODES = 24
ATTACKER = "127.0.0.3"


def _packet(*msgs):
    return framing.add_crc(msgs[0] if len(msgs) == 1 else framing.make_compound(list(msgs)))


def _push_pull_header(nodes, user_state_len):
    header = messages.PushPullHeader(nodes=nodes, user_state_len=user_state_len, join=False)
    return bytes((messages.PushPullHeader.TYPE,)) + header.encode_body()


def test_a_running_member_keeps_its_live_members_and_its_bounds_under_abuse():
    pa, pb = free_port("127.0.0.1"), free_port("127.0.0.2")
    gossip = {"max_nodes": MAX_NODES}
    with SerfService("a", "127.0.0.1", pa, seed=1, **gossip) as a, \
            SerfService("b", "127.0.0.2", pb, seed=2, **gossip) as b, \
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as evil:
        evil.bind((ATTACKER, 0))
        failed = []
        a.add_listener(lambda e: failed.append(e) if isinstance(e, SerfMemberEvent) and e.member.name == "b"
                       and e.kind in ("failed", "left", "reaped") else None)
        assert b.join([("127.0.0.1", pa)]).joined == 1
        wait_until(lambda: set(view(a)) == {"a", "b"} and view(a)["b"][1] == "alive" and view(b)["a"][1] == "alive")
        inc = a.node.engine.node("b").incarnation
        send = lambda data: evil.sendto(data, ("127.0.0.1", pa))  # noqa: E731

        # Accusations about b from made-up accusers: b hears them through a's gossip and refutes.
        for i in range(300):
            send(_packet(messages.encode(messages.Suspect(incarnation=inc, node="b", from_=f"liar-{i}"))))
        wait_until(lambda: b.stats()["refutes"] >= 1)
        wait_until(lambda: a.node.engine.node("b").incarnation > inc and view(a)["b"][1] == "alive")

        # Replays: b's death and alives at incarnations it has left behind,
        # and an alive under b's name from another address.
        for i in range(300):
            old = i % inc                          # b is past inc now: every one is old
            send(_packet(messages.encode(messages.Dead(incarnation=old, node="b", from_="liar")),
                         messages.encode(messages.Alive(incarnation=old, node="b", addr=bytes((127, 0, 0, 2)),
                                                        port=pb, vsn=VSN))))
        # (loopback drops part of a flood when the receive buffer fills: this one is sent until it counts)
        conflict = _packet(messages.encode(messages.Alive(incarnation=inc + 100, node="b",
                                                          addr=bytes((127, 0, 0, 3)), port=pb, vsn=VSN)))
        wait_until(lambda: send(conflict) and a.stats()["name_conflicts"] >= 1)

        # A storm of joins under new names, far past the table's bound.
        for i in range(400):
            send(_packet(*[messages.encode(messages.Alive(incarnation=1, node=f"ghost-{i}-{j}",
                                                          addr=bytes((127, 0, 0, 3)), port=9, vsn=VSN))
                           for j in range(5)]))

        # A push/pull announcing more nodes, and more user state, than anyone may send.
        for header in (_push_pull_header(10**7, 0), _push_pull_header(1, 10**10)):
            with socket.create_connection(("127.0.0.1", pa)) as tcp:
                tcp.sendall(header)
                tcp.settimeout(5)
                while tcp.recv(4096):                # at most an error message, then closed on us
                    pass

        wait_until(lambda: a.stats()["streams_bad"] >= 2 and a.stats()["nodes_refused"] > 0)
        stats = a.stats()
        assert stats["nodes"] <= MAX_NODES
        assert stats["bad_input.too_many"] >= 1 and stats["bad_input.too_large"] >= 1
        assert stats["serf_members"] <= MAX_NODES
        assert stats["suspects"] >= 1
        # b is alive in a's view and a in b's, and a never marked b failed or gone
        wait_until(lambda: view(a)["b"][1] == "alive" and view(b)["a"][1] == "alive")
        assert failed == []
