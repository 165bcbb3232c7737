"""The authentication trailer's reference implementation (auth.py): the key
file, signing and checking against a vector made with OpenSSL, sequences and
the replay guard."""

import logging
import os

import pytest

from mcastmember.tribes.wire import layout as L
from mcastmember.tribes.wire import auth
from mcastmember._runtime.errors import ConfigurationError

from support import V2

KEY = bytes(range(32))
RING = auth.HeartbeatKeys([(1, KEY)])
SEQUENCE = 0x0102030405060708
# V2 + trailer for key id 1, KEY, SEQUENCE; the MAC is the first 16 bytes of
# `openssl dgst -sha256 -mac HMAC -macopt hexkey:000102...1f` over V2 + header.
TRAILER = bytes.fromhex("4d4d41" "01" "01" "0102030405060708"
                        "843171dd8521dbdfbc0aa1e4118214dc")


def test_trailer_matches_openssls_hmac():
    assert auth.trailer(V2, RING, SEQUENCE) == TRAILER
    assert len(TRAILER) == L.AUTH_TRAILER_LEN == 29


def test_check_verdicts():
    assert auth.check(V2 + TRAILER, RING) == (auth.AUTH_OK, 1, SEQUENCE)
    assert auth.check(V2, RING) == (auth.NO_TRAILER, 0, 0)
    assert auth.check(V2 + TRAILER[:-1], RING) == (auth.BAD_TRAILER, 0, 0)
    assert auth.check(V2 + b"XYZ" + TRAILER[3:], RING) == (auth.BAD_TRAILER, 0, 0)
    other = TRAILER[:4] + b"\x02" + TRAILER[5:]
    assert auth.check(V2 + other, RING) == (auth.UNKNOWN_KEY, 2, SEQUENCE)
    forged = bytearray(V2 + TRAILER)
    forged[40] ^= 1                                   # any bit of the packet
    assert auth.check(bytes(forged), RING)[0] == auth.BAD_MAC
    later = auth.trailer(V2, RING, SEQUENCE)[:5] + (SEQUENCE + 1).to_bytes(8, "big") + TRAILER[13:]
    assert auth.check(V2 + later, RING)[0] == auth.BAD_MAC   # the sequence is under the MAC


def test_every_key_verifies_the_first_signs():
    new = os.urandom(32)
    rotating = auth.HeartbeatKeys([(2, new), (1, KEY)])
    assert rotating.signing_id == 2
    assert auth.check(V2 + TRAILER, rotating) == (auth.AUTH_OK, 1, SEQUENCE)
    signed = V2 + auth.trailer(V2, rotating, 5)
    assert auth.check(signed, rotating) == (auth.AUTH_OK, 2, 5)
    assert auth.check(signed, RING)[0] == auth.UNKNOWN_KEY


def test_sequences_never_repeat_even_when_the_clock_steps_back():
    clock = auth.SequenceClock()
    assert [clock.next(t) for t in (1000, 1000, 1500, 900, 2000)] == [1000, 1001, 1500, 1501, 2000]


def test_replay_guard():
    guard = auth.ReplayGuard(window_us=5_000_000)
    now = 100_000_000
    assert guard.fresh(b"a", now - 1_000_000, now)          # first packet, inside the window
    assert not guard.fresh(b"a", now - 1_000_000, now)      # the same again: a replay
    assert not guard.fresh(b"a", now - 2_000_000, now)      # an older one (reordered, or replayed)
    assert guard.fresh(b"a", now, now)
    assert not guard.fresh(b"b", now - 6_000_000, now)      # a stranger's capture, too old


def test_replay_guard_is_bounded():
    guard = auth.ReplayGuard(window_us=10, max_senders=2)
    for name in (b"a", b"b", b"c"):
        assert guard.fresh(name, 100, 100)
    assert len(guard._last) == 2


def write(tmp_path, text, mode=0o600):
    path = tmp_path / "keys"
    path.write_text(text)
    path.chmod(mode)
    return path


def test_key_file(tmp_path):
    path = write(tmp_path, f"# cluster keys\n\n7 {'ab' * 32}   # new\n1 {KEY.hex()}\n")
    ring = auth.HeartbeatKeys.from_file(path)
    assert ring.signing_id == 7
    assert ring.keys == {7: bytes([0xab] * 32), 1: KEY}


@pytest.mark.parametrize("text, message", [
    ("", "no keys"),
    ("# nothing\n", "no keys"),
    ("1\n", "line 1: expected '<key id 1-255> <64 hex digits>'"),
    (f"0 {'00' * 32}\n", "line 1: key id 0 is not 1-255"),
    (f"256 {'00' * 32}\n", "line 1: key id 256 is not 1-255"),
    (f"1 {'00' * 31}\n", "line 1: the key has 62 hex digits, not 64"),
    (f"1 {'zz' * 32}\n", "line 1: the key is not hex digits"),
    (f"1 {'00' * 32}\n\n1 {'11' * 32}\n", "line 3: key id 1 already on line 1"),
])
def test_bad_key_files_say_which_line_and_why(tmp_path, text, message):
    with pytest.raises(ConfigurationError, match=message):
        auth.HeartbeatKeys.from_file(write(tmp_path, text))


def test_missing_key_file(tmp_path):
    with pytest.raises(ConfigurationError, match="No such file or directory"):
        auth.HeartbeatKeys.from_file(tmp_path / "absent")


@pytest.mark.parametrize("mode", [0o644, 0o604, 0o602, 0o666], ids="{:03o}".format)
def test_a_key_file_every_user_may_read_or_write_is_refused(tmp_path, mode):
    path = write(tmp_path, f"1 {KEY.hex()}\n", mode=mode)
    with pytest.raises(ConfigurationError) as caught:
        auth.HeartbeatKeys.from_file(path)
    assert str(caught.value) == (f"key file {path} can be read or written by every user of "
                                 f"this host (mode {mode:03o}): chmod 600 it")


@pytest.mark.parametrize("mode", [0o640, 0o660, 0o440, 0o620], ids="{:03o}".format)
def test_a_key_file_its_group_may_read_or_write_is_warned_about(tmp_path, caplog, mode):
    with caplog.at_level(logging.WARNING, logger="mcastmember"):
        ring = auth.HeartbeatKeys.from_file(write(tmp_path, f"1 {KEY.hex()}\n", mode=mode))
    assert ring.keys == {1: KEY}
    [record] = caplog.records
    assert record.getMessage().endswith(f"can be read or written by its group (mode {mode:03o}): "
                                        "every user in it can forge members; chmod 600 it "
                                        "unless the group is this service's own")


@pytest.mark.parametrize("mode", [0o600, 0o400], ids="{:03o}".format)
def test_a_key_file_only_its_owner_may_read_is_taken_silently(tmp_path, caplog, mode):
    with caplog.at_level(logging.WARNING, logger="mcastmember"):
        auth.HeartbeatKeys.from_file(write(tmp_path, f"1 {KEY.hex()}\n", mode=mode))
    assert caplog.records == []


def test_new_key_line_reads_back(tmp_path):
    line = auth.new_key_line(9)
    ring = auth.HeartbeatKeys.from_file(write(tmp_path, line + "\n"))
    assert ring.signing_id == 9 and len(ring.keys[9]) == 32


def _negative_body_length_with_a_trailer_after_it():
    """A datagram whose body length is -1, and at the place that length would
    put the end marker, a trailer with key id 1 (what the kernel never reads:
    there is no packet end to read it from)."""
    head = bytearray(V2[:L.BODY_START])
    head[L.OFF_BODY_LEN:L.OFF_BODY_LEN + 4] = (-1).to_bytes(4, "big", signed=True)
    head += bytes(L.BODY_START - 1 + L.MARKER_LEN - len(head))
    return bytes(head) + TRAILER


@pytest.mark.parametrize("datagram", [b"", V2[:L.OFF_BODY_LEN + 3],
                                      _negative_body_length_with_a_trailer_after_it()],
                         ids=["empty", "cut-in-body-length", "negative-body-length"])
def test_a_datagram_without_a_packet_end_has_a_bad_trailer(datagram):
    # the kernel's reading (_fast.pyx _packet_end: -1): no end, so no trailer to believe
    assert auth.check(datagram, RING) == (auth.BAD_TRAILER, 0, 0)
