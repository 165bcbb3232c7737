"""The wire codec, against Tomcat's own vectors, in both implementations."""

import struct

import pytest

from mcastmember.tribes.wire import layout as L
from mcastmember.tribes.wire.errors import MalformedPacket

from support import LOCALHOST, UID, V1, V2, VECTORS, heartbeat


@pytest.mark.parametrize("name", sorted(VECTORS))
def test_vectors_decode_to_their_fields(codec, name):
    packet, fields = VECTORS[name]
    assert codec.check(packet) == L.OK
    assert codec.parse(packet) == fields


@pytest.mark.parametrize("name", sorted(VECTORS))
def test_vectors_reencode_byte_for_byte(codec, name):
    packet, fields = VECTORS[name]
    assert codec.encode(*fields) == packet


def test_stock_tomcat_heartbeat_is_77_bytes(codec):
    assert len(codec.encode(0, 4000, -1, -1, LOCALHOST, b"", b"", UID, b"")) == 77


def test_bytes_after_end_marker_are_ignored_as_tomcat_does(codec):
    assert codec.check(V1 + b"junk") == L.OK
    assert codec.parse(V1 + b"junk") == VECTORS["V1"][1]


def test_n_limits_the_bytes_read(codec):
    buf = bytearray(V1) + bytearray(100)
    assert codec.check(buf, len(V1)) == L.OK
    assert codec.parse(buf, len(V1)) == VECTORS["V1"][1]
    assert codec.check(buf, len(V1) - 1) == L.TRUNCATED


def test_accepts_bytes_bytearray_and_memoryview(codec):
    for form in (V2, bytearray(V2), memoryview(V2)):
        assert codec.parse(form) == VECTORS["V2"][1]


def _with(packet, offset, new):
    data = bytearray(packet)
    data[offset:offset + len(new)] = new
    return bytes(data)


def _int32(value):
    return struct.pack(">i", value)


# Each malformed packet with the exact verdict it must get.
MALFORMED = {
    "empty": (b"", L.NOT_MEMBERSHIP),
    "random": (b"hello world", L.NOT_MEMBERSHIP),
    "channel frame": (b"FLT2002" + bytes(20) + b"TLF2003", L.CHANNEL_FRAME),
    "doctor probe": (b"MCDOCTOR\x01L" + bytes(28), L.DOCTOR_PROBE),
    "begin tag only": (b"TRIBES-B", L.TRUNCATED),
    "begin marker only": (b"TRIBES-B\x01\x00", L.TRUNCATED),
    "old 8-byte markers": (b"TRIBES-B" + V2[14:], L.BAD_VERSION),
    "version 2": (_with(V2, 8, b"\x02\x00"), L.BAD_VERSION),
    "end version 2": (_with(V2, len(V2) - 2, b"\x02\x00"), L.BAD_VERSION),
    "truncated by one": (V2[:-1], L.TRUNCATED),
    "header only": (V2[:14], L.TRUNCATED),
    "negative body length": (_with(V2, 10, _int32(-1)), L.BAD_BODY_LENGTH),
    "huge body length": (_with(V2, 10, _int32(2**31 - 1)), L.TRUNCATED),
    "body length one short": (_with(V2, 10, _int32(0x34)) + b"\x00", L.BAD_END_MARKER),
    "end marker broken": (_with(V2, len(V2) - 10, b"TRIBES-X"), L.BAD_END_MARKER),
    "host length 5": (_with(V2, L.OFF_HOST_LEN, b"\x05"), L.BAD_HOST_LENGTH),
    "host length negative": (_with(V2, L.OFF_HOST_LEN, b"\xff"), L.BAD_HOST_LENGTH),
    "command overruns": (_with(V2, 39, _int32(1000)), L.FIELD_OVERRUN),
    "command negative": (_with(V2, 39, _int32(-5)), L.FIELD_OVERRUN),
    "domain overruns": (_with(V2, 43, _int32(60)), L.FIELD_OVERRUN),
    "payload overruns": (_with(V2, 63, _int32(1)), L.FIELD_OVERRUN),
    "body too short for fixed fields": (b"TRIBES-B\x01\x00" + _int32(4) + bytes(4)
                                        + b"TRIBES-E\x01\x00", L.FIELD_OVERRUN),
    "oversized": (V2 + bytes(L.MAX_PACKET_LEN), L.OVERSIZED),
}


def _body_with_trailing_byte():
    body = V2[14:-10] + b"\x00"
    return V2[:10] + _int32(len(body)) + body + V2[-10:]


MALFORMED["trailing byte in body"] = (_body_with_trailing_byte(), L.LENGTH_MISMATCH)


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_packets_get_their_reason(codec, name):
    packet, verdict = MALFORMED[name]
    assert codec.check(packet) == verdict
    with pytest.raises(MalformedPacket) as caught:
        codec.parse(packet)
    assert caught.value.code == verdict
    assert caught.value.reason == L.REASONS[verdict]


@pytest.mark.parametrize("bad, message", [
    (dict(host=b"\x01\x02\x03"), "host must be 4"),
    (dict(uid=b"short"), "unique_id must be 16"),
    (dict(port=2**31), "port"),
    (dict(payload=bytes(L.MAX_PACKET_LEN)), "limit is 65507"),
])
def test_encode_refuses_what_cannot_be_sent(codec, bad, message):
    fields = dict(alive=0, port=4000, host=LOCALHOST, uid=UID, payload=b"")
    fields.update(bad)
    with pytest.raises(ValueError, match=message):
        codec.encode(fields["alive"], fields["port"], -1, -1, fields["host"], b"", b"",
                     fields["uid"], fields["payload"])


def test_largest_packet_is_accepted(codec):
    payload = bytes(L.MAX_PACKET_LEN - L.EMPTY_PACKET_LEN - 4)
    packet = codec.encode(1, 1, -1, -1, LOCALHOST, b"", b"", UID, payload)
    assert len(packet) == L.MAX_PACKET_LEN
    assert codec.check(packet) == L.OK


def test_heartbeat_packet_patches_only_the_alive_bytes(codec):
    packet = heartbeat(codec, alive=0, payload=b"p")
    hb = codec.HeartbeatPacket(packet, origin_ns=0)
    buffer = hb.buffer
    hb.stamp(0x0102030405060708)
    assert hb.buffer is buffer            # the same buffer every time
    assert bytes(buffer[14:22]) == bytes.fromhex("0102030405060708")
    assert bytes(buffer[:14]) == packet[:14] and bytes(buffer[22:]) == packet[22:]
    assert hb.alive_ms == 0x0102030405060708
    assert codec.parse(buffer)[0] == 0x0102030405060708


def test_stamp_now_counts_ms_since_origin(codec):
    import time
    origin = time.monotonic_ns() - 5_000_000_000
    hb = codec.HeartbeatPacket(heartbeat(codec), origin_ns=origin)
    hb.stamp_now()
    assert 5000 <= hb.alive_ms < 6000


def test_alive_cap_wraps_round_and_keeps_changing(codec):
    import time
    now = time.monotonic_ns()
    seen = []
    for elapsed_ms in (0, 500, 900, 1500, 1800, 7250):
        capped = codec.HeartbeatPacket(heartbeat(codec), origin_ns=now - elapsed_ms * 1_000_000,
                                       alive_cap=1000)
        capped.stamp_now()
        seen.append(capped.alive_ms)
    # elapsed % 1001, give or take the few ms the loop itself takes
    expected = [0, 500, 900, 499, 799, 243]
    assert all(e <= s <= e + 50 for s, e in zip(seen, expected)), seen


def test_below_zero_alive_is_always_negative_and_keeps_changing(codec):
    import time
    now = time.monotonic_ns()
    seen = []
    for elapsed_ms in (0, 500, 900, 1500, 7250):
        packet = codec.HeartbeatPacket(heartbeat(codec), origin_ns=now - elapsed_ms * 1_000_000,
                                       alive_cap=1000, below_zero=True)
        packet.stamp_now()
        seen.append(packet.alive_ms)
        assert codec.parse(packet.buffer)[0] == packet.alive_ms
    # -1 - (elapsed % 1001), give or take the few ms the loop itself takes
    expected = [-1, -501, -901, -500, -244]
    assert all(e - 50 <= s <= e for s, e in zip(seen, expected)), seen


def test_heartbeat_packet_refuses_malformed_templates(codec):
    with pytest.raises(MalformedPacket):
        codec.HeartbeatPacket(V2[:-1])


@pytest.mark.parametrize("name", sorted(VECTORS))
def test_identity_without_parsing(codec, name):
    from mcastmember.tribes.engine.member import Member
    packet, fields = VECTORS[name]
    assert codec.identity(packet) == Member.from_fields(fields).identity
    with pytest.raises(MalformedPacket):
        codec.identity(packet[:-1])
