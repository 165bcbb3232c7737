"""Push/pull without the general msgpack path: node-state encodings kept by
their fields, decodings by their bytes (messages.NodeMemo), a known node's
old news dropped before the rules. Each is checked against the general
path it replaces: the same bytes, the same decoded values or errors, the
same merge (events, counters, datagrams, random draws)."""

from hypothesis import given, settings, strategies as st

from mcastmember.gossip import GossipWireError, Limits
from mcastmember.gossip.memberlist import framing
from mcastmember.gossip.memberlist import messages
from mcastmember.gossip.memberlist import msgpack_go
from mcastmember.gossip.memberlist.engine import GossipEngine
from mcastmember.gossip.memberlist.events import JoinResult
from mcastmember.gossip.memberlist.layout import NodeState
from mcastmember.gossip.memberlist.settings import GossipSettings
from mcastmember.gossip.memberlist.state import ip_text
from mcastmember.gossip.memberlist.streams import protocol_mismatch

LIMITS = Limits()
VSN = bytes((1, 5, 2, 0, 0, 0))   # what the engine speaks
STRANGER = ("127.0.0.250", 7946)

_name = st.text(max_size=12) | st.sampled_from(["n0", "n1", "n2", "a"])
_addr = st.sampled_from([bytes((127, 0, 0, 1)), bytes((127, 0, 0, 2)), bytes(16), b"", b"\x01\x02\x03"])
_vsn = st.sampled_from([VSN, b"", bytes(6), bytes((1, 5, 5, 2, 5, 4, 9)), bytes((2, 1, 2, 0, 0, 0)),
                        bytes((1, 5, 7, 2, 5, 4))])
_fields = st.tuples(_name, _addr, st.sampled_from([0, 7946, 65535]), st.binary(max_size=20),
                    st.integers(0, 2**32 - 1) | st.integers(0, 3), st.sampled_from(list(NodeState)), _vsn)


def general_encode(join, fields, user):
    """The general encoder: a PushNodeState per node, each through msgpack."""
    return messages.encode_push_pull(messages.PushPull(join, [messages.PushNodeState(*f) for f in fields], user))


def general_decode(buf, limits=LIMITS, offset=1):
    """The general decoder, stated plainly: one msgpack reader, the header,
    each node state read and checked in turn, then the user state."""
    reader = msgpack_go.MsgpackReader(buf, limits, offset)
    header = messages.PushPullHeader.read(reader)
    if header.nodes > limits.max_push_nodes:
        raise GossipWireError("too_many", f"push/pull announces {header.nodes} nodes, over {limits.max_push_nodes}")
    if header.user_state_len > limits.max_user_state:
        raise GossipWireError("too_large", f"push/pull user state of {header.user_state_len} bytes is over the limit")
    nodes = [messages.PushNodeState.read(reader) for _ in range(header.nodes)]
    pos = reader.offset
    end = pos + header.user_state_len
    if end > len(buf):
        raise messages.Truncated(f"push/pull user state cut short ({len(buf) - pos} of {header.user_state_len} bytes)")
    return messages.PushPull(join=header.join, nodes=nodes, user_state=bytes(buf[pos:end])), end


def outcome(decode, buf):
    try:
        return ("ok", decode(buf))
    except GossipWireError as exc:
        return (type(exc).__name__, exc.reason, str(exc))


# ------------------------------------------------------------------ encoding


@settings(max_examples=150, deadline=None)
@given(st.lists(_fields, max_size=6), st.lists(st.tuples(st.integers(0, 5), st.integers(0, 6), _fields), max_size=8),
       st.booleans(), st.binary(max_size=8))
def test_encoding_from_kept_pieces_is_the_general_encoders(table, changes, join, user):
    # A table, then field after field changed (any field: incarnation, meta,
    # state, a new node under an old name...), encoded after each change:
    # the memo persists across all of it (and across examples).
    table = list(table)
    assert messages.encode_push_pull_fields(join, table, user) == general_encode(join, table, user)
    for index, field, new in changes:
        if not table:
            break
        row = list(table[index % len(table)])
        row[field] = new[field]
        table[index % len(table)] = tuple(row)
        assert messages.encode_push_pull_fields(join, table, user) == general_encode(join, table, user)
        assert messages.encode_push_pull_fields(join, table, user) == general_encode(join, table, user)


def test_an_unhashable_meta_is_encoded_not_kept():
    fields = ("n0", bytes(4), 1, bytearray(b"meta"), 1, NodeState.ALIVE, VSN)
    before = len(messages.ENCODED)
    assert messages.encode_push_pull_fields(False, [fields], b"") == general_encode(False, [fields], b"")
    assert len(messages.ENCODED) == before


# ------------------------------------------------------------------ decoding


@settings(max_examples=150, deadline=None)
@given(st.lists(_fields, max_size=6), st.booleans(), st.binary(max_size=8),
       st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=3), st.integers(0, 10**6))
def test_decoding_with_kept_pieces_is_the_general_decoders(table, join, user, flips, cut):
    # Only well-formed fields (the decoder refuses a short Vsn, which the
    # encoder writes): bad ones come from the flipped and cut bytes below.
    table = [f for f in table if len(f[6]) in (0, 6) or len(f[6]) > 6]
    buf = general_encode(join, table, user)
    for attempt in range(2):      # the second time from the memo
        assert messages.decode_push_pull(buf, LIMITS, 1) == general_decode(buf)
    bad = bytearray(buf)
    for where, value in flips:
        bad[where % len(bad)] = value
    for mangled in (bytes(bad), buf[:cut % (len(buf) + 1)], bytes(bad)[:cut % (len(buf) + 1)]):
        for attempt in range(2):
            assert outcome(lambda b: messages.decode_push_pull(b, LIMITS, 1), mangled) == outcome(general_decode,
                                                                                                    mangled)


def test_a_deep_or_oversized_node_state_is_refused_as_before():
    deep = b"\x81\xa4Name" + b"\x91" * 10 + b"\x00"
    head = messages.encode_push_pull(messages.PushPull(False, [messages.PushNodeState()], b""))
    first = messages.PushNodeState().encode_body()
    buf = head.replace(first, deep, 1)
    expected = outcome(general_decode, buf)
    assert expected[0] == "GossipWireError" and expected[1] == "too_deep"
    assert outcome(lambda b: messages.decode_push_pull(b, LIMITS, 1), buf) == expected
    small = Limits(max_string=3)
    named = general_encode(False, [("long-name", bytes(4), 1, b"", 1, NodeState.ALIVE, VSN)], b"")
    messages.decode_push_pull(named, LIMITS, 1)      # now kept: the limits still apply
    assert outcome(lambda b: messages.decode_push_pull(b, small, 1), named) == outcome(
        lambda b: general_decode(b, small), named)


# ------------------------------------------------------------------ the memo


def test_memo_is_bounded_in_entries_and_bytes_least_recently_used_first():
    memo = messages.NodeMemo(entries=3, max_bytes=100, max_one=60)
    for key in "abc":
        memo.put(key, key.upper(), 10)
    assert memo.get("a") == "A"                       # a used: b is now the oldest
    memo.put("d", "D", 10)
    assert (len(memo), memo.evicted, memo.get("b")) == (3, 1, None)
    memo.put("big", "BIG", 61)                        # over max_one: never kept
    assert memo.get("big") is None
    memo.put("e", "E", 60)                            # 10 + 10 + 10 + 60 > 100
    assert (len(memo), memo.bytes, memo.evicted) == (3, 80, 2)
    assert memo.get_many(["c", "a", [1]]) == [None, "A", None]      # an unhashable key: not kept


def test_a_state_remembered_under_one_engines_limits_is_checked_under_anothers():
    # Two engines of one process may have different Limits: a node state
    # decoded within lax limits must still be refused by stricter ones, as
    # the general decoder refuses it.
    state = messages.PushNodeState(name="n1", addr=bytes((127, 0, 0, 2)), port=7946, meta=b"m" * 300,
                                   incarnation=1, state=NodeState.ALIVE, vsn=VSN)
    buf = messages.encode_push_pull(messages.PushPull(False, [state], b""))
    assert messages.decode_push_pull(buf, LIMITS, 1)[0].nodes == [state]
    for strict in (Limits(max_string=100), Limits(max_container=4), Limits(max_nesting=0)):
        expected = outcome(lambda b: general_decode(b, strict), buf)
        assert expected[0] == "GossipWireError"
        assert outcome(lambda b: messages.decode_push_pull(b, strict, 1), buf) == expected


def test_the_process_memos_are_bounded():
    for memo in (messages.ENCODED, messages.DECODED):
        assert (memo.entries, memo.max_bytes, memo.max_one) == (32_768, 4 << 20, 2048)


# ------------------------------------------------------------------ the engine


def _engine(name="a", seed=1):
    engine = GossipEngine(GossipSettings(name=name, advertise_addr="127.0.0.1", advertise_port=7946), seed=seed)
    engine.start(0.0)
    return engine


def _push(engine, states, now, join=False):
    """``states`` pushed to ``engine`` as a peer's push/pull; its reply."""
    wire = framing.encode_stream(messages.encode_push_pull(messages.PushPull(join, states, b"")), compress=True)
    return engine.receive_stream(wire, STRANGER, now)


def _state(name, addr, inc, state=NodeState.ALIVE, meta=b""):
    return messages.PushNodeState(name=name, addr=bytes(addr), port=7946, meta=meta, incarnation=inc,
                                  state=state, vsn=VSN)


def _assert_reply_is_general(engine, reply):
    """The reply is the general encoder's bytes for the table the engine reports."""
    (_kind, got), _used = framing.decode_stream(reply, LIMITS)
    assert reply == framing.encode_stream(messages.encode_push_pull(got), compress=True)
    for n in got.nodes:
        info = engine.node(n.name)
        assert (info.name, info.addr, info.port, info.meta, info.incarnation, info.state, info.vsn) == (
            n.name, ip_text(n.addr), n.port, n.meta, n.incarnation, n.state, n.vsn)
    assert len(got.nodes) == engine.stats()["nodes"]
    return {n.name: n for n in got.nodes}


def test_push_pull_after_changes_sends_what_the_general_encoder_writes():
    # Invalidation: any field of a node may change while its name stays, and
    # a node that left may come back under its name at another address with
    # the same incarnation. Keyed by less than every field (say the name
    # and incarnation), the reply would repeat a stale state.
    a = _engine()
    now = 1.0
    _push(a, [_state("x", (127, 0, 0, 5), 1), _state("y", (127, 0, 0, 6), 1)], now)   # (the reply comes first)
    for _again in range(2):                         # the second time from kept pieces
        sent = _assert_reply_is_general(a, _push(a, [], now))
        assert {n: s.incarnation for n, s in sent.items()} == {"a": 1, "x": 1, "y": 1}
    steps = [
        [_state("x", (127, 0, 0, 5), 2, meta=b"new")],                 # incarnation and meta
        [_state("y", (127, 0, 0, 6), 1, NodeState.SUSPECT)],            # state (suspected here)
        [_state("x", (127, 0, 0, 5), 2, NodeState.LEFT)],               # x leaves...
        [_state("x", (127, 0, 0, 9), 2, meta=b"new")],                  # ...and x comes back elsewhere
    ]
    seen = []
    for states in steps:
        now += 1.0
        _push(a, states, now)
        got = _assert_reply_is_general(a, _push(a, [], now))
        seen.append({n: (s.addr[-1], s.incarnation, s.state, s.meta) for n, s in got.items() if n != "a"})
    assert seen == [
        {"x": (5, 2, NodeState.ALIVE, b"new"), "y": (6, 1, NodeState.ALIVE, b"")},
        {"x": (5, 2, NodeState.ALIVE, b"new"), "y": (6, 1, NodeState.SUSPECT, b"")},
        {"x": (5, 2, NodeState.LEFT, b"new"), "y": (6, 1, NodeState.SUSPECT, b"")},
        {"x": (9, 2, NodeState.ALIVE, b"new"), "y": (6, 1, NodeState.SUSPECT, b"")},
    ]


def _observed(engine):
    return (engine.events(), engine.stats(), engine.outgoing(0.0), engine.members(),
            engine.rng.getstate(), len(engine.broadcasts))


_remote = st.tuples(st.sampled_from(["a", "x", "y", "z", "new"]), st.sampled_from([5, 6, 9]),
                    st.sampled_from([0, 7946, 7000]), st.sampled_from([b"", b"m"]), st.integers(0, 4),
                    st.sampled_from(list(NodeState)),
                    st.sampled_from([VSN] * 20 + [b""]))    # (one node out of range refuses all)


@settings(max_examples=100, deadline=None)
@given(st.lists(_remote, max_size=8), st.lists(_remote, max_size=8))
def test_merge_drops_only_what_the_rules_would_ignore(first, second):
    # The rule before: every alive of a push/pull went to the alive rules
    # (there it is forced: the hot path's "ignored unread" check says no to
    # everything). Both engines see the same pushes and must do the same.
    def states(rows):
        return [messages.PushNodeState(name=n, addr=bytes((127, 0, 0, a)), port=p, meta=m, incarnation=i,
                                       state=s, vsn=v) for n, a, p, m, i, s, v in rows]
    fast, plain = _engine(), _engine()
    plain.rules.alive_ignored = lambda *fields: False
    for rows, now in ((first, 1.0), (second, 2.0), (second, 3.0)):
        replies = [_push(engine, states(rows), now) for engine in (fast, plain)]
        assert replies[0] == replies[1]
        assert _observed(fast) == _observed(plain)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(list(NodeState)),
                          st.sampled_from([VSN, b"", bytes((1, 5, 7, 2, 5, 4)), bytes((3, 5, 4, 2, 5, 4)),
                                           bytes((1, 2, 2, 2, 5, 6)), bytes((1, 5, 5, 3, 3, 3))])),
                max_size=5))
def test_protocol_check_names_the_first_node_out_of_range(rows):
    # The rule: the versions every alive node with a Vsn understands (ours
    # too), and the first node, theirs then ours, outside them.
    a = _engine()
    remote = [messages.PushNodeState(name=f"r{i}", addr=bytes((127, 0, 0, 9)), port=7946, incarnation=1, state=s,
                                     vsn=v) for i, (s, v) in enumerate(rows)]
    ranges = [r.vsn for r in remote if r.state == NodeState.ALIVE and r.vsn] + [a.settings.vsn()]
    expected = protocol_mismatch(ranges, [(r.name, r.vsn) for r in remote] + [("a", a.settings.vsn())])
    assert a.join([STRANGER], 1.0) == 1
    stream = a.streams_to_open(1.0)[0]
    reply = framing.encode_stream(messages.encode_push_pull(messages.PushPull(True, remote, b"")), compress=True)
    assert a.stream_response(stream.id, reply, 1.0) is True
    results = [e for e in a.events() if isinstance(e, JoinResult)]
    assert results == [JoinResult(STRANGER, not expected, expected)]


def test_a_large_table_pushed_again_changes_nothing():
    a, b = _engine("a"), _engine("b", seed=2)
    table = [_state(f"m{i}", (10, 0, i >> 8, i & 255), 1) for i in range(3000)]
    _push(a, table + [_state("b", (127, 0, 0, 1), 1)], 1.0)
    _push(b, table + [_state("a", (127, 0, 0, 1), 1)], 1.0)
    a.events()
    for now in (2.0, 3.0):        # b's whole table, the second time from the memos
        (_kind, got), _used = framing.decode_stream(_push(b, [], now), LIMITS)
        assert got == general_decode(messages.encode_push_pull(got))[0]
        stats = a.stats()
        _push(a, got.nodes, now)
        assert a.events() == [] and a.outgoing(now) == []
        assert {k: (stats[k], v) for k, v in a.stats().items() if v != stats[k]} == {
            "streams_received": (stats["streams_received"], stats["streams_received"] + 1)}
        _assert_reply_is_general(a, _push(a, [], now))
