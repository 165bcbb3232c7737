"""The gossip hot path (mcastmember.gossip.memberlist.matcher): the byte-level matcher, its
compiled and pure-Python twins, and the engine with it against the engine
without it (the general msgpack path): the same state, the same bytes sent,
the same events and counters, on Go's vectors and on fuzzed packets. The volume fuzz is tests/fuzz/fuzz_gossip_hot.py."""

from __future__ import annotations

import json
import pathlib
import sys

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from mcastmember.gossip.memberlist import _matcher_py as _hot_py
from mcastmember.gossip.memberlist import framing
from mcastmember.gossip.memberlist import matcher as hot
from mcastmember.gossip.memberlist import lzw
from mcastmember.gossip.memberlist import messages
from mcastmember.gossip.memberlist import msgpack_go
from mcastmember.gossip.memberlist.crypto import Keyring
from mcastmember.gossip.memberlist.engine import GossipEngine
from mcastmember.gossip.memberlist.errors import GossipWireError
from mcastmember.gossip.memberlist.label import add_label
from mcastmember.gossip.memberlist.limits import Limits
from mcastmember.gossip.memberlist.settings import GossipSettings

# Every test here runs both matchers itself (the twins), so CI's pure-Python
# pass need not repeat them.
pytestmark = pytest.mark.both_codecs

VECTORS = json.loads((pathlib.Path(__file__).resolve().parents[1] / "interop" / "gossip_vectors" / "vectors.json").read_text())
TWINS = [pytest.param(module, id=name) for name, module in hot.IMPLEMENTATIONS.items() if module is not None]
COMPILED = hot.IMPLEMENTATIONS["compiled"]
ME = "py-1"
NAMES = [ME, "serf-1", "serf-2", "serf-3", "new-1", "", "nœud"]
VSN = bytes((1, 5, 2, 2, 5, 4))
ADDRS = [bytes((127, 0, 0, 2)), bytes((127, 0, 0, 3)), bytes((127, 0, 0, 4)), bytes(16), b"\x01\x02\x03", b""]
SENDER = ("127.0.0.9", 7946)
#: the general path's bound on a packet's decompressed bytes (Limits().max_packet_decompressed)
MAXD = Limits().max_packet_decompressed


def _wires():
    return [bytes.fromhex(v["wire"]) for v in VECTORS["messages"] + VECTORS["frames"]]


def _fields(msg):
    """What the matcher gives for a decoded message, from the general decoder."""
    raw = messages._go_bytes
    if isinstance(msg, messages.Ping):
        return (0, msg.seq_no, not msg.node or msg.node == ME, msg.source_addr, msg.source_port)
    if isinstance(msg, messages.Ack):
        return (2, msg.seq_no, msg.payload)
    if isinstance(msg, messages.Alive):
        return (4, msg.incarnation, raw(msg.node), msg.addr, msg.port, msg.meta, msg.vsn)
    if isinstance(msg, (messages.Suspect, messages.Dead)):
        return (msg.TYPE, msg.incarnation, raw(msg.node), raw(msg.from_))
    return None


def _general(buf):
    try:
        return _fields(messages.decode(buf, Limits()))
    except GossipWireError:
        return "refused"


# ------------------------------------------------------------------ the matcher


@pytest.mark.parametrize("twin", TWINS)
def test_the_matcher_gives_the_general_decoders_fields_on_gos_vectors(twin):
    matched = 0
    for v in VECTORS["messages"]:
        wire = bytes.fromhex(v["wire"])
        found = twin.match(wire, ME.encode())
        general = _general(wire)
        if v["type"] in ("ping", "ack", "alive", "suspect", "dead"):
            assert found == general, v["name"]
            matched += 1
        else:
            assert found is None, v["name"]
    assert matched == 10


@pytest.mark.parametrize("twin", TWINS)
def test_unwrap_gives_the_general_framings_messages_or_declines(twin):
    for wire in _wires():
        found = twin.unwrap(wire, b"", 65535, 1024, 4, MAXD)
        if found is not None:
            assert found == framing.split_messages(framing.open_packet(wire, Limits()), Limits())[0]
    ping = bytes.fromhex(VECTORS["messages"][1]["wire"])
    assert twin.unwrap(framing.add_crc(ping), b"", 65535, 1024, 4, MAXD) == [ping]
    bad_crc = bytearray(framing.add_crc(ping))
    bad_crc[2] ^= 1
    assert twin.unwrap(bytes(bad_crc), b"", 65535, 1024, 4, MAXD) is None          # the general path counts it
    assert twin.unwrap(add_label(ping, b"dc1"), b"", 65535, 1024, 4, MAXD) is None
    assert twin.unwrap(add_label(ping, b"dc1"), add_label(b"", b"dc1"), 65535, 1024, 4, MAXD) == [ping]
    assert twin.unwrap(add_label(ping, b"dc2"), add_label(b"", b"dc1"), 65535, 1024, 4, MAXD) is None
    assert twin.unwrap(framing.make_compound([ping, ping]), b"", 65535, 1, 4, MAXD) is None   # over max_messages
    assert twin.unwrap(framing.make_compound([ping]) + b"x", b"", 65535, 1024, 4, MAXD) is None
    assert twin.unwrap(framing.compress_message(ping), b"", 65535, 1024, 4, MAXD) == [ping]


def _go_message(kind, seq, name, addr, port, payload, inc, sender, meta, vsn):
    if kind == "ping":
        return messages.encode(messages.Ping(seq_no=seq, node=name, source_addr=addr, source_port=port,
                                             source_node=sender))
    if kind == "ack":
        return messages.encode(messages.Ack(seq_no=seq, payload=payload))
    if kind == "alive":
        return messages.encode(messages.Alive(incarnation=inc, node=name, addr=addr, port=port, meta=meta, vsn=vsn))
    cls = messages.Suspect if kind == "suspect" else messages.Dead
    return messages.encode(cls(incarnation=inc, node=name, from_=sender))


u32 = st.one_of(st.integers(0, 300), st.integers(0, 0xFFFFFFFF))
u16 = st.one_of(st.integers(0, 300), st.integers(0, 0xFFFF))
names = st.one_of(st.sampled_from(NAMES), st.text(max_size=40))
go_messages = st.builds(
    _go_message, st.sampled_from(["ping", "ack", "alive", "suspect", "dead"]), u32, names,
    st.one_of(st.sampled_from(ADDRS), st.binary(max_size=20)), u16, st.binary(max_size=70), u32, names,
    st.binary(max_size=600), st.one_of(st.just(VSN), st.binary(max_size=8)))


def _mutations(data):
    return st.one_of(
        st.just(data),
        st.tuples(st.integers(0, len(data) - 1), st.integers(0, 255)).map(
            lambda t: data[:t[0]] + bytes((t[1],)) + data[t[0] + 1:]),
        st.integers(0, len(data)).map(lambda n: data[:n]),
        st.binary(max_size=4).map(lambda b: data + b),
        st.tuples(st.integers(0, len(data)), st.binary(min_size=1, max_size=3)).map(
            lambda t: data[:t[0]] + t[1] + data[t[0]:]))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(go_messages.flatmap(_mutations))
def test_the_matcher_takes_only_what_the_general_decoder_reads_the_same(data):
    found = _hot_py.match(data, ME.encode())
    if COMPILED is not None:
        assert COMPILED.match(data, ME.encode()) == found
    if found is not None:
        assert _general(data) == found


@settings(max_examples=300, deadline=None)
@given(go_messages)
def test_the_matcher_takes_every_hot_message_go_writes_within_go_bounds(data):
    general = _general(data)
    if general == "refused" or general is None:
        return
    assert _hot_py.match(data, ME.encode()) == general


def _general_parts(packet, limits, label=b""):
    """The general path's rule (open_packet, then split_messages): the
    messages it hands on, or the reason it refuses the packet."""
    try:
        return framing.split_messages(framing.open_packet(packet, limits, label=label), limits)[0]
    except GossipWireError as exc:
        return exc.reason


def _unwrap(twin, packet, limits, label=b""):
    return twin.unwrap(packet, add_label(b"", label), limits.max_packet, limits.max_messages, limits.max_nesting,
                       limits.max_packet_decompressed)


def _other_layouts(msg):
    """A compress message holding ``msg`` in layouts go-msgpack never writes
    for memberlist's compressPayload (the general path may still read them)."""
    packed = lzw.compress(msg)
    head = framing._COMPRESS_HEAD
    raw = msgpack_go.pack(packed)

    def compress(fields):
        return bytes((messages.MessageType.COMPRESS,)) + msgpack.packb(fields, use_bin_type=False)
    wider = b"\xda" + len(packed).to_bytes(2, "big") if len(packed) < 32 else b"\xdb" + len(packed).to_bytes(4, "big")
    return {
        "keys in the other order": compress({b"Buf": packed, b"Algo": 0}),
        "another algorithm": compress({b"Algo": 1, b"Buf": packed}),
        "an extra field": compress({b"Algo": 0, b"Buf": packed, b"Zzz": 0}),
        "Algo as a uint8": bytes((9, 0x82)) + b"\xa4Algo\xcc\x00\xa3Buf" + raw,
        "a wider raw header": head + wider + packed,
        "Buf as bin16": head + b"\xc5" + len(packed).to_bytes(2, "big") + packed,
        "a nil Buf": head + b"\xc0",
        "an empty Buf": head + b"\xa0",
        "a byte after the map": head + raw + b"\x00",
        "Buf cut short": head + raw[:-1],
    }


@pytest.mark.parametrize("twin", TWINS)
def test_unwrap_takes_a_compressed_packet_in_gos_layout_and_nothing_else(twin):
    alives = [messages.encode(messages.Alive(incarnation=5, node=f"serf-{i}", addr=ADDRS[0], port=7946, vsn=VSN))
              for i in range(8)]
    compound = framing.make_compound(alives)
    limits = Limits()
    packet = framing.encode_packet(compound, compress=True, crc=True, label=b"dc1")
    assert packet[len(add_label(b"", b"dc1")) + 5] == messages.MessageType.COMPRESS     # behind label and CRC
    assert _unwrap(twin, packet, limits, b"dc1") == alives == _general_parts(packet, limits, b"dc1")
    one = framing.compress_message(alives[0])
    assert _unwrap(twin, one, limits) == [alives[0]]
    big = framing.make_compound([a + bytes(200) for a in alives])     # a Buf over 255 bytes: raw16
    assert _unwrap(twin, framing.compress_message(big), limits) == _general_parts(framing.compress_message(big), limits)
    # what the general path decides: refusals (and their counters) stay its own
    declined = {
        "wrong label": (framing.compress_message(compound), b"dc1"),
        "bad CRC": (framing.add_crc(one)[:-1] + b"\x00", b""),
        "compress in compress": (framing.compress_message(one), b""),
        "compound in a compound": (framing.compress_message(framing.make_compound([compound, alives[0]])), b""),
        "compress in a compound": (framing.compress_message(framing.make_compound([one])), b""),
        "compound cut short": (framing.compress_message(compound[:-1]), b""),
        "bytes after the compound": (framing.compress_message(compound + b"\x00"), b""),
        "nothing inside": (framing.compress_message(b""), b""),
        "LZW data damaged": (one[:-1] + bytes((one[-1] ^ 0xFF,)), b""),
    }
    declined.update((name, (data, b"")) for name, data in _other_layouts(compound).items())
    for name, (data, label) in declined.items():
        assert _unwrap(twin, data, limits, label) is None, name
    # the general path's bounds: decompressed bytes, messages, nesting
    for tight in (Limits(max_packet_decompressed=len(compound) - 1), Limits(max_messages=7), Limits(max_nesting=1)):
        assert _unwrap(twin, packet, tight, b"dc1") is None
        assert isinstance(_general_parts(packet, tight, b"dc1"), str)
    assert _unwrap(twin, one, Limits(max_packet_decompressed=len(alives[0]))) == [alives[0]]
    assert _unwrap(twin, one, Limits(max_nesting=1)) == [alives[0]]
    assert _unwrap(twin, one, Limits(max_nesting=0)) is None


def test_the_matchers_compress_head_is_what_the_encoder_writes():
    assert _hot_py.COMPRESS_HEAD == framing._COMPRESS_HEAD


@st.composite
def wrapped_packets(draw):
    """Packets as memberlist builds them, then wrapped, nested, cut or damaged."""
    msgs = draw(st.lists(go_messages | st.binary(min_size=1, max_size=8), min_size=1, max_size=5))
    body = msgs[0] if len(msgs) == 1 and draw(st.booleans()) else framing.make_compound(msgs)
    for how in draw(st.lists(st.sampled_from(["compress", "compress", "compound"]), max_size=3)):
        if how == "compress":
            body = framing.compress_message(body)
        else:
            body = framing.make_compound([body] + draw(st.lists(go_messages, max_size=2)))
    if draw(st.booleans()):
        body = framing.add_crc(body)
    return draw(st.one_of(st.just(body), _mutations(body)))


limit_sets = st.builds(Limits, max_messages=st.sampled_from([0, 1, 2, 3, 1024]),
                       max_nesting=st.sampled_from([0, 1, 2, 4]),
                       max_packet_decompressed=st.sampled_from([0, 10, 60, 200, MAXD]))


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(wrapped_packets(), limit_sets)
def test_unwrap_gives_none_or_exactly_the_general_paths_messages(data, limits):
    found = _unwrap(_hot_py, data, limits)
    if COMPILED is not None:
        assert _unwrap(COMPILED, data, limits) == found
    assert found is None or found == _general_parts(data, limits)


@settings(max_examples=200, deadline=None)
@given(st.lists(go_messages, min_size=1, max_size=8), st.booleans(), st.binary(max_size=4))
def test_unwrap_takes_every_compressed_packet_go_writes_within_the_limits(msgs, crc, label):
    body = msgs[0] if len(msgs) == 1 else framing.make_compound(msgs)
    packet = add_label(framing.add_crc(framing.compress_message(body)) if crc else framing.compress_message(body), label)
    assert _general_parts(packet, Limits(), label) == msgs
    for twin in (m for m in hot.IMPLEMENTATIONS.values() if m is not None):
        assert _unwrap(twin, packet, Limits(), label) == msgs


@settings(max_examples=600, deadline=None)
@given(st.binary(max_size=64), st.binary(max_size=4), st.integers(0, 3))
def test_the_twins_agree_on_any_bytes(data, label, max_messages):
    header = add_label(b"", label)
    assert _hot_py.match(data, ME.encode()) == (COMPILED.match(data, ME.encode()) if COMPILED else
                                                 _hot_py.match(data, ME.encode()))
    for packet in (data, framing.add_crc(data), header + data):
        want = _hot_py.unwrap(packet, header, 65535, max_messages, 4, MAXD)
        if COMPILED is not None:
            assert COMPILED.unwrap(packet, header, 65535, max_messages, 4, MAXD) == want


@pytest.mark.parametrize("twin", TWINS)
@settings(max_examples=300, deadline=None)
@given(seq=u32, payload=st.binary(max_size=300))
def test_the_ack_template_writes_what_the_encoder_writes(twin, seq, payload):
    assert twin.ack(hot.ack_prefix(payload), seq) == messages.encode(messages.Ack(seq_no=seq, payload=payload))


@pytest.mark.parametrize("twin", TWINS)
def test_the_ack_template_refuses_what_is_no_uint32(twin):
    for seq in (-1, 1 << 32):
        with pytest.raises((ValueError, OverflowError)):
            twin.ack(b"", seq)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=200), st.integers(0, 200).map(lambda n: b"\0" * n)))
def test_compression_is_skipped_only_where_it_cannot_shrink(data):
    assert len(framing.compress_message(data)) >= framing.compressed_floor(len(data))


# ------------------------------------------------------------------ the engine


def _pair(twin, **overrides):
    out = []
    for impl in (None, twin):
        e = GossipEngine(GossipSettings(name=ME, advertise_addr="127.0.0.1", **overrides), seed=7, hot=impl)
        e.start(0.0)
        out.append(e)
    return out


def _state(e, now):
    nodes = [(n.name, n.addr, n.port, n.meta, n.incarnation, n.state, n.state_change, n.vsn) for n in e.table.nodes]
    return (e.outgoing(now), e.streams_to_open(now), e.events(), e.stats(), nodes,
            sorted(e.shared.suspicions), sorted(e.shared.acks), e.broadcasts.size, e.incarnation, e.health_score)


def _step(engines, now, data=None, addr=SENDER, tick=False):
    states = []
    for e in engines:
        if tick:
            e.on_timer(now)
        else:
            e.receive(data, addr, now)
        states.append(_state(e, now))
    assert states[0] == states[1]
    return states[0]


def _known(engines, now):
    for i, name in enumerate(NAMES[1:4]):
        alive = messages.encode(messages.Alive(incarnation=5, node=name, addr=ADDRS[i], port=7946, meta=b"m",
                                               vsn=VSN))
        _step(engines, now, alive)


@pytest.mark.parametrize("twin", TWINS)
def test_the_engine_with_the_hot_path_does_what_it_does_without_on_gos_vectors(twin):
    engines = _pair(twin)
    _known(engines, 0.0)
    for wire in _wires():
        _step(engines, 0.1, wire)
    assert engines[1].stats()["packets_received"] == len(_wires()) + 3


@pytest.mark.parametrize("twin", TWINS)
def test_a_ping_is_answered_with_the_same_ack_and_a_pending_probe_ends_the_same(twin):
    engines = _pair(twin, ping_events=True)
    _known(engines, 0.0)
    engines[0].ack_payload = engines[1].ack_payload = b"coordinate"
    ping = messages.encode(messages.Ping(seq_no=300, node=ME, source_addr=ADDRS[0], source_port=7000))
    sent = _step(engines, 0.1, framing.add_crc(ping))[0]
    assert [m for data, _addr in sent for m in framing.split_messages(data, Limits())[0]][0] == \
        messages.encode(messages.Ack(seq_no=300, payload=b"coordinate"))
    assert sent[0][1] == SENDER         # the datagram's sender, not the address the ping names
    pings = _step(engines, 1.0, tick=True)[0]          # a probe: one ping out
    probe = messages.decode(framing.split_messages(pings[0][0], Limits())[0][0], Limits())
    events = _step(engines, 1.1, framing.add_crc(messages.encode(messages.Ack(seq_no=probe.seq_no,
                                                                              payload=b"rtt"))))[2]
    assert [type(ev).__name__ for ev in events] == ["PingCompleted"]


def _wrap(parts, crc, label, compressed=False):
    body = parts[0] if len(parts) == 1 else framing.make_compound(parts)
    body = framing.compress_message(body) if compressed else body
    return add_label(framing.add_crc(body) if crc else body, label)


@st.composite
def packets(draw):
    kind = draw(st.sampled_from(["ping", "ack", "alive", "suspect", "dead"]))
    name = draw(st.sampled_from(NAMES))
    inc = draw(st.sampled_from([0, 1, 4, 5, 6, 0xFFFFFFFF]))
    addr = draw(st.sampled_from(ADDRS))
    port = draw(st.sampled_from([7946, 0, 7000]))
    vsn = draw(st.sampled_from([VSN, b"", bytes((0, 5, 2, 0, 0, 0)), bytes((5, 1, 2, 0, 0, 0)), VSN + b"x"]))
    meta = draw(st.sampled_from([b"m", b"", b"other"]))
    seq = draw(st.sampled_from([0, 1, 2, 3, 200, 0xFFFFFFFF]))
    return _go_message(kind, seq, name, addr, port, draw(st.binary(max_size=4)), inc,
                       draw(st.sampled_from(NAMES)), meta, vsn)


@pytest.mark.parametrize("twin", TWINS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(script=st.lists(st.tuples(st.lists(packets(), min_size=1, max_size=4), st.booleans(), st.booleans(),
                                 st.sampled_from([None, 0, 5]), st.booleans(), st.booleans()), max_size=12),
       labelled=st.booleans())
def test_the_engine_with_the_hot_path_does_what_it_does_without_on_fuzzed_packets(twin, script, labelled):
    label = b"dc1" if labelled else b""
    engines = _pair(twin, label=label)
    _known(engines, 0.0) if not labelled else None
    now = 0.0
    for parts, crc, wrong_label, cut, tick, compressed in script:
        now += 0.3
        if tick:
            _step(engines, now, tick=True)
        data = _wrap(parts, crc, b"dc2" if wrong_label else label, compressed)
        if cut is not None:
            data = data[:len(data) - cut]
        _step(engines, now, data)


def _uint_as(value, width):
    """``value`` as a msgpack uint of ``width`` (0: fixint) or its smallest wider form."""
    for code, size, top in ((None, 0, 0x7F), (0xCC, 1, 0xFF), (0xCD, 2, 0xFFFF), (0xCE, 4, 0xFFFFFFFF)):
        if size >= width and value <= top:
            return bytes((value,)) if code is None else bytes((code,)) + value.to_bytes(size, "big")
    raise AssertionError(value)


def _raw_as(raw, width):
    """``raw`` with a msgpack raw header of ``width`` (0: fixraw) or its smallest wider form."""
    if width == 0 and len(raw) < 32:
        return bytes((0xA0 + len(raw),)) + raw
    if width <= 2 and len(raw) <= 0xFFFF:
        return b"\xda" + len(raw).to_bytes(2, "big") + raw
    return b"\xdb" + len(raw).to_bytes(4, "big") + raw


def _accusation_as(kind, inc, node, sender, widths):
    """A suspect or dead in Go's layout, each integer and name header as wide as ``widths`` asks."""
    inc_w, node_w, from_w = widths
    return (bytes((kind, 0x83)) + _hot_py.K_FROM + _raw_as(sender, from_w) + _hot_py.K_INC + _uint_as(inc, inc_w)
            + _hot_py.K_NODE + _raw_as(node, node_w))


WIDTHS = st.tuples(st.sampled_from([0, 1, 2, 4]), st.sampled_from([0, 2, 4]), st.sampled_from([0, 2, 4]))
ODD_NAMES = [b"odd-\xff\xfe", b"x" * 40, "n\u0153ud-2".encode()]
KNOWN_RAW = [name.encode() for name in NAMES[:4]]       # ourselves and the three _known gives


@pytest.mark.parametrize("twin", TWINS)
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(script=st.lists(st.tuples(st.sampled_from([3, 3, 3, 5]), st.sampled_from([4, 5, 6, 200, 0xFFFF, 70000]),
                                 st.sampled_from(KNOWN_RAW + ODD_NAMES),
                                 st.sampled_from(KNOWN_RAW + ODD_NAMES + [b"stranger"]), WIDTHS),
                       min_size=1, max_size=10))
def test_suspects_and_deads_the_engine_forwards_as_received_are_their_own_encoding(twin, script):
    """The hot path gossips a suspect's received bytes on when their length
    is its encoding's (each integer and name header at its smallest), else
    encodes it: with headers of every width, the queued broadcasts (their
    bytes), the datagrams, the events and the state are the general path's,
    which always encodes the decoded message. (An equivalence test: it
    passes on the code before that change too, by design.)"""
    engines = _pair(twin)
    _known(engines, 0.0)
    for i, name in enumerate(ODD_NAMES):
        alive = messages.encode(messages.Alive(incarnation=5, node=messages._go_str(name), addr=ADDRS[i],
                                               port=7946, meta=b"m", vsn=VSN))
        _step(engines, 0.0, alive)
    now = 0.0
    for kind, inc, node, sender, widths in script:
        now += 0.1
        _step(engines, now, framing.add_crc(_accusation_as(kind, inc, node, sender, widths)))
        queued = [e.broadcasts.messages() for e in engines]
        assert queued[0] == queued[1]


@pytest.mark.parametrize("twin", TWINS)
def test_an_encrypted_engine_opens_packets_the_general_way_and_still_matches(twin):
    key = bytes(16)
    engines = _pair(twin, keys=(key,))
    ping = messages.encode(messages.Ping(seq_no=9, node=ME))
    packet = framing.encode_packet(ping, keyring=Keyring((key,)), nonce=bytes(12))
    states = []
    for e in engines:
        e.receive(packet, SENDER, 0.1)
        sent, *rest = _state(e, 0.1)
        # the nonce is random: compare what the datagrams hold
        states.append(([framing.open_packet(data, Limits(), keys=(key,)) for data, _addr in sent], rest))
    assert states[0] == states[1]
    assert framing.split_messages(states[1][0][0], Limits())[0][0] == messages.encode(messages.Ack(seq_no=9))


@pytest.mark.parametrize("twin", TWINS)
def test_a_packet_in_a_bytearray_or_memoryview_is_read_the_general_way(twin):
    engines = _pair(twin)
    ping = framing.add_crc(messages.encode(messages.Ping(seq_no=9, node=ME)))
    for data in (bytearray(ping), memoryview(ping)):
        sent = _step(engines, 0.1, data)[0]
        assert framing.split_messages(sent[0][0], Limits())[0][0] == messages.encode(messages.Ack(seq_no=9))


@pytest.mark.parametrize("twin", TWINS)
def test_a_compressed_compound_of_alives_and_suspects_does_the_same_without_the_general_framing(twin, monkeypatch):
    """What memberlist sends most: a compound of piggybacked broadcasts,
    compressed. The engine with the matcher ends in the general path's
    state, sends the same bytes, gives the same events and counters, and
    never calls the general framing for it."""
    engines = _pair(twin)
    _known(engines, 0.0)
    split, calls = framing.split_messages, []
    monkeypatch.setattr(framing, "split_messages", lambda buf, limits: calls.append(buf) or split(buf, limits))
    alive = [messages.Alive(incarnation=inc, node=name, addr=ADDRS[i % 3], port=7946, meta=b"m", vsn=VSN)
             for i, (name, inc) in enumerate([("serf-1", 5), ("serf-2", 4), ("serf-3", 6), ("new-1", 1),
                                              ("new-2", 1), ("serf-1", 5), ("new-3", 2), ("serf-2", 5)])]
    suspect = [messages.Suspect(incarnation=inc, node=name, from_="serf-3")
               for name, inc in [("serf-1", 5), ("serf-2", 5), ("serf-1", 5), ("new-1", 0), (ME, 1), ("gone", 3)]]
    now = 0.1
    for batch in (alive, suspect, alive[:3] + suspect[:2], suspect[::-1]):
        packet = framing.encode_packet(framing.make_compound([messages.encode(m) for m in batch]), compress=True,
                                       crc=True)
        assert packet[5] == messages.MessageType.COMPRESS
        before = len(calls)
        state = _step(engines, now, packet)
        assert len(calls) == before + 1         # the general engine's call only
        now += 0.5
        _step(engines, now, tick=True)          # probes, gossip, suspicion timers: the same
    assert state[3]["messages_received"] == 3 + 8 + 6 + 5 + 6
    assert sorted(n.name for n in engines[1].table.nodes if n.state != 0) == ["serf-1", "serf-2"]


def test_the_engine_takes_the_hot_path_by_default_unless_the_limits_forbid():
    assert GossipEngine(GossipSettings(name=ME)).shared.hot is hot.DEFAULT
    tight = GossipSettings(name=ME, limits=Limits(max_string=100))
    assert GossipEngine(tight).shared.hot is None
    assert GossipEngine(GossipSettings(name=ME), hot=None).shared.hot is None
    # a name whose bytes the general decoder would read back as another name
    assert GossipEngine(GossipSettings(name="\udcc3\udca9")).shared.hot is None
    assert GossipEngine(GossipSettings(name="n\udcff")).shared.hot is hot.DEFAULT


CORPUS = sorted((pathlib.Path(__file__).resolve().parents[1] / "fuzz" / "corpus" / "gossip_hot").glob("*.hex"))


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
@pytest.mark.parametrize("twin", TWINS)
def test_fuzz_corpus_entry_does_the_same_with_and_without_the_hot_path(twin, path):
    data = bytes.fromhex(path.read_text().strip())
    engines = _pair(twin)
    _known(engines, 0.0)
    _step(engines, 0.1, data)


def test_the_stub_names_what_both_twins_have():
    import ast
    stub = pathlib.Path(hot.__file__).with_name("_matcher.pyi")
    tree = ast.parse(stub.read_text())
    names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    names |= {n.target.id for n in tree.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    # the LZW writer's twin is lzw.compress_py, not in _hot_py (the reader's is _hot_py.lzw_decompress)
    lzw_names = {"lzw_compress"}
    assert names == {"PING", "ACK", "SUSPECT", "ALIVE", "DEAD", "unwrap", "match", "ack", "lzw_decompress"} | lzw_names
    assert all(hasattr(_hot_py, name) for name in names - lzw_names)
    for twin in (m for m in hot.IMPLEMENTATIONS.values() if m is not None):
        assert all(hasattr(twin, name) for name in names) or twin is _hot_py
        assert [twin.PING, twin.ACK, twin.SUSPECT, twin.ALIVE, twin.DEAD] == [0, 2, 3, 4, 5]


# ----------------------------------------------------------------- LZW, compiled


def _lzw(fn, data, max_size):
    try:
        return fn(data, max_size)
    except GossipWireError as exc:
        return (type(exc).__name__, exc.reason, str(exc))


def _compiled_lzw(data, max_size):
    """lzw.decompress with the compiled reader chosen (whatever the environment chose)."""
    saved, lzw._COMPILED = lzw._COMPILED, COMPILED.lzw_decompress
    try:
        return lzw.decompress(data, max_size)
    finally:
        lzw._COMPILED = saved


needs_compiled = pytest.mark.skipif(COMPILED is None, reason="the compiled matcher is not built")


@needs_compiled
def test_the_compiled_lzw_reader_reads_gos_vectors():
    for v in VECTORS["lzw"]:
        assert COMPILED.lzw_decompress(bytes.fromhex(v["lzw"]), 1 << 24) == bytes.fromhex(v["plain"]), v["name"]


@needs_compiled
@settings(max_examples=400, deadline=None)
@given(st.one_of(st.binary(max_size=300), st.integers(0, 9000).map(lambda n: b"ab" * n),
                 st.integers(0, 20000).map(bytes)).flatmap(lambda plain: st.tuples(
                     st.just(plain), _mutations(lzw.compress(plain)) | st.binary(max_size=40),
                     st.sampled_from([1 << 24, len(plain), max(len(plain) - 1, 0), 50]))))
def test_the_compiled_lzw_reader_gives_the_pure_readers_bytes_and_errors(case):
    plain, data, max_size = case
    want = _lzw(lzw.decompress_py, data, max_size)
    assert _lzw(_compiled_lzw, data, max_size) == want
    if data == lzw.compress(plain) and max_size >= len(plain):
        assert want == plain


def _in_turns(reader, budgets, max_size):
    """What a reader gives turn after turn (with the bytes out so far while
    unfinished), then read to its end."""
    seen = []
    for budget in budgets:
        found = reader.read(budget)
        seen.append((found, reader.output() if found is None else None))
        if found is not None:
            return seen
    seen.append((reader.read(sys.maxsize), None))      # a turn that ends only at the end
    return seen


@pytest.mark.parametrize("twin", TWINS)
@settings(max_examples=200, deadline=None)
@given(st.one_of(st.binary(max_size=300), st.integers(0, 9000).map(lambda n: b"ab" * n),
                 st.integers(0, 20000).map(bytes)).flatmap(lambda plain: st.tuples(
                     st.just(plain), _mutations(lzw.compress(plain)) | st.binary(max_size=40),
                     st.sampled_from([1 << 24, len(plain), max(len(plain) - 1, 0), 50]),
                     st.lists(st.sampled_from([0, 1, 7, 64, 1000, 5000]), max_size=20))))
def test_an_lzw_reader_read_in_turns_gives_what_one_read_gives(twin, case):
    """A stream's LZW data is read a turn at a time: any turns end with the
    bytes or the failure of one read, the twins turn for turn the same (the
    bytes out between turns too)."""
    plain, data, max_size, budgets = case
    seen = _in_turns(twin.LzwReader(data, max_size), budgets, max_size)
    assert seen[-1][0] == twin.lzw_decompress(data, max_size) == _hot_py.lzw_decompress(data, max_size)
    assert all(found is None for found, _ in seen[:-1])
    assert seen == _in_turns(_hot_py.LzwReader(data, max_size), budgets, max_size)
    assert seen[-1][0] == twin.LzwReader(data, max_size).read(sys.maxsize)


def _clears(n):
    """LZW data of ``n`` clear codes (9 bits each), then the end code."""
    bits = sum(256 << (9 * i) for i in range(n)) | (257 << (9 * n))
    return bits.to_bytes((9 * (n + 1) + 7) // 8, "little")


@pytest.mark.parametrize("twin", TWINS)
def test_clear_codes_alone_end_a_turn_as_bytes_out_would(twin):
    """Clear codes put nothing out: without a cost of their own a turn over
    megabytes of them would never end (352 ms per 1.8 MB pure)."""
    data = _clears(10_000)
    reader = twin.LzwReader(data, 1 << 20)
    turns = 0
    while (found := reader.read(1000)) is None:
        turns += 1
    assert (found, turns) == (b"", 10) and reader.output() == b""
    assert twin.lzw_decompress(data, 1 << 20) == b""


@pytest.mark.parametrize("twin", TWINS)
def test_an_lzw_reader_stops_a_bomb_at_its_bound_a_turn_at_a_time(twin):
    bomb = lzw.compress(bytes(1 << 20))
    reader = twin.LzwReader(bomb, 100_000)
    turns = 0
    while (found := reader.read(30_000)) is None:
        turns += 1
        assert 30_000 * turns <= len(reader.output()) < 30_000 * turns + 4096
    assert (found, turns) == ((3,), 3)
    assert 96_000 < len(reader.output()) <= 100_000


@needs_compiled
def test_the_compiled_lzw_writer_writes_gos_vectors():
    for v in VECTORS["lzw"]:
        assert COMPILED.lzw_compress(bytes.fromhex(v["plain"])) == bytes.fromhex(v["lzw"]), v["name"]


@needs_compiled
@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=300), st.integers(0, 9000).map(lambda n: b"ab" * n),
                 st.integers(0, 20000).map(bytes),
                 # past 3,838 new codes the table fills: a clear, at every width
                 st.integers(3830, 3850).flatmap(lambda n: st.binary(min_size=n, max_size=n)),
                 st.lists(st.sampled_from([b"a", b"b", b"ab", b"\0" * 50]), max_size=400).map(b"".join)))
def test_the_compiled_lzw_writer_gives_the_pure_writers_bytes(plain):
    packed = COMPILED.lzw_compress(plain)
    assert packed == lzw.compress_py(plain)
    assert lzw.decompress_py(packed, len(plain)) == plain


def test_lzw_compress_takes_the_chosen_writer():
    """The engine's compress is the compiled writer exactly when the
    compiled matcher is chosen (MCASTMEMBER_NO_EXTENSIONS=1: the twin)."""
    assert lzw._COMPILED_WRITER is (COMPILED.lzw_compress if hot.DEFAULT is COMPILED else None)


@pytest.mark.parametrize("twin", TWINS)
def test_an_ack_with_a_payload_is_compressed_exactly_when_that_shortens_it(twin):
    """A Serf member's acks carry its coordinate (130 bytes, which LZW
    never shortens once it moved from the origin: the engine skips trying);
    a payload that compresses goes compressed, as memberlist sends it."""
    from mcastmember.gossip.serf.coordinates import new_coordinate
    from mcastmember.gossip.serf.messages import Coordinate, encode_ack_payload
    moved = Coordinate(vec=[0.00031, -0.00012, 0.00047, 0.00011, -0.00006, 0.00009, -0.00021, 0.00024],
                       error=0.0796, adjustment=0.00028, height=6.3e-05)
    for payload, compressed in ((encode_ack_payload(moved), False), (encode_ack_payload(new_coordinate()), True),
                                (b"\x00" * 300, True), (b"", False)):
        engines = _pair(twin)
        for e in engines:
            e.ack_payload = payload
        while len(engines[0].broadcasts):      # our own alive, piggybacked until sent enough
            _step(engines, 0.1, framing.add_crc(messages.encode(messages.Ping(seq_no=1, node=ME))))
        for seq in (9, 200, 70_000, 0xFFFF_FFFF):
            ping = framing.add_crc(messages.encode(messages.Ping(seq_no=seq, node=ME)))
            (sent, _addr), = _step(engines, 0.1, ping)[0]
            ack = messages.encode(messages.Ack(seq_no=seq, payload=payload))
            assert sent == framing.encode_packet(ack, compress=True)
            assert (sent[0] == messages.MessageType.COMPRESS) is compressed
