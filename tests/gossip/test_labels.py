"""Labels on TCP streams as memberlist >= 0.3 speaks them: only the side that
dials a stream writes the label header (244, length, label), once, at its
start; the reply on that connection carries none, the label staying in the
associated data of an encrypted message. Checked against the bytes
memberlist v0.5.0 wrote (tests/interop/memberlist_go/vectors.json), on the
engine's own bytes, and between two members on each front. A reply that
carries the matching header (an older mcastmember) is still read; a
mismatched one is refused."""

import asyncio
import json
from pathlib import Path

import pytest

from mcastmember.gossip.memberlist import crypto, framing, messages
from mcastmember.gossip.memberlist.engine import GossipEngine
from mcastmember.gossip.memberlist.errors import GossipWireError
from mcastmember.gossip.memberlist.events import JoinResult
from mcastmember.gossip.memberlist import label as label_mod
from mcastmember.gossip.memberlist.label import add_label
from mcastmember.gossip.memberlist.layout import MessageType, NodeState
from mcastmember.gossip.memberlist.limits import Limits
from mcastmember.gossip.memberlist.settings import GossipSettings

LIMITS = Limits()
LABEL = b"dc1"
HEADER = bytes((MessageType.HAS_LABEL, len(LABEL))) + LABEL
KEY = b"0123456789abcdef"
VECTORS = json.loads((Path(__file__).resolve().parents[1] / "interop" / "memberlist_go" / "vectors.json").read_text())
CASES = {case["name"]: case for case in VECTORS["cases"]}
GO_PEER = ("127.0.0.9", 7946)


def _keys(case):
    return (bytes.fromhex(case["key"]),) if case["key"] else ()


def _keyring(case):
    return crypto.Keyring(_keys(case)) if case["key"] else None


def _nonce(stream):
    """The nonce of an encrypted stream message (type, length, version, then the nonce)."""
    start = stream.index(bytes((MessageType.ENCRYPT,)))
    return stream[start + 6:start + 18]


# ------------------------------------------------- memberlist v0.5.0's own bytes


def test_the_go_vectors_are_memberlist_0_3_or_later_with_label_dc1():
    assert VECTORS["label"] == "dc1"
    assert sorted(CASES) == ["compressed", "encrypted", "plain"]
    for case in CASES.values():
        assert bytes.fromhex(case["join_dialer"]).startswith(HEADER)
        assert bytes.fromhex(case["user_dialer"]).startswith(HEADER)
        assert bytes.fromhex(case["join_reply"])[0] == {"plain": MessageType.PUSH_PULL, "compressed":
                                                         MessageType.COMPRESS, "encrypted": MessageType.ENCRYPT}[
                                                             case["name"]]


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_go_dialers_streams_are_read_and_written_the_same(name):
    case = CASES[name]
    dialer, user = bytes.fromhex(case["join_dialer"]), bytes.fromhex(case["user_dialer"])
    (kind, state), used = framing.decode_stream(dialer, LIMITS, keys=_keys(case), label=LABEL)
    assert (kind, used, state.join, [(n.name, n.state, n.incarnation) for n in state.nodes], state.user_state) == (
        MessageType.PUSH_PULL, len(dialer), True, [("go-dialer", NodeState.ALIVE, 1)], b"")
    again = framing.encode_stream(messages.encode_push_pull(state), compress=case["compression"],
                                  keyring=_keyring(case), label=LABEL, header=True,
                                  nonce=_nonce(dialer) if case["key"] else None)
    assert again == dialer
    assert framing.decode_stream(user, LIMITS, keys=_keys(case), label=LABEL) == (
        (MessageType.USER, case["user_payload"].encode()), len(user))
    again = framing.encode_stream(messages.encode_user_stream(case["user_payload"].encode()),
                                  compress=case["compression"], keyring=_keyring(case), label=LABEL,
                                  nonce=_nonce(user) if case["key"] else None)
    assert again == user


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_go_listeners_reply_has_no_header_and_is_read_and_written_the_same(name):
    case = CASES[name]
    reply = bytes.fromhex(case["join_reply"])
    (kind, state), used = framing.decode_stream(reply, LIMITS, keys=_keys(case), label=LABEL, reply=True)
    assert (kind, used, state.join, [(n.name, n.state) for n in state.nodes]) == (
        MessageType.PUSH_PULL, len(reply), True, [("go-listener", NodeState.ALIVE)])
    again = framing.encode_stream(messages.encode_push_pull(state), compress=case["compression"],
                                  keyring=_keyring(case), label=LABEL, header=False,
                                  nonce=_nonce(reply) if case["key"] else None)
    assert again == reply


def test_a_stream_someone_opens_without_the_label_header_is_refused():
    reply = bytes.fromhex(CASES["plain"]["join_reply"])
    with pytest.raises(GossipWireError, match="stream label b'' is not the expected b'dc1'"):
        framing.decode_stream(reply, LIMITS, label=LABEL)


def test_the_label_is_the_associated_data_of_an_encrypted_reply():
    reply = bytes.fromhex(CASES["encrypted"]["join_reply"])
    with pytest.raises(GossipWireError) as refused:
        framing.decode_stream(reply, LIMITS, keys=(KEY,), label=b"dc2", reply=True)
    assert refused.value.reason == "no_key"


def test_a_reply_with_the_matching_header_is_read_and_a_mismatched_one_refused():
    """An older mcastmember put the header on its replies: read on a rolling
    upgrade; a header with another label is refused."""
    for name in ("plain", "encrypted"):
        case = CASES[name]
        reply = bytes.fromhex(case["join_reply"])
        (kind, state), used = framing.decode_stream(HEADER + reply, LIMITS, keys=_keys(case), label=LABEL,
                                                    reply=True)
        assert (kind, [n.name for n in state.nodes], used) == (MessageType.PUSH_PULL, ["go-listener"],
                                                               len(HEADER) + len(reply))
        with pytest.raises(GossipWireError, match="stream label b'dc2' is not the expected b'dc1'"):
            framing.decode_stream(add_label(reply, b"dc2"), LIMITS, keys=_keys(case), label=LABEL, reply=True)


# ----------------------------------------------------------- the engine's bytes


def _engine(keyed, name="a", compression=True):
    settings = GossipSettings(name=name, advertise_addr="127.0.0.1", advertise_port=7946, label=LABEL,
                              keys=(KEY,) if keyed else (), enable_compression=compression,
                              delegate_protocol_min=2, delegate_protocol_max=5, delegate_protocol_version=4)
    engine = GossipEngine(settings, seed=1)
    engine.start(0.0)
    return engine


def _own_state(engine, join):
    me = engine.node(engine.name)
    node = messages.PushNodeState(name=me.name, addr=bytes((127, 0, 0, 1)), port=me.port, meta=me.meta,
                                  incarnation=me.incarnation, state=me.state, vsn=me.vsn)
    return messages.encode_push_pull(messages.PushPull(join=join, nodes=[node], user_state=b""))


def _sealed(engine, msg, nonce, compression=True):
    """``msg`` as a reply carries it: compressed, encrypted with the label in the associated data, no header."""
    plain = framing.compress_message(msg) if compression else msg
    return crypto.encrypt_stream(engine.settings.encryption_version, KEY, plain, LABEL, nonce)


@pytest.mark.parametrize("keyed", [False, True], ids=["plain", "encrypted"])
def test_the_engines_push_pull_reply_to_a_go_dialer_carries_no_header(keyed):
    case = CASES["encrypted" if keyed else "compressed"]
    engine = _engine(keyed)
    reply = engine.receive_stream(bytes.fromhex(case["join_dialer"]), GO_PEER, 1.0)
    assert reply[0] == (MessageType.ENCRYPT if keyed else MessageType.COMPRESS)
    expected = _own_state(engine, join=True)
    if keyed:
        assert reply == _sealed(engine, expected, _nonce(reply))
    else:
        assert reply == framing.compress_message(expected)
    assert sorted((m.name, m.state) for m in engine.members()) == [("a", NodeState.ALIVE),
                                                                  ("go-dialer", NodeState.ALIVE)]


@pytest.mark.parametrize("keyed", [False, True], ids=["plain", "encrypted"])
def test_the_engines_own_streams_start_with_the_header_once(keyed):
    engine = _engine(keyed)
    assert engine.join([GO_PEER], 0.0) == 1
    [stream] = engine.streams_to_open(0.0)
    assert stream.data.startswith(HEADER)
    body = stream.data[len(HEADER):]
    if keyed:
        assert body == _sealed(engine, _own_state(engine, join=True), _nonce(body))
    else:
        assert body == framing.compress_message(_own_state(engine, join=True))


@pytest.mark.parametrize("keyed", [False, True], ids=["plain", "encrypted"])
def test_the_engine_joins_a_go_listener_whose_reply_has_no_header(keyed):
    case = CASES["encrypted" if keyed else "compressed"]
    engine = _engine(keyed)
    engine.join([GO_PEER], 0.0)
    [stream] = engine.streams_to_open(0.0)
    assert engine.stream_response(stream.id, bytes.fromhex(case["join_reply"]), 0.1) is True
    assert [e for e in engine.events() if isinstance(e, JoinResult)] == [JoinResult(GO_PEER, True)]
    assert sorted((m.name, m.state) for m in engine.members()) == [("a", NodeState.ALIVE),
                                                             ("go-listener", NodeState.ALIVE)]


@pytest.mark.parametrize("label, ok", [(LABEL, True), (b"dc2", False)], ids=["matching", "mismatched"])
def test_the_engine_reads_a_reply_with_a_matching_header_and_refuses_another(label, ok):
    engine = _engine(False)
    engine.join([GO_PEER], 0.0)
    [stream] = engine.streams_to_open(0.0)
    assert engine.stream_response(stream.id, add_label(bytes.fromhex(CASES["compressed"]["join_reply"]), label),
                                  0.1) is True
    [result] = [e for e in engine.events() if isinstance(e, JoinResult)]
    assert (result.addr, result.ok) == (GO_PEER, ok)
    assert len(engine.members()) == (2 if ok else 1)


@pytest.mark.parametrize("keyed", [False, True], ids=["plain", "encrypted"])
def test_the_engines_tcp_ping_carries_the_header_and_its_ack_none(keyed):
    engine = _engine(keyed, compression=False)
    ping = messages.encode(messages.Ping(seq_no=7, node="a"))
    keyring = crypto.Keyring((KEY,)) if keyed else None
    reply = engine.receive_stream(framing.encode_stream(ping, keyring=keyring, label=LABEL), GO_PEER, 1.0)
    ack = messages.encode(messages.Ack(seq_no=7))
    if keyed:
        assert reply == _sealed(engine, ack, _nonce(reply), compression=False)
    else:
        assert reply == ack


def test_the_engines_refusal_of_a_stream_with_another_label_carries_no_header():
    engine = _engine(False, compression=False)
    reply = engine.receive_stream(add_label(messages.encode(messages.Ping(seq_no=7, node="a")), b"dc2"), GO_PEER, 1.0)
    assert reply == messages.encode(messages.Err(error="stream label b'dc2' is not the expected b'dc1'"))


# --------------------------------------------------------- two members, both fronts


FAST = {"label": LABEL, "push_pull_interval": 0.2, "probe_interval": 0.1, "probe_timeout": 0.05,
        "gossip_interval": 0.05}


def _view(svc):
    return {m.name: m.status.name.lower() for m in svc.members()}


def _both_alive(a, b):
    return _view(a) == _view(b) == {"a": "alive", "b": "alive"}


@pytest.mark.parametrize("keyed", [False, True], ids=["plain", "encrypted"])
def test_two_labelled_members_on_threads_join_both_ways_and_stay_alive(keyed):
    pytest.importorskip("msgpack")
    from mcastmember.gossip.fronts.service import SerfService
    from support import free_gossip_port, wait_until

    options = dict(FAST, keys=(KEY,) if keyed else ())
    pa, pb = free_gossip_port("127.0.0.1"), free_gossip_port("127.0.0.2")
    with SerfService("a", "127.0.0.1", pa, **options) as a, SerfService("b", "127.0.0.2", pb, **options) as b:
        assert (a.join([("127.0.0.2", pb)]).joined, b.join([("127.0.0.1", pa)]).joined) == (1, 1)
        wait_until(lambda: _both_alive(a, b))
        # several push/pulls each way since (each a stream whose reply carries no header)
        pushes = (a.stats()["push_pulls"], b.stats()["push_pulls"])
        wait_until(lambda: a.stats()["push_pulls"] >= pushes[0] + 3 and b.stats()["push_pulls"] >= pushes[1] + 3)
        assert _both_alive(a, b)
        assert [s.stats()["bad_input"] for s in (a, b)] == [0, 0]


@pytest.mark.parametrize("keyed", [False, True], ids=["plain", "encrypted"])
def test_two_labelled_members_on_asyncio_join_both_ways_and_stay_alive(keyed):
    pytest.importorskip("msgpack")
    from mcastmember.gossip.fronts.aio import AsyncSerfService
    from support import async_wait_until, free_gossip_port

    options = dict(FAST, keys=(KEY,) if keyed else ())
    pa, pb = free_gossip_port("127.0.0.1"), free_gossip_port("127.0.0.2")

    async def main():
        async with AsyncSerfService("a", "127.0.0.1", pa, **options) as a, \
                AsyncSerfService("b", "127.0.0.2", pb, **options) as b:
            joined = ((await a.join([("127.0.0.2", pb)])).joined, (await b.join([("127.0.0.1", pa)])).joined)
            assert joined == (1, 1)
            await async_wait_until(lambda: _both_alive(a, b))
            pushes = (a.stats()["push_pulls"], b.stats()["push_pulls"])
            await async_wait_until(lambda: a.stats()["push_pulls"] >= pushes[0] + 3
                                   and b.stats()["push_pulls"] >= pushes[1] + 3)
            assert _both_alive(a, b)
            assert [s.stats()["bad_input"] for s in (a, b)] == [0, 0]
    asyncio.run(asyncio.wait_for(main(), 30))


@pytest.mark.parametrize("got, expected", [(b"", b"dc1"), (b"green", b"blue"), (b"a'b", b'x"y\\z\x00\xff')])
def test_a_label_refusal_names_the_label_expected_in_words_a_prober_reads_back(got, expected):
    assert label_mod.expected_in(label_mod.stream_refusal(got, expected)) == expected
    assert label_mod.expected_in("remote state is encrypted and encryption is not configured") is None
