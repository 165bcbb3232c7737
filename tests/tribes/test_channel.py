"""Tribes' TCP channel as a listed member speaks it (channel.py, javaser.py):
framing, acknowledgements, and the two answers, on messages made by
Tomcat's own classes (support.py). No sockets here."""

import struct

import pytest

import fuzz_channel

from mcastmember.tribes.kernel import codec as _codec
from mcastmember.tribes.wire import layout as L
from mcastmember.tribes.wire import javaser
from mcastmember.tribes.engine.channel import (ACK_FRAME, ChannelConnection, ChannelCounters, ChannelData,
                                 ChannelError, FrameReader, frame)
from mcastmember.tribes.engine.member import Member

from support import (JAVA_GET_ALL_SESSIONS, JAVA_NO_RPC_REPLY, JAVA_RPC_REQUEST,
                     JAVA_RPC_REQUEST_LONG_ID, V2, heartbeat)

UUID = bytes(range(0xa0, 0xb0))
OURS = heartbeat(port=4100)          # our membership packet, carried by our replies


def message_frame(options, message, sender=V2, unique_id=b"m" * 16, timestamp=1234):
    return frame(ChannelData(options, timestamp, unique_id, sender, message).encode())


V2_MEMBER = Member(b"\x7f\x00\x00\x01", 4000, bytes(range(16)))    # the member V2 names


def connection(accepted=(V2_MEMBER,)):
    """A connection whose listener accepts replies to ``accepted`` only."""
    counters = ChannelCounters()
    return ChannelConnection(lambda: OURS, counters, lambda m: m in accepted), counters


# -- framing ---------------------------------------------------------------------

def test_ack_frame_is_tomcats_ack_command():
    # org.apache.catalina.tribes.transport.Constants.ACK_COMMAND
    assert ACK_FRAME == b"FLT2002" + b"\x00\x00\x00\x03" + b"\x06\x02\x03" + b"TLF2003"


def test_channel_data_round_trip():
    data = ChannelData(6, -5, b"u" * 16, V2, b"hello")
    parsed = ChannelData.parse(data.encode())
    assert (parsed.options, parsed.timestamp, parsed.unique_id, parsed.sender, parsed.message,
            parsed.complete) == (6, -5, b"u" * 16, V2, b"hello", True)


@pytest.mark.parametrize("step", [1, 2, 7, 11, 64, 100000])
def test_frames_split_anywhere_come_out_whole(step):
    stream = message_frame(2, b"a") + message_frame(8, b"b" * 300) + message_frame(6, b"")
    reader = FrameReader()
    heads = []
    for i in range(0, len(stream), step):
        heads += reader.feed(stream[i:i + step])
    assert [(ChannelData.parse(h).options, ChannelData.parse(h).message, c) for h, c in heads] \
        == [(2, b"a", True), (8, b"b" * 300, True), (6, b"", True)]


def test_a_large_frame_is_skipped_past_its_head_and_still_acknowledged():
    big = message_frame(6, b"s" * 200_000)
    conn, counters = connection()
    back = b""
    for i in range(0, len(big), 65536):
        back += conn.receive(big[i:i + 65536])[0]
    assert back == ACK_FRAME
    reader = FrameReader(head_limit=1000)
    (head, complete), = reader.feed(big)
    assert len(head) == 1000 and complete is False
    assert ChannelData.parse(head, complete).options == 6
    assert counters.frames == 1


@pytest.mark.parametrize("stream", [
    b"GET / HTTP/1.1\r\n\r\n",                                   # not Tribes at all
    b"FLT2002" + struct.pack(">i", -1),                          # negative length
    b"FLT2002" + struct.pack(">i", 3) + b"abc" + b"TLF2003",     # shorter than ChannelData
    message_frame(2, b"x")[:-7] + b"XXXXXXX",                    # end marker missing
])
def test_a_stream_that_is_not_tribes_framing_ends_the_connection(stream):
    conn, counters = connection()
    with pytest.raises(ChannelError):
        conn.receive(stream)
    assert counters.malformed == 1


def test_a_field_running_past_the_frame_is_malformed():
    body = struct.pack(">iqi", 2, 0, 999) + b"short"
    conn, counters = connection()
    with pytest.raises(ChannelError):
        conn.receive(frame(body))


# -- acknowledgements --------------------------------------------------------------

@pytest.mark.parametrize("options, acked", [
    (L.SEND_OPTIONS_USE_ACK, True),                                   # ack on receipt
    (L.SEND_OPTIONS_USE_ACK | L.SEND_OPTIONS_SYNCHRONIZED_ACK, True),   # 6: after processing
    (L.SEND_OPTIONS_ASYNCHRONOUS, False),                             # 8: Tomcat's default
    (L.SEND_OPTIONS_ASYNCHRONOUS | L.SEND_OPTIONS_USE_ACK, True),
    (L.SEND_OPTIONS_BYTE_MESSAGE, False),                             # TcpFailureDetector's probe
])
def test_each_frame_is_acknowledged_exactly_as_its_options_ask(options, acked):
    conn, counters = connection()
    back, replies = conn.receive(message_frame(options, b"\x00" * 64) * 3)
    assert back == (ACK_FRAME * 3 if acked else b"")
    assert replies == []
    assert (counters.frames, counters.acks) == (3, 3 if acked else 0)


# -- answers -----------------------------------------------------------------------

def test_rpc_request_is_read_without_deserializing():
    request = javaser.rpc_request(JAVA_RPC_REQUEST)
    assert request.uuid == UUID
    assert request.rpc_id == b"map-ctx"
    assert request.rpc_message_suid == 0x712a750ff274e509


def test_no_rpc_reply_is_byte_for_byte_what_tomcat_writes():
    assert javaser.no_rpc_reply(javaser.rpc_request(JAVA_RPC_REQUEST)) == JAVA_NO_RPC_REPLY


def test_long_rpc_ids_use_long_block_data_both_ways():
    request = javaser.rpc_request(JAVA_RPC_REQUEST_LONG_ID)
    assert request.rpc_id == bytes(i % 256 for i in range(300))
    reply = javaser.no_rpc_reply(request)
    block_at = reply.index(bytes((L.TC_NULL, L.TC_BLOCKDATALONG))) + 1
    assert struct.unpack_from(">i", reply, block_at + 1)[0] == 4 + 16 + 4 + 300
    assert reply.endswith(request.rpc_id + bytes((L.TC_ENDBLOCKDATA,)))


def test_replies_and_other_objects_are_not_rpc_requests():
    assert javaser.rpc_request(JAVA_NO_RPC_REPLY) is None     # never answer an answer
    assert javaser.rpc_request(JAVA_GET_ALL_SESSIONS) is None
    assert javaser.session_state_reply(JAVA_RPC_REQUEST) is None


def test_get_all_sessions_is_answered_transfer_complete_keeping_its_timestamp():
    reply = javaser.session_state_reply(JAVA_GET_ALL_SESSIONS)
    # the only change: mEvtType 4 -> 14 (the values start after the descriptors)
    diff = [i for i, (a, b) in enumerate(zip(reply, JAVA_GET_ALL_SESSIONS)) if a != b]
    assert len(reply) == len(JAVA_GET_ALL_SESSIONS) and len(diff) == 1
    assert struct.unpack_from(">i", reply, diff[0] - 3)[0] == L.EVT_ALL_SESSION_TRANSFERCOMPLETE
    assert javaser.session_state_reply(reply) is None         # other events are not answered


def test_truncated_or_mutated_messages_never_raise():
    # An RPC request is answered once its ids are whole (the message object
    # after them, 74 0005 "hello" 78, is never read); a state request only whole.
    for vector in (JAVA_RPC_REQUEST, JAVA_RPC_REQUEST_LONG_ID):
        answered = [n for n in range(len(vector) + 1) if javaser.rpc_request(vector[:n])]
        assert answered == list(range(len(vector) - 9, len(vector) + 1))
    answered = [n for n in range(len(JAVA_GET_ALL_SESSIONS) + 1)
                if javaser.session_state_reply(JAVA_GET_ALL_SESSIONS[:n])]
    assert answered == [len(JAVA_GET_ALL_SESSIONS)]
    assert javaser.session_state_reply(JAVA_GET_ALL_SESSIONS + b"\x00") is None
    for vector in (JAVA_RPC_REQUEST, JAVA_RPC_REQUEST_LONG_ID, JAVA_GET_ALL_SESSIONS,
                   JAVA_NO_RPC_REPLY):
        for i in range(len(vector)):
            for value in (0x00, 0x7f, 0xff):
                mutated = vector[:i] + bytes((value,)) + vector[i + 1:]
                javaser.rpc_request(mutated)
                javaser.session_state_reply(mutated)


def test_an_rpc_in_a_frame_gets_a_reply_to_the_senders_receiver():
    conn, counters = connection()
    back, replies = conn.receive(message_frame(L.SEND_OPTIONS_ASYNCHRONOUS, JAVA_RPC_REQUEST))
    assert back == b""
    (reply,) = replies
    assert (reply.address, reply.port, reply.kind) == ("127.0.0.1", 4000, "rpc")   # V2's member
    (head, complete), = FrameReader().feed(reply.frame)
    sent = ChannelData.parse(head, complete)
    assert sent.options == L.SEND_OPTIONS_ASYNCHRONOUS     # no ack awaited from Tomcat
    assert sent.sender == OURS
    assert sent.message == JAVA_NO_RPC_REPLY
    assert len(sent.unique_id) == 16
    assert (counters.rpc_replies, counters.state_replies) == (0, 0)   # counted once sent


def test_a_state_request_with_acks_gets_both():
    conn, counters = connection()
    options = L.SEND_OPTIONS_USE_ACK | L.SEND_OPTIONS_SYNCHRONIZED_ACK
    back, replies = conn.receive(message_frame(options, JAVA_GET_ALL_SESSIONS))
    assert back == ACK_FRAME
    (reply,) = replies
    (head, _), = FrameReader().feed(reply.frame)
    assert ChannelData.parse(head).message == javaser.session_state_reply(JAVA_GET_ALL_SESSIONS)
    assert reply.kind == "state" and counters.state_replies == 0      # counted once sent


def test_byte_messages_and_unknown_objects_get_no_reply():
    conn, _ = connection()
    assert conn.receive(message_frame(L.SEND_OPTIONS_BYTE_MESSAGE, JAVA_RPC_REQUEST))[1] == []
    assert conn.receive(message_frame(0, L.JAVA_STREAM_MAGIC + b"\x74\x00\x01a"))[1] == []


@pytest.mark.parametrize("sender", [
    heartbeat(port=40999, host=bytes((127, 0, 0, 9))),     # names another address: a relay
    heartbeat(port=4000, uid=b"x" * 16),                   # V2's address, another member
])
def test_a_reply_to_a_sender_that_is_not_an_accepted_member_is_not_accepted(sender):
    # (the listener holds it until the sender is accepted, or drops it)
    conn, counters = connection()
    for options in (L.SEND_OPTIONS_ASYNCHRONOUS, L.SEND_OPTIONS_USE_ACK):
        back, replies = conn.receive(message_frame(options, JAVA_RPC_REQUEST, sender=sender)
                                     + message_frame(options, JAVA_GET_ALL_SESSIONS, sender=sender))
        assert [(r.kind, r.accepted, r.sender) for r in replies] \
            == [("rpc", False, _member(sender)), ("state", False, _member(sender))]
        assert back == (ACK_FRAME * 2 if options & L.SEND_OPTIONS_USE_ACK else b"")
    assert (counters.frames, counters.acks) == (4, 2)
    assert (counters.rpc_replies, counters.state_replies) == (0, 0)     # none sent


def test_without_a_membership_to_check_no_reply_is_accepted():
    conn = ChannelConnection(lambda: OURS, ChannelCounters())
    assert [r.accepted for r in conn.receive(message_frame(0, JAVA_RPC_REQUEST))[1]] == [False]


def _member(packet):
    fields = _codec.parse(packet)
    return Member(fields[4], fields[1], fields[7])


@pytest.mark.parametrize("garbage", [b"GET / HTTP/1.1\r\n\r\n", b"FLT2002" + b"\xff" * 4])
def test_the_frames_before_garbage_in_one_read_are_still_answered(garbage):
    conn, counters = connection()
    stream = (message_frame(2, b"a") + message_frame(8, JAVA_RPC_REQUEST)
              + message_frame(6, b"b") + garbage)
    with pytest.raises(ChannelError) as caught:
        conn.receive(stream)
    assert caught.value.back == ACK_FRAME * 2
    assert [r.kind for r in caught.value.replies] == ["rpc"]
    assert (counters.frames, counters.acks, counters.malformed) == (3, 2, 1)


def test_a_reply_needs_a_readable_sender():
    conn, _ = connection()
    assert conn.receive(message_frame(0, JAVA_RPC_REQUEST, sender=b"junk"))[1] == []


def test_a_short_fuzz_run_of_the_channel_parser():
    # The long run is in .ci/run (python tests/fuzz/fuzz_channel.py --count 200000).
    assert fuzz_channel.main(["--count", "3000", "--seed", "7"]) == 0
