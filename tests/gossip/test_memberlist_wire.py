"""The gossip wire codec (mcastmember.gossip) against bytes memberlist's own Go
code wrote (tests/interop/gossip_vectors/vectors.json, see its README), plus round trips
and bad input. Pure Python: one implementation, no network."""

import base64
import json
import pathlib
import zlib

import msgpack
import pytest
from hypothesis import given, settings, strategies as st

from mcastmember.gossip import GossipWireError, Limits, Truncated
from mcastmember.gossip.memberlist import crypto
from mcastmember.gossip.memberlist import framing
from mcastmember.gossip.memberlist import label
from mcastmember.gossip.memberlist import lzw
from mcastmember.gossip.memberlist import messages
from mcastmember.gossip.memberlist import msgpack_go
from mcastmember.gossip.memberlist.layout import MessageType, NodeState

VECTORS = json.loads((pathlib.Path(__file__).resolve().parents[1] / "interop" / "gossip_vectors" / "vectors.json").read_text())
LIMITS = Limits()
CLASSES = {"ping": messages.Ping, "indirect_ping": messages.IndirectPing, "ack": messages.Ack,
           "nack": messages.Nack, "err": messages.Err, "suspect": messages.Suspect, "alive": messages.Alive,
           "dead": messages.Dead, "push_pull_header": messages.PushPullHeader,
           "push_node_state": messages.PushNodeState, "user_msg_header": messages.UserMsgHeader,
           "compress": messages.Compress}


def _frame(name):
    return next(f for f in VECTORS["frames"] if f["name"] == name)


def _go_fields(cls, fields):
    """Go's JSON of a struct ([]byte as base64, null for nil) as our to_go() dict."""
    kinds = {go: kind for go, _attr, kind, _omit in cls._FIELDS}
    out = {}
    for go_name, value in fields.items():
        if kinds[go_name] == "bytes":
            value = base64.b64decode(value) if value else b""
        out[go_name] = value
    return out


# ------------------------------------------------------------- Go's messages


@pytest.mark.parametrize("vector", VECTORS["messages"], ids=lambda v: v["name"])
def test_message_vectors_decode_to_go_fields_and_reencode_exactly(vector):
    cls = CLASSES[vector["type"]]
    wire = bytes.fromhex(vector["wire"])
    msg, end = cls.decode_body(wire, LIMITS, 1)
    assert end == len(wire)
    expected = _go_fields(cls, vector["fields"])
    for go_name, attr, kind, _omit in cls._FIELDS:
        assert getattr(msg, attr) == expected[go_name], go_name
    assert wire[:1] + msg.encode_body() == wire


def test_struct_fields_go_out_sorted_by_go_name():
    """go-msgpack writes a struct from its sorted field table, not in declaration order."""
    wire = messages.encode(messages.Ping(seq_no=200, node="serf-1", source_addr=b"\n\0\0\x07",
                                         source_port=7946, source_node="py-1"))
    assert wire == bytes.fromhex(next(v["wire"] for v in VECTORS["messages"] if v["name"] == "ping-full"))
    assert list(msgpack_go.unpack(wire, LIMITS, 1)[0]) == [b"Node", b"SeqNo", b"SourceAddr", b"SourceNode",
                                                          b"SourcePort"]


def test_single_messages_decode_by_type_byte():
    for vector in VECTORS["messages"]:
        wire = bytes.fromhex(vector["wire"])
        if vector["type"] in ("ping", "indirect_ping", "ack", "nack", "err", "suspect", "alive", "dead"):
            msg = messages.decode(wire, LIMITS)
            assert type(msg) is CLASSES[vector["type"]] and messages.encode(msg) == wire


def test_empty_bytes_go_out_as_nil_and_both_nil_and_empty_raw_decode_to_empty():
    ack = bytes.fromhex(next(v["wire"] for v in VECTORS["messages"] if v["name"] == "ack-empty"))
    assert b"\xa7Payload\xc0" in ack and messages.encode(messages.Ack(seq_no=5)) == ack
    empty_raw = ack.replace(b"\xa7Payload\xc0", b"\xa7Payload\xa0")
    assert messages.decode(empty_raw, LIMITS) == messages.Ack(seq_no=5, payload=b"")


def test_strings_that_are_not_utf8_survive_a_round_trip():
    """Go strings carry any bytes; a node name need not be UTF-8."""
    wire = messages.encode(messages.Suspect(incarnation=1, node="x", from_="y")).replace(b"\xa1x", b"\xa1\xff")
    msg = messages.decode(wire, LIMITS)
    assert messages.encode(msg) == wire


# ------------------------------------------------------------------ push/pull


def _expected_nodes():
    """The two node states gen.go puts in every push/pull (read off gen.go)."""
    vsn = bytes([1, 5, 2, 2, 5, 4])
    meta = bytes([0xFF]) + bytes((3 + i * 7) & 0xFF for i in range(300))
    return [messages.PushNodeState(name="serf-1", addr=bytes([10, 0, 0, 7]), port=7946, meta=b"\xff\x80",
                                   incarnation=3, state=NodeState.ALIVE, vsn=vsn),
            messages.PushNodeState(name="py-1", addr=bytes.fromhex("fd00" + "00" * 13 + "01"),
                                   port=7947, meta=meta, incarnation=70000, state=NodeState.DEAD, vsn=vsn)]


STREAMS = [f for f in VECTORS["frames"] if f["name"].startswith("push-pull-")]


@pytest.mark.parametrize("frame", STREAMS, ids=lambda f: f["name"])
def test_push_pull_streams_decode_and_reencode_exactly(frame):
    extra = frame["extra"]
    wire = bytes.fromhex(frame["wire"])
    keyring = crypto.Keyring([bytes.fromhex(extra["key"])]) if "key" in extra else None
    keys = [b"\x01" * 32, bytes.fromhex(extra["key"])] if keyring else ()
    (kind, state), used = framing.decode_stream(wire, LIMITS, keys=keys)
    assert kind == MessageType.PUSH_PULL and used == len(wire)
    assert state == messages.PushPull(join="join" in extra, nodes=_expected_nodes(),
                                      user_state=bytes.fromhex(extra["state"]))
    version = 0 if extra["protocol"] == "1" else 1
    again = framing.encode_stream(messages.encode_push_pull(state), compress="compression" in extra,
                                  keyring=keyring, encryption_version=version,
                                  nonce=bytes.fromhex(extra["nonce"]) if keyring else None)
    assert again == wire


@pytest.mark.parametrize("name", ["user-stream", "user-stream-compressed-encrypted"])
def test_user_streams_decode_and_reencode_exactly(name):
    frame = _frame(name)
    extra, wire, payload = frame.get("extra", {}), bytes.fromhex(frame["wire"]), bytes.fromhex(frame["parts"][0])
    keyring = crypto.Keyring([bytes.fromhex(extra["key"])]) if "key" in extra else None
    assert framing.decode_stream(wire, LIMITS, keys=keyring.keys if keyring else ()) == (
        (MessageType.USER, payload), len(wire))
    assert framing.encode_stream(messages.encode_user_stream(payload), compress="compression" in extra,
                                 keyring=keyring, nonce=bytes.fromhex(extra["nonce"]) if keyring else None) == wire


def test_a_plain_stream_is_parsed_from_its_start_and_reports_its_length():
    wire = bytes.fromhex(_frame("push-pull-plain")["wire"])
    (_kind, state), used = framing.decode_stream(wire + b"\x02next", LIMITS)
    assert used == len(wire) and state.user_state[-1:] == wire[-1:]
    for cut in (1, 10, len(wire) // 2, len(wire) - 1):
        with pytest.raises(Truncated):
            framing.decode_stream(wire[:cut], LIMITS)


def test_stream_encryption_policies():
    frame = _frame("push-pull-encrypted-v1")
    wire = bytes.fromhex(frame["wire"])
    key = bytes.fromhex(frame["extra"]["key"])
    with pytest.raises(GossipWireError, match="encryption is not configured"):
        framing.decode_stream(wire, LIMITS)
    with pytest.raises(GossipWireError) as wrong:
        framing.decode_stream(wire, LIMITS, keys=[b"\x02" * 16])
    assert wrong.value.reason == "no_key"
    plain = bytes.fromhex(_frame("push-pull-plain")["wire"])
    with pytest.raises(GossipWireError, match="not encrypted"):
        framing.decode_stream(plain, LIMITS, keys=[key])
    assert framing.decode_stream(plain, LIMITS, keys=[key], verify_incoming=False)[1] == len(plain)


# ---------------------------------------------------------------------- LZW


@pytest.mark.parametrize("vector", VECTORS["lzw"], ids=lambda v: v["name"])
def test_lzw_vectors_both_ways(vector):
    plain, packed = bytes.fromhex(vector["plain"]), bytes.fromhex(vector["lzw"])
    assert lzw.compress(plain) == packed
    assert lzw.compress_py(plain) == packed
    assert lzw.decompress(packed, len(plain)) == plain
    assert framing.compress_message(plain) == bytes.fromhex(vector["wire"])


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=3000) | st.lists(st.sampled_from([b"a", b"b", b"ab", b"\0" * 50]), max_size=400).map(b"".join))
def test_lzw_round_trip(data):
    assert lzw.decompress(lzw.compress(data), len(data)) == data


@settings(max_examples=40, deadline=None)
@given(st.binary(max_size=70_000) | st.integers(0, 200_000).map(bytes))
def test_a_compress_message_is_what_the_general_encoder_writes(data):
    """compress_message appends to a head made once; the Buf's raw header
    grows with it (fixraw, raw16, raw32)."""
    assert framing.compress_message(data) == messages.encode(messages.Compress(algo=0, buf=lzw.compress(data)))


def test_lzw_bomb_stops_at_the_bound():
    """Zeros compress to codes that each stand for ever longer runs."""
    bomb = lzw.compress(bytes(2_000_000))
    assert len(bomb) < 5000
    with pytest.raises(GossipWireError) as caught:
        lzw.decompress(bomb, 100_000)
    assert caught.value.reason == "too_large"


def test_lzw_bad_data():
    with pytest.raises(Truncated):
        lzw.decompress(lzw.compress(b"hello")[:-2], 100)
    with pytest.raises(Truncated):
        lzw.decompress(b"", 100)
    with pytest.raises(GossipWireError, match="invalid LZW code"):
        lzw.decompress(bytes([0x00, 0xFE, 0xFF]), 100)  # clear, then a code far past the next one


# ------------------------------------------------------------------ crypto


@pytest.mark.parametrize("vector", VECTORS["crypto"], ids=lambda v: v["name"])
def test_encryption_vectors(vector):
    key, nonce, aad, plain = (bytes.fromhex(vector[k]) for k in ("key", "nonce", "aad", "plain"))
    wire = bytes.fromhex(vector["wire"])
    assert crypto.encrypt_payload(vector["version"], key, plain, aad, nonce) == wire
    assert len(wire) == crypto.encrypted_length(vector["version"], len(plain))
    other = bytes(len(key))
    assert crypto.decrypt_payload([other, key], wire, aad) == plain
    with pytest.raises(GossipWireError) as caught:
        crypto.decrypt_payload([other], wire, aad)
    assert caught.value.reason == "no_key"


def test_associated_data_binds_the_label():
    vector = next(v for v in VECTORS["crypto"] if v["aad"])
    with pytest.raises(GossipWireError):
        crypto.decrypt_payload([bytes.fromhex(vector["key"])], bytes.fromhex(vector["wire"]), b"label-b")


def test_keyring_primary_encrypts_and_rotation():
    a, b, c = b"a" * 16, b"b" * 24, b"c" * 32
    ring = crypto.Keyring([a, b])
    assert ring.primary_key == a and ring.keys == (a, b)
    ring.add_key(c)
    ring.use_key(c)
    assert ring.keys == (c, a, b)
    with pytest.raises(ValueError, match="primary"):
        ring.remove_key(c)
    ring.remove_key(a)
    assert ring.keys == (c, b)
    with pytest.raises(ValueError, match="16, 24 or 32"):
        ring.add_key(b"short")
    assert crypto.Keyring([a], primary=b).keys == (b, a)


def test_decrypt_bad_input():
    key = b"k" * 16
    with pytest.raises(Truncated):
        crypto.decrypt_payload([key], b"")
    with pytest.raises(GossipWireError, match="version 2"):
        crypto.decrypt_payload([key], b"\x02" + bytes(40))
    with pytest.raises(Truncated):
        crypto.decrypt_payload([key], b"\x00" + bytes(40))  # version 0 needs 45 bytes at least
    with pytest.raises(GossipWireError, match="padding"):
        crypto.decrypt_payload([key], crypto.encrypt_payload(1, key, bytes(16) + b"\x00", nonce=bytes(12))
                               .replace(b"\x01", b"\x00", 1))


# ------------------------------------------------------------ packets, framing


def test_compound_vectors():
    frame = _frame("compound-4")
    parts = [bytes.fromhex(p) for p in frame["parts"]]
    wire = bytes.fromhex(frame["wire"])
    assert framing.make_compound(parts) == wire
    assert framing.split_compound(wire[1:]) == (parts, 0)
    assert framing.make_compound([]) == bytes.fromhex(_frame("compound-0")["wire"])
    cut = _frame("compound-cut")
    assert framing.split_compound(bytes.fromhex(cut["wire"])[1:]) == (
        [bytes.fromhex(p) for p in cut["parts"]], int(cut["extra"]["truncated"]))


PACKETS = [f for f in VECTORS["frames"] if f["name"].startswith("packet-")]


@pytest.mark.parametrize("frame", PACKETS, ids=lambda f: f["name"])
def test_packets_as_rawSendMsgPacket_builds_them(frame):
    extra = frame["extra"]
    msg, wire = bytes.fromhex(frame["parts"][0]), bytes.fromhex(frame["wire"])
    keyring = crypto.Keyring([bytes.fromhex(extra["key"])]) if "key" in extra else None
    version = 0 if extra["protocol"] == "1" else 1
    built = framing.encode_packet(msg, compress="compression" in extra, crc=extra["pmax"] == "5",
                                  keyring=keyring, encryption_version=version,
                                  nonce=bytes.fromhex(extra["nonce"]) if keyring else None)
    assert built == wire
    opened = framing.open_packet(wire, LIMITS, keys=keyring.keys if keyring else ())
    inner, truncated = framing.split_messages(opened, LIMITS)
    expected = framing.split_messages(msg, LIMITS)[0]
    assert (inner, truncated) == (expected, 0)
    assert all(type(messages.decode(m, LIMITS)).__name__ for m in inner)


def test_crc_is_checked():
    wire = bytes.fromhex(_frame("packet-crc")["wire"])
    assert wire[0] == MessageType.HAS_CRC
    assert int.from_bytes(wire[1:5], "big") == zlib.crc32(wire[5:])
    bad = wire[:-1] + bytes([wire[-1] ^ 1])
    with pytest.raises(GossipWireError) as caught:
        framing.open_packet(bad, LIMITS)
    assert caught.value.reason == "bad_crc"


def test_encrypted_packet_policies():
    frame = _frame("packet-encrypted-v1-crc")
    wire, key = bytes.fromhex(frame["wire"]), bytes.fromhex(frame["extra"]["key"])
    with pytest.raises(GossipWireError):
        framing.open_packet(wire, LIMITS, keys=[b"w" * 16])
    plain = bytes.fromhex(_frame("packet-crc")["wire"])
    with pytest.raises(GossipWireError):
        framing.open_packet(plain, LIMITS, keys=[key])
    # Roll-out (GossipVerifyIncoming off): an unencrypted packet is taken as is.
    assert framing.open_packet(plain, LIMITS, keys=[key], verify_incoming=False) == plain[5:]


# -------------------------------------------------------------------- labels


def test_label_header_bytes_by_hand():
    assert label.add_label(b"\x00abc", b"") == b"\x00abc"
    assert label.add_label(b"\x00abc", b"dc1") == b"\xf4\x03dc1\x00abc"
    assert label.split_label(b"\xf4\x03dc1\x00abc") == (b"dc1", 5)
    assert label.split_label(b"\x00abc") == (b"", 0)
    assert label.split_label(b"") == (b"", 0)
    with pytest.raises(ValueError):
        label.add_label(b"", b"x" * 256)
    with pytest.raises(GossipWireError, match="empty label"):
        label.split_label(b"\xf4\x00\x00")
    for cut in (b"\xf4", b"\xf4\x03dc"):
        with pytest.raises(Truncated):
            label.split_label(cut)


def test_labelled_packets_and_streams_between_python_nodes():
    """memberlist >= 0.3 puts the label outside and authenticates it; Debian's
    0.2.2 has no labels, so these are Python-to-Python only."""
    key = b"k" * 32
    ring = crypto.Keyring([key])
    ping = messages.encode(messages.Ping(seq_no=1, node="a"))
    packet = framing.encode_packet(ping, crc=True, keyring=ring, label=b"dc1")
    assert packet[:5] == b"\xf4\x03dc1" and packet[5] == 1  # then encryption version 1
    assert framing.split_messages(framing.open_packet(packet, LIMITS, keys=[key], label=b"dc1"), LIMITS)[0] == [ping]
    for other in (b"", b"dc2"):
        with pytest.raises(GossipWireError) as caught:
            framing.open_packet(packet, LIMITS, keys=[key], label=other)
        assert caught.value.reason == "bad_label"
    # The label is associated data: moved onto another label, the packet no longer opens.
    moved = label.add_label(packet[5:], b"dc2")
    with pytest.raises(GossipWireError):
        framing.open_packet(moved, LIMITS, keys=[key], label=b"dc2")
    stream = framing.encode_stream(messages.encode_user_stream(b"evt"), keyring=ring, label=b"dc1")
    assert framing.decode_stream(stream, LIMITS, keys=[key], label=b"dc1") == ((MessageType.USER, b"evt"), len(stream))
    with pytest.raises(GossipWireError):
        framing.decode_stream(label.add_label(stream[5:], b"dc2"), LIMITS, keys=[key], label=b"dc2")


# ------------------------------------------------------------ hypothesis round trips

_u32 = st.integers(0, 2**32 - 1)
_u16 = st.integers(0, 2**16 - 1)
_name = st.text(max_size=40)
_raw = st.binary(max_size=300)
_vsn = st.binary(min_size=6, max_size=6)
_message = st.one_of(
    st.builds(messages.Ping, seq_no=_u32, node=_name, source_addr=_raw, source_port=_u16, source_node=_name),
    st.builds(messages.IndirectPing, seq_no=_u32, target=_raw, port=_u16, node=_name, nack=st.booleans(),
              source_addr=_raw, source_port=_u16, source_node=_name),
    st.builds(messages.Ack, seq_no=_u32, payload=_raw),
    st.builds(messages.Nack, seq_no=_u32),
    st.builds(messages.Err, error=_name),
    st.builds(messages.Suspect, incarnation=_u32, node=_name, from_=_name),
    st.builds(messages.Dead, incarnation=_u32, node=_name, from_=_name),
    st.builds(messages.Alive, incarnation=_u32, node=_name, addr=_raw, port=_u16,
              meta=st.binary(max_size=512), vsn=_vsn))


@settings(max_examples=150, deadline=None)
@given(_message)
def test_messages_round_trip(msg):
    wire = messages.encode(msg)
    assert messages.decode(wire, LIMITS) == msg


@settings(max_examples=40, deadline=None)
@given(st.lists(_message, min_size=1, max_size=8), st.booleans(), st.booleans(), st.booleans(),
       st.sampled_from([b"", b"dc1"]))
def test_packets_round_trip(msgs, compress, crc, encrypt, lab):
    parts = [messages.encode(m) for m in msgs]
    body = parts[0] if len(parts) == 1 else framing.make_compound(parts)
    ring = crypto.Keyring([b"r" * 16]) if encrypt else None
    packet = framing.encode_packet(body, compress=compress, crc=crc, keyring=ring, label=lab)
    opened = framing.open_packet(packet, LIMITS, keys=ring.keys if ring else (), label=lab)
    assert [messages.decode(p, LIMITS) for p in framing.split_messages(opened, LIMITS)[0]] == msgs


_node = st.builds(messages.PushNodeState, name=_name, addr=_raw, port=_u16, meta=st.binary(max_size=512),
                  incarnation=_u32, state=st.sampled_from(list(NodeState)), vsn=_vsn)


@settings(max_examples=30, deadline=None)
@given(st.builds(messages.PushPull, join=st.booleans(), nodes=st.lists(_node, max_size=5), user_state=_raw),
       st.booleans(), st.sampled_from([None, 0, 1]))
def test_push_pull_round_trip(state, compress, version):
    ring = crypto.Keyring([b"s" * 24]) if version is not None else None
    wire = framing.encode_stream(messages.encode_push_pull(state), compress=compress, keyring=ring,
                                 encryption_version=version or 0)
    assert framing.decode_stream(wire, LIMITS, keys=ring.keys if ring else ()) == (
        (MessageType.PUSH_PULL, state), len(wire))


# ------------------------------------------------------------------ bad input


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_garbage_raises_only_the_codec_error(data):
    for parse in (lambda: messages.decode(data, LIMITS),
                  lambda: framing.split_messages(data, LIMITS),
                  lambda: framing.open_packet(data, LIMITS, keys=[b"k" * 16]),
                  lambda: framing.decode_stream(data, LIMITS),
                  lambda: lzw.decompress(data, 10_000)):
        try:
            parse()
        except GossipWireError:
            pass


@pytest.mark.parametrize("vector", VECTORS["messages"], ids=lambda v: v["name"])
def test_every_truncation_of_a_message_is_refused(vector):
    wire = bytes.fromhex(vector["wire"])
    cls = CLASSES[vector["type"]]
    for cut in range(1, len(wire)):
        with pytest.raises(GossipWireError):
            cls.decode_body(wire[:cut], LIMITS, 1)


def test_wrong_types_and_ranges_are_refused():
    def body(**fields):
        return b"\x02" + msgpack_go.pack_struct(fields)
    for bad in (body(SeqNo=-1), body(SeqNo=2**32), body(SeqNo=b"x"), body(SeqNo=1, Payload=5), body(SeqNo=True)):
        with pytest.raises(GossipWireError) as caught:
            messages.decode(bad, LIMITS)
        assert caught.value.reason == "bad_field"
    assert messages.decode(body(SeqNo=7, Unknown=1), LIMITS) == messages.Ack(seq_no=7)  # Go ignores unknown keys
    with pytest.raises(GossipWireError, match="not a msgpack map"):
        messages.decode(b"\x02\x93\x01\x02\x03", LIMITS)
    with pytest.raises(GossipWireError, match="trailing"):
        messages.decode(body(SeqNo=1) + b"\x00", LIMITS)
    with pytest.raises(GossipWireError, match="Vsn"):
        messages.decode(b"\x04" + msgpack_go.pack_struct({"Node": "a", "Vsn": b"\x01\x02"}), LIMITS)
    with pytest.raises(GossipWireError, match="Meta"):
        messages.decode(b"\x04" + msgpack_go.pack_struct({"Node": "a", "Meta": bytes(513)}), LIMITS)
    with pytest.raises(GossipWireError, match="not a single-struct"):
        messages.decode(b"\x06\x80", LIMITS)


def test_oversized_and_deep_msgpack_is_refused():
    small = Limits(max_string=10, max_container=4, max_nesting=2)
    long_name = messages.encode(messages.Ping(node="n" * 11))
    with pytest.raises(GossipWireError) as caught:
        messages.decode(long_name, small)
    assert caught.value.reason == "bad_msgpack"
    wide = b"\x02" + msgpack_go.pack({f"K{i}": i for i in range(5)})
    with pytest.raises(GossipWireError):
        messages.decode(wide, small)
    deep = b"\x02\x81\xa1A" + b"\x91" * 3 + b"\x00"
    with pytest.raises(GossipWireError) as caught:
        messages.decode(deep, small)
    assert caught.value.reason == "too_deep"
    # Far deeper than any bound: refused (msgpack's own stack bound or ours), never a crash.
    with pytest.raises(GossipWireError):
        messages.decode(b"\x02" + b"\x91" * 100_000 + b"\x00", LIMITS)
    # A raw32 announcing 4 GiB in a short buffer: refused without allocating it.
    with pytest.raises(GossipWireError):
        messages.decode(b"\x02\x81\xa7Payload\xdb\xff\xff\xff\xff", LIMITS)


def _depth_and_ext(value) -> tuple[int, bool]:
    """The nesting of a decoded value (a struct is 1) and whether an ext type is in it."""
    if isinstance(value, msgpack.ExtType):
        return 0, True
    if isinstance(value, dict):
        found = [_depth_and_ext(x) for x in [*value.keys(), *value.values()]]
    elif isinstance(value, list):
        found = [_depth_and_ext(x) for x in value]
    else:
        return 0, False
    return 1 + max((d for d, _ in found), default=0), any(e for _, e in found)


_SCALARS = st.integers(-5, 300) | st.binary(max_size=3) | st.none() | st.booleans()
_MSGPACK = st.recursive(
    _SCALARS | st.builds(msgpack.ExtType, st.integers(0, 5), st.binary(max_size=2)),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_SCALARS.filter(lambda x: x is not None)
                                                                | st.builds(msgpack.ExtType, st.just(1), st.just(b"")),
                                                                inner, max_size=3),
    max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(_MSGPACK, st.integers(1, 5))
def test_msgpack_is_refused_exactly_when_too_deep_or_with_an_ext_type(value, max_nesting):
    depth, ext = _depth_and_ext(value)
    data = msgpack.packb(value, use_bin_type=False)
    limits = Limits(max_nesting=max_nesting)
    if depth <= max_nesting and not ext:
        assert msgpack_go.unpack(data, limits)[1] == len(data)
        return
    with pytest.raises(GossipWireError) as caught:
        msgpack_go.unpack(data, limits)
    assert caught.value.reason in ({"too_deep"} if depth > max_nesting else set()) | ({"bad_msgpack"} if ext else set())


def test_push_pull_counts_are_bounded():
    limits = Limits(max_push_nodes=3, max_user_state=100)
    many = b"\x06" + messages.PushPullHeader(nodes=4).encode_body()
    with pytest.raises(GossipWireError) as caught:
        framing.decode_stream(many, limits)
    assert caught.value.reason == "too_many"
    big = b"\x06" + messages.PushPullHeader(user_state_len=101).encode_body()
    with pytest.raises(GossipWireError, match="user state"):
        framing.decode_stream(big, limits)
    negative = b"\x06" + msgpack_go.pack_struct({"Nodes": -1})
    with pytest.raises(GossipWireError, match="negative"):
        framing.decode_stream(negative, limits)
    encrypted = b"\x0a" + (LIMITS.max_stream + 1).to_bytes(4, "big")
    with pytest.raises(GossipWireError) as caught:
        framing.decode_stream(encrypted, LIMITS, keys=[b"k" * 16])
    assert caught.value.reason == "too_large"


def test_nested_wrappers_and_message_counts_are_bounded():
    ping = messages.encode(messages.Ping(seq_no=1))
    nested = ping
    for _ in range(5):
        nested = framing.make_compound([nested])
    with pytest.raises(GossipWireError) as caught:
        framing.split_messages(nested, Limits(max_nesting=4))
    assert caught.value.reason == "too_deep"
    assert framing.split_messages(nested, Limits(max_nesting=5)) == ([ping], 0)
    squeezed = framing.compress_message(framing.compress_message(ping))
    with pytest.raises(GossipWireError):
        framing.split_messages(squeezed, Limits(max_nesting=1))
    wide = framing.make_compound([framing.make_compound([ping] * 255)] * 255)
    with pytest.raises(GossipWireError) as caught:
        framing.split_messages(wide, Limits(max_messages=1000))
    assert caught.value.reason == "too_many"
    with pytest.raises(GossipWireError):
        framing.open_packet(bytes(70_000), LIMITS)


def test_compressed_packet_bomb_is_bounded():
    bomb = framing.compress_message(b"\x08" + bytes(3_000_000))
    assert len(bomb) < 10_000
    with pytest.raises(GossipWireError) as caught:
        framing.split_messages(bomb, Limits())       # the datagram bound, 64 KiB
    assert caught.value.reason == "too_large"


def test_compound_refuses_what_it_cannot_frame():
    with pytest.raises(ValueError):
        framing.make_compound([b"x"] * 256)
    with pytest.raises(ValueError):
        framing.make_compound([bytes(65536)])
    with pytest.raises(Truncated):
        framing.split_compound(b"")
    with pytest.raises(Truncated):
        framing.split_compound(b"\x02\x00")


def test_import_mcastmember_loads_no_gossip_code():
    """The gossip layer and its extra's packages stay out of `import mcastmember`."""
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", "import sys, mcastmember, mcastmember.tools.cli; print(sorted(m for m in "
                          "sys.modules if m.startswith(('mcastmember.gossip', 'msgpack', 'cryptography'))))"],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
