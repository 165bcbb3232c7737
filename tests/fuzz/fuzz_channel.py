#!/usr/bin/env python3
"""Fuzz what the TCP listener for Tomcat parses: Tribes framing, ChannelData
and the Java-serialized messages it answers (channel.py, javaser.py).

    python tests/fuzz/fuzz_channel.py --count 200000 [--seed 1]

Each case is a stream of frames (well formed, mutated, or random bytes)
around messages made by Tomcat's own classes (support.py) and mutations of
them, fed in random pieces to one connection. Checked for every case: only
ChannelError escapes (the listener then closes the connection); a stream of
well-formed frames gets exactly one ack per frame asking for one and the
replies its messages call for, and the same answers when garbage follows
them in the stream (then with the ChannelError); replies go to the one
accepted member only (one to any other sender comes not accepted: the
listener holds it and drops it); what the
reader keeps stays within its bound; every reply is a well-formed frame
whose message Tomcat's own answer would be. The first failing case stops the
run with its seed and number.
"""

import argparse
import pathlib
import random
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from mcastmember.tribes.wire import layout as L  # noqa: E402
from mcastmember.tribes.wire import javaser  # noqa: E402
from mcastmember.tribes.engine.channel import (ACK_FRAME, FRAME_HEAD_LIMIT, ChannelConnection,  # noqa: E402
                                 ChannelCounters, ChannelData, ChannelError, FrameReader, frame)
from mcastmember.tribes.engine.member import Member       # noqa: E402

from fuzz_receive import mutate  # noqa: E402  (the same mutations as the datagram fuzzer)
from support import (JAVA_GET_ALL_SESSIONS, JAVA_NO_RPC_REPLY, JAVA_RPC_REQUEST,  # noqa: E402
                     JAVA_RPC_REQUEST_LONG_ID, V2, heartbeat)

MESSAGES = [JAVA_RPC_REQUEST, JAVA_RPC_REQUEST_LONG_ID, JAVA_GET_ALL_SESSIONS, JAVA_NO_RPC_REPLY,
            b"", b"\x00" * 64, L.JAVA_STREAM_MAGIC]
OPTIONS = [0, 1, 2, 4, 6, 8, 10, 14, -1, 2**31 - 1]
OURS = heartbeat(port=4100)
ACCEPTED = Member(b"\x7f\x00\x00\x01", 4000, bytes(range(16)))    # V2's member, the only one
STRANGER = heartbeat(port=4000, uid=b"s" * 16)                     # V2's address, not a member


def well_formed(rng):
    """(frame, asks for an ack, expected answer kind or None)."""
    options = rng.choice(OPTIONS)
    message = rng.choice(MESSAGES)
    if rng.random() < 0.05:
        message = rng.randbytes(rng.choice([100, 70000]))
    sender = rng.choice([V2, V2, STRANGER, b"", rng.randbytes(20)])
    data = ChannelData(options, rng.randrange(-2**63, 2**63), rng.randbytes(16), sender, message)
    expected = None           # or (kind, accepted)
    if not options & L.SEND_OPTIONS_BYTE_MESSAGE and sender in (V2, STRANGER):
        if message in (JAVA_RPC_REQUEST, JAVA_RPC_REQUEST_LONG_ID):
            expected = ("rpc", sender == V2)
        elif message == JAVA_GET_ALL_SESSIONS:
            expected = ("state", sender == V2)
    return frame(data.encode()), bool(options & L.SEND_OPTIONS_USE_ACK), expected


def feed(conn, stream, rng):
    back, replies = b"", []
    at = 0
    while at < len(stream):
        step = rng.choice([1, 3, 11, 64, 4096, len(stream)])
        try:
            more, new = conn.receive(stream[at:at + step])
        except ChannelError as error:      # the answers before the bad bytes come with it
            error.back, error.replies = back + error.back, replies + error.replies
            raise
        back += more
        replies += new
        at += step
        assert len(conn._reader._buf) <= FRAME_HEAD_LIMIT + L.CHANNEL_HEADER_LEN
    return back, replies


def check_reply(reply):
    assert reply.accepted == (reply.sender == ACCEPTED)
    assert (reply.address, reply.port) == (reply.sender.address, reply.sender.port)
    (head, complete), = FrameReader().feed(reply.frame)
    sent = ChannelData.parse(head, complete)
    assert sent.sender == OURS and sent.options == L.SEND_OPTIONS_ASYNCHRONOUS
    if reply.kind == "rpc":
        request = javaser.rpc_request(sent.message)
        assert request is None       # what we send is a reply, never a request
    else:
        assert javaser.session_state_reply(sent.message) is None


def one_case(rng):
    kind = rng.randrange(3)
    conn = ChannelConnection(lambda: OURS, ChannelCounters(), lambda m: m == ACCEPTED)
    if kind == 0:                                    # well-formed frames, maybe then garbage
        frames = [well_formed(rng) for _ in range(rng.randint(1, 5))]
        stream = b"".join(f for f, _, _ in frames)
        garbage = rng.random() < 0.3
        try:
            back, replies = feed(conn, stream + (b"GET / HTTP/1.1\r\n" if garbage else b""),
                                 rng)
            assert not garbage
        except ChannelError as error:
            assert garbage
            back, replies = error.back, error.replies
        assert back == ACK_FRAME * sum(acked for _, acked, _ in frames)
        assert [(r.kind, r.accepted) for r in replies] == [e for _, _, e in frames if e]
        for reply in replies:
            check_reply(reply)
        return stream
    if kind == 1:                                    # a mutated frame, message or sender
        if rng.random() < 0.5:
            stream = mutate(rng, well_formed(rng)[0])
        else:     # the sender's membership packet goes through the codec's parser
            message = rng.choice(MESSAGES[:3])
            stream = frame(ChannelData(0, 0, bytes(16), mutate(rng, V2), message).encode())
    else:                                            # random bytes, maybe after a good start
        stream = rng.randbytes(rng.randrange(200))
        if rng.random() < 0.5:
            stream = L.CHANNEL_START + stream
    try:
        _, replies = feed(conn, stream, rng)
        for reply in replies:
            check_reply(reply)
    except ChannelError:
        pass
    return stream


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100000)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    rng = random.Random(seed)
    start = time.monotonic()
    for i in range(args.count):
        try:
            one_case(rng)
        except Exception as error:                   # anything but ChannelError is a bug
            print(f"case {i} (seed {seed}) failed: {error!r}; replay with --seed {seed}",
                  file=sys.stderr)
            raise
    print(f"{args.count} channel streams (seed {seed}) in {time.monotonic() - start:.1f} s: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
