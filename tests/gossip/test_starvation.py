"""A member under decoding load keeps answering its pings: LZW bombs in
datagrams stop at the datagram's bound (far below a stream's), a push/pull
announcing more nodes than the table can hold is refused at its header, and
a big push/pull is decoded and merged a bounded turn at a time, pings
answered between the turns. The full-size soak is bench/gossip_starvation.py."""

from __future__ import annotations

import asyncio
import functools
import math
import socket
import threading
import time
import tracemalloc

import pytest

pytest.importorskip("msgpack")

from mcastmember.gossip.fronts.aio import AsyncSerfService  # noqa: E402
from mcastmember.gossip.fronts.service import SerfService  # noqa: E402
from mcastmember.gossip.memberlist import framing
from mcastmember.gossip.memberlist import matcher as hot
from mcastmember.gossip.memberlist import lzw
from mcastmember.gossip.memberlist import messages  # noqa: E402
from mcastmember.gossip.memberlist.engine import GossipEngine  # noqa: E402
from mcastmember.gossip.memberlist.events import UserMessage  # noqa: E402
from mcastmember.gossip.memberlist.layout import MessageType  # noqa: E402
from mcastmember.gossip.memberlist.limits import Limits  # noqa: E402
from mcastmember.gossip.memberlist.settings import GossipSettings  # noqa: E402
from mcastmember.gossip.serf.node import SerfMemberEvent  # noqa: E402
from mcastmember.gossip.memberlist.streams import MAX_STREAM_WORK, STREAM_TURN  # noqa: E402
from support import free_gossip_port  # noqa: E402

#: every way a datagram is opened: each matcher of the hot path, and the general framing alone
PATHS = [pytest.param(module, id=f"hot-{name}") for name, module in hot.IMPLEMENTATIONS.items()
         if module is not None] + [pytest.param(None, id="general")]
ATTACKER = ("127.0.0.3", 40000)
#: the datagram bound by default
CAP = Limits().max_packet_decompressed
#: what an engine made by _engine puts in its Vsn, and a Serf member
VSN = bytes((1, 5, 2, 0, 0, 0))
SERF_VSN = bytes((1, 5, 2, 2, 5, 4))


def _engine(hot_module=None, **settings):
    engine = GossipEngine(GossipSettings(name="victim", advertise_addr="127.0.0.1", **settings), seed=1,
                          hot=hot_module)
    engine.start(0.0)
    engine.events()            # our own join
    return engine


def _user_datagram(size):
    """A compressed datagram holding one user message of ``size`` bytes in all (type byte included)."""
    message = bytes((MessageType.USER,)) + bytes(i % 7 for i in range(size - 1))
    return message, framing.compress_message(message)


# ---------------------------------------------------------------- datagrams


@pytest.mark.parametrize("hot_module", PATHS)
def test_a_datagram_inflating_past_the_datagram_bound_is_refused_and_counted(hot_module):
    engine = _engine(hot_module)
    _message, packet = _user_datagram(CAP + 1)
    assert len(packet) < 2000                 # a few hundred bytes on the wire
    engine.receive(packet, ATTACKER, 1.0)
    stats = engine.stats()
    assert (stats["packets_received"], stats["bad_input"], stats.get("bad_input.too_large"),
            stats["user_messages_received"]) == (1, 1, 1, 0)
    assert engine.events() == []


@pytest.mark.parametrize("hot_module", PATHS)
def test_a_datagram_inflating_to_the_datagram_bound_is_taken(hot_module):
    engine = _engine(hot_module)
    message, packet = _user_datagram(CAP)
    engine.receive(packet, ATTACKER, 1.0)
    assert engine.events() == [UserMessage(message[1:], ATTACKER)]
    assert (engine.stats()["bad_input"], engine.stats()["user_messages_received"]) == (0, 1)


@pytest.mark.parametrize("hot_module", PATHS)
def test_the_datagram_bound_counts_every_compressed_part_of_a_compound(hot_module):
    """Two compressed halves, each under the bound, together over it."""
    engine = _engine(hot_module)
    half = bytes((MessageType.USER,)) + bytes(CAP // 2)
    packet = framing.make_compound([framing.compress_message(half), framing.compress_message(half + b"x")])
    engine.receive(packet, ATTACKER, 1.0)
    assert (engine.stats()["bad_input"], engine.stats().get("bad_input.too_large")) == (1, 1)
    assert engine.events() == []


def test_the_stream_bound_stays_the_push_pull_bound():
    limits = Limits()
    assert (limits.max_packet_decompressed, limits.max_decompressed) == (65536, 20 * 1024 * 1024)


# ------------------------------------------------------ push/pull headers


def _header(nodes):
    return bytes((MessageType.PUSH_PULL,)) + messages.PushPullHeader(nodes=nodes, user_state_len=0,
                                                                       join=False).encode_body()


def _refusal(reply, limits=Limits()):
    (kind, err), _used = framing.decode_stream(reply, limits)
    assert kind == MessageType.ERR
    return err.error


def test_a_push_pull_announcing_more_nodes_than_the_table_holds_is_refused_at_its_header():
    """Nothing but the header has arrived: refused at once, not waited on."""
    engine = _engine(max_nodes=100)
    reply = engine.receive_stream(framing.encode_stream(_header(101)), ATTACKER, 1.0)
    assert _refusal(reply) == "push/pull announces 101 nodes, over 100"
    stats = engine.stats()
    assert (stats["streams_bad"], stats["bad_input.too_many"], stats["nodes"]) == (1, 1, 1)


def test_a_push_pull_announcing_as_many_nodes_as_the_table_holds_is_read():
    engine = _engine(max_nodes=100)
    assert engine.receive_stream(framing.encode_stream(_header(100)), ATTACKER, 1.0) is None   # more to come
    assert engine.stats()["streams_bad"] == 0


def test_a_compressed_push_pull_announcing_too_many_nodes_is_refused_before_the_rest_is_decompressed():
    """The LZW data is damaged after its first kilobytes: only reading the
    header first (not the whole) refuses it for its count rather than for
    the damage."""
    nodes = [messages.PushNodeState(name=f"n{i}", addr=bytes((127, 0, 0, 3)), port=9, incarnation=1, vsn=VSN)
             for i in range(2000)]
    plain = messages.encode_push_pull(messages.PushPull(nodes=nodes))
    packed = lzw.compress(plain)
    damaged = packed[:len(packed) // 2] + b"\xff" * (len(packed) - len(packed) // 2)
    with pytest.raises(Exception, match="invalid LZW code|without its end"):
        lzw.decompress(damaged, Limits().max_decompressed)
    stream = messages.encode(messages.Compress(algo=0, buf=damaged))
    engine = _engine(max_nodes=1000)
    assert _refusal(engine.receive_stream(stream, ATTACKER, 1.0)) == "push/pull announces 2000 nodes, over 1000"
    assert engine.stats()["bad_input.too_many"] == 1
    # the same stream to a table that could hold them: the damage is found
    roomy = _engine(max_nodes=5000)
    assert "LZW" in _refusal(roomy.receive_stream(stream, ATTACKER, 1.0))


# ------------------------------------------------------- push/pulls in turns


def _invented(n, tag="x", vsn=VSN):
    return [messages.PushNodeState(name=f"{tag}{i}", addr=bytes((127, 0, 0, 3)), port=9, incarnation=1, vsn=vsn)
            for i in range(n)]


def _turned(engine, first, key):
    """``first`` (a stream handed over), then turns while the engine says it has work: every result."""
    results = [first]
    while results[-1] in (None, False) and engine.stream_working(key):
        results.append(engine.stream_turn(key, 1.0))
    return results


@pytest.mark.parametrize("compress", [False, True])
def test_a_big_push_pull_is_decoded_and_merged_a_turn_at_a_time_to_the_same_end(compress):
    """Bounded turns (as the fronts run it) end where one call ends: the
    same reply, table, events and counters; a plain push/pull of n nodes
    takes 2n / STREAM_TURN turns (decoding, then merging, each node one
    unit), a compressed one its LZW output's share more."""
    n = 5000
    stream = framing.encode_stream(messages.encode_push_pull(messages.PushPull(nodes=_invented(n),
                                                                               user_state=b"theirs")),
                                   compress=compress)
    whole = _engine(max_nodes=10_000)
    reply = whole.receive_stream(stream, ATTACKER, 1.0)
    turned = _engine(max_nodes=10_000)
    turned.stream_turn_size = STREAM_TURN
    results = _turned(turned, turned.receive_stream(stream, ATTACKER, 1.0), ATTACKER)
    assert results[-1] == reply and set(results[:-1]) == {None}
    if compress:
        assert len(results) > math.ceil(2 * n / STREAM_TURN)
    else:
        assert len(results) == math.ceil(2 * n / STREAM_TURN) == 10
    assert not turned.stream_working(ATTACKER)
    assert turned.events() == whole.events()
    assert turned.stats() == whole.stats()
    assert len(turned.table) == n + 1


def test_a_push_pull_arriving_in_pieces_takes_turns_only_while_it_has_bytes_to_read():
    """A stream waiting for bytes has no turn to take: each piece is read
    in turns until it runs out, then the next piece goes on from there."""
    stream = framing.encode_stream(messages.encode_push_pull(messages.PushPull(nodes=_invented(3000))))
    engine = _engine(max_nodes=10_000)
    engine.stream_turn_size = STREAM_TURN
    for cut in (100, 1000, 50_000, 100_000, len(stream) - 1):
        results = _turned(engine, engine.receive_stream(stream[:cut], ATTACKER, 1.0), ATTACKER)
        assert set(results) == {None} and not engine.stream_working(ATTACKER)
    results = _turned(engine, engine.receive_stream(stream, ATTACKER, 1.0), ATTACKER)
    assert results[-1] == _engine(max_nodes=10_000).receive_stream(stream, ATTACKER, 1.0)
    assert len(engine.table) == 3001


def test_the_reply_to_our_own_push_pull_is_merged_a_turn_at_a_time():
    """A join: the peer answers with 3,000 nodes, more than our table holds:
    merged as far as it goes (a peer we chose), in turns, then the join is done."""
    made = []
    for bounded in (False, True):
        engine = _engine(max_nodes=2000)
        engine.stream_turn_size = STREAM_TURN if bounded else None
        engine.join([("127.0.0.2", 7946)], 1.0)
        (stream,) = engine.streams_to_open(1.0)
        answer = framing.encode_stream(messages.encode_push_pull(messages.PushPull(nodes=_invented(3000))))
        results = _turned(engine, engine.stream_response(stream.id, answer, 1.0), stream.id)
        made.append((results, engine.events(), engine.stats()))
    (whole, whole_events, whole_stats), (turned, turned_events, turned_stats) = made
    assert whole == [True]
    assert (turned[0], set(turned[1:-1]), turned[-1]) == (False, {None}, b"")
    assert len(turned) == math.ceil(2 * 3000 / STREAM_TURN)
    assert turned_events == whole_events and turned_stats == whole_stats
    assert (whole_stats["nodes"], whole_stats["nodes_refused"], whole_stats["push_pulls"]) == (2000, 1001, 1)


# ------------------------------------------- many push/pulls at once, in turns

#: the engine-wide bound the tests set (the default, 64 MiB, is far more to inflate)
HELD = 4 << 20


def _state_push_pull(user_state_len):
    """A compressed push/pull of no nodes and ``user_state_len`` bytes of
    user state that compress to almost nothing (a few KB on the wire)."""
    return framing.encode_stream(messages.encode_push_pull(messages.PushPull(user_state=bytes(user_state_len))),
                                 compress=True)


def _round_robin(engine, stream, sources):
    """``stream`` from each of ``sources`` at once, then a turn for each in
    turn while any has work: the replies by source, and the most memory
    allocated meanwhile."""
    tracemalloc.start()
    try:
        replies = {src: engine.receive_stream(stream, src, 1.0) for src in sources}
        while any(engine.stream_working(src) for src in sources):
            for src in sources:
                if engine.stream_working(src):
                    replies[src] = engine.stream_turn(src, 1.0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return replies, peak


def test_concurrent_push_pulls_inflating_past_the_engine_bound_are_refused_and_counted():
    """16 push/pulls of 3 MiB of user state each (48 MiB in all, from a few
    KB each on the wire), driven a turn at a time side by side: the streams
    hold at most the engine's bound together; the ones that would go past
    it get memberlist's error reply and are counted, the others are answered."""
    engine = _engine(limits=Limits(max_streams_decompressed=HELD))
    engine.stream_turn_size = STREAM_TURN
    stream = _state_push_pull(3 << 20)
    assert len(stream) < 20_000
    sources = [(f"127.0.1.{i}", 40000) for i in range(16)]
    replies, peak = _round_robin(engine, stream, sources)
    kinds = {src: framing.decode_stream(reply, Limits())[0][0] for src, reply in replies.items()}
    refused = [src for src, kind in kinds.items() if kind == MessageType.ERR]
    assert set(kinds.values()) <= {MessageType.ERR, MessageType.PUSH_PULL}
    assert {_refusal(replies[src]) for src in refused} == {
        "streams' decompressed bytes over the limit (limits.max_streams_decompressed)"}
    stats = engine.stats()
    assert len(refused) == 15
    assert (stats["streams_bad"], stats["bad_input"], stats["bad_input.stream_memory"]) == (len(refused),) * 3
    assert stats["streams_received"] == 16 - len(refused)
    # the bound, and the stream answered as it finishes: its reader's
    # buffer, the message read out of it, the user state handed on
    assert peak < HELD + 3 * (3 << 20) + (1 << 20)


def test_concurrent_push_pulls_within_the_engine_bound_are_all_answered():
    engine = _engine(limits=Limits(max_streams_decompressed=HELD))
    engine.stream_turn_size = STREAM_TURN
    sources = [(f"127.0.1.{i}", 40000) for i in range(3)]
    replies, _peak = _round_robin(engine, _state_push_pull(1 << 20), sources)
    assert set(replies.values()) == {engine.receive_stream(framing.encode_stream(_header(0)), ATTACKER, 1.0)}
    stats = engine.stats()
    assert (stats["streams_received"], stats["streams_bad"], stats["bad_input"]) == (4, 0, 0)
    assert len(engine.events()) == 3           # each one's user state handed on


def test_the_engine_bound_on_streams_decompressed_bytes_holds_a_few_big_push_pulls():
    assert Limits().max_streams_decompressed == 64 * 1024 * 1024 > 3 * Limits().max_decompressed


def test_unfinished_streams_past_the_engine_bound_on_them_are_dropped_oldest_first_and_counted():
    """A front that never says it closed a stream: past MAX_STREAM_WORK
    unfinished ones, the oldest is forgotten (its next bytes start over),
    counted; a stream past its tcp_timeout is forgotten without a count."""
    engine = _engine(max_nodes=100)
    head = framing.encode_stream(_header(1))
    for i in range(MAX_STREAM_WORK + 2):
        assert engine.receive_stream(head, (f"127.1.{i // 256}.{i % 256}", 9), 1.0) is None
    assert engine.stats()["streams_dropped"] == 2
    assert engine.receive_stream(head, ("127.0.0.9", 9), 1.0 + 3600) is None
    assert engine.stats()["streams_dropped"] == 2


def test_a_push_pull_read_again_without_the_decode_memo_goes_on_from_where_it_was_read(monkeypatch):
    """When the node-state memo gives up on a batch, the batch is read by
    the general decoder with a reader of its own: the next batch (and the
    user state) are read on from where that reader stopped."""
    real = messages._read_nodes_remembered
    failed = []

    def memo_gives_up_once(memo, reader, count, buf, limits):
        if not failed:
            failed.append(count)
            reader.raw_values(1, buf)          # (part of the way in, then the trouble)
            raise messages.GossipWireError("bad_msgpack", "the memo gave up")
        return real(memo, reader, count, buf, limits)

    monkeypatch.setattr(messages, "_read_nodes_remembered", memo_gives_up_once)
    remote = messages.PushPull(nodes=_invented(3000), user_state=b"theirs")
    stream = framing.encode_stream(messages.encode_push_pull(remote))
    assert framing.decode_stream(stream, Limits()) == ((MessageType.PUSH_PULL, remote), len(stream))
    assert failed == [3000]
    failed.clear()
    decoder = framing.StreamDecoder(Limits())        # in turns, the stream's bytes arriving meanwhile
    results = [decoder.decode(stream[:-1], STREAM_TURN)]
    while results[-1] is None:
        results.append(decoder.decode(stream, STREAM_TURN))
    assert failed == [STREAM_TURN]
    assert results[-1] == ((MessageType.PUSH_PULL, remote), len(stream))


# ------------------------------------------------------- on running fronts

#: how long the attack lasts; the victim's table bound; the nodes of each push/pull (all accepted)
ATTACK_S = 3.0
VICTIM_NODES = 8000
PUSH_NODES = 6000
#: memberlist's probe timeout (the observer's): the pings' bound is half of it
PROBE_TIMEOUT = 0.5


def _on_victim(front, port, scenario):
    """``scenario()`` (on another thread) beside a started victim ``a`` on
    127.0.0.1, threaded or asyncio; its result and a's counters."""
    options = {"max_nodes": VICTIM_NODES, "seed": 1}
    if front == "threads":
        with SerfService("a", "127.0.0.1", port, **options) as a:
            return scenario(), a.stats()

    async def main():
        async with AsyncSerfService("a", "127.0.0.1", port, **options) as a:
            return await asyncio.to_thread(scenario), a.stats()
    return asyncio.run(asyncio.wait_for(main(), 60))


def _ping_until(port, stop, rtts):
    """A ping to a every 20 ms from 127.0.0.4 until ``stop``; each ack's RTT
    into ``rtts``; how many pings went unanswered."""
    pending = {}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        udp.bind(("127.0.0.4", 0))
        udp.settimeout(0.02)
        seq = 0
        while not stop.is_set():
            seq += 1
            pending[seq] = time.monotonic()
            udp.sendto(messages.encode(messages.Ping(seq_no=seq, node="a")), ("127.0.0.1", port))
            _acks(udp, pending, rtts)
        time.sleep(0.3)             # the last pings' acks, late but not lost, are counted as answered
        _acks(udp, pending, rtts)
    return len(pending)


def _acks(udp, pending, rtts):
    """The acks waiting (maybe in a compound of broadcasts, maybe compressed): their pings' RTTs."""
    try:
        while True:
            parts, _cut = framing.split_messages(udp.recv(65536), Limits())
            for part in parts:
                if part[0] == MessageType.ACK:
                    rtts.append(time.monotonic() - pending.pop(messages.decode(part, Limits()).seq_no))
    except OSError:
        pass


@functools.cache
def _bomb():
    """A datagram of 16 KB holding a user message of 20 MiB: compressed
    message, by the compiled writer where it is built (the same bytes as the
    pure one's, 20 times faster)."""
    message = bytes((MessageType.USER,)) + bytes((20 << 20) - 1)
    writer = hot.IMPLEMENTATIONS["compiled"]
    packed = writer.lzw_compress(message) if writer is not None else lzw.compress_py(message)
    return messages.encode(messages.Compress(algo=0, buf=packed))


def _push_pulls():
    """Twelve push/pulls, each of PUSH_NODES new invented nodes (made
    before the clock starts: a second of this thread's Python)."""
    return [framing.encode_stream(messages.encode_push_pull(messages.PushPull(
        nodes=_invented(PUSH_NODES, f"g{k}-", SERF_VSN)))) for k in range(12)]


def _attack(port, stop, bomb, pushes):
    """From 127.0.0.3 until ``stop``: 15 LZW ``bomb`` a second and four
    of ``pushes`` at once, over and over."""

    def push_pulls(first):
        for data in pushes[first::4]:
            if stop.is_set():
                return
            with socket.create_connection(("127.0.0.1", port), timeout=20, source_address=("127.0.0.3", 0)) as tcp:
                tcp.sendall(data)
                while tcp.recv(65536):
                    pass

    threads = [threading.Thread(target=push_pulls, args=(k,), daemon=True) for k in range(4)]
    for thread in threads:
        thread.start()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        udp.bind(("127.0.0.3", 0))
        while not stop.wait(1 / 15):
            udp.sendto(bomb, ("127.0.0.1", port))
    return threads


@pytest.mark.parametrize("front", ["threads", "asyncio"])
def test_a_member_flooded_with_lzw_bombs_and_big_push_pulls_answers_its_pings_in_time(front):
    """Three seconds of 15 LZW bombs a second and four push/pulls at once
    of 6,000 new nodes each (all within a's table bound: decoded and
    merged) to a: every ping to a is answered within half the probe
    timeout, and b (probing a five times a second) never marks it failed. Before
    the datagram bound and the stream turns a bomb took 70 ms and a
    push/pull 0.4 s of a's only thread: pings waited over a second."""
    pa, pb = free_gossip_port("127.0.0.1"), free_gossip_port("127.0.0.2")

    def scenario():
        rtts, marks = [], []
        with SerfService("b", "127.0.0.2", pb, seed=2, probe_interval=0.2) as b:
            b.add_listener(lambda e: marks.append(e.kind) if isinstance(e, SerfMemberEvent) and e.member.name == "a"
                           and e.kind in ("failed", "left") else None)
            assert b.join([("127.0.0.1", pa)]).joined == 1
            bomb, pushes = _bomb(), _push_pulls()
            stop_pings, stop_attack = threading.Event(), threading.Event()
            pings = threading.Thread(target=lambda: rtts.append(_ping_until(pa, stop_pings, rtts)), daemon=True)
            pings.start()
            timer = threading.Timer(ATTACK_S, stop_attack.set)
            timer.start()
            for thread in _attack(pa, stop_attack, bomb, pushes):
                thread.join(30)
            stop_pings.set()
            pings.join(10)
            return rtts[:-1], rtts[-1], marks, {m.name: m.status.name for m in b.members()}

    (rtts, unanswered, marks, b_view), a_stats = _on_victim(front, pa, scenario)
    assert a_stats["bad_input.too_large"] >= 30                  # the bombs, refused
    assert a_stats["streams_received"] >= 5 and a_stats["nodes"] == VICTIM_NODES
    assert len(rtts) >= 50 and unanswered == 0
    # The pinger and the attack share the victim's process (and its GIL)
    # here, so a rare outlier is the harness's: 19 pings in 20 within half
    # the probe timeout, every one within the timeout (before the bounds:
    # over a second). bench/gossip_attacks.py measures the victim alone in
    # its namespace: 1-6 ms at most.
    ranked = sorted(rtts)
    assert ranked[int(len(ranked) * 0.95)] < PROBE_TIMEOUT / 2, ranked[-5:]
    assert ranked[-1] < PROBE_TIMEOUT, ranked[-5:]
    assert (marks, b_view["a"]) == ([], "ALIVE")
