"""Serf's layer (mcastmember.gossip.serf) against Serf 0.9.4's own Go code
(tests/interop/gossip_vectors/serf_vectors.json, see serf_gen.go): bytes both ways,
and the same decisions as Serf's handlers for the same inputs. Pure Python:
one implementation, no network."""

import base64
import dataclasses
import json
import pathlib

import pytest
from hypothesis import given, settings, strategies as st

from mcastmember._runtime.errors import ConfigurationError
from mcastmember.gossip import GossipWireError, Truncated
from mcastmember.gossip.memberlist.crypto import Keyring
from mcastmember.gossip.serf import LamportClock, MemberStatus, SerfLimits, SerfMessageType, decode_tags, encode_tags
from mcastmember.gossip.serf import messages as m
from mcastmember.gossip.serf.layout import (QUERY_CONFLICT, QUERY_INSTALL_KEY, QUERY_LIST_KEYS, QUERY_PING,
                                            QUERY_REMOVE_KEY, QUERY_USE_KEY)
from mcastmember.gossip.serf.queries import (QueryTracker, answer_internal_query, default_query_timeout, make_ack,
                                             make_response, new_query)
from mcastmember.gossip.serf.buffers import UserEventBuffer, IntentBuffer, QueryBuffer, should_process_query
from mcastmember.gossip.serf.members import SerfCore, SerfMembers

VECTORS = json.loads((pathlib.Path(__file__).resolve().parents[1] / "interop" / "gossip_vectors" / "serf_vectors.json").read_text())
LIMITS = SerfLimits()


def _vector(name):
    return next(v for v in VECTORS["messages"] if v["name"] == name)


def _norm(value):
    """Go's encoding/json view, with nil and empty made the same (the bytes
    tests check which one Go sends)."""
    if dataclasses.is_dataclass(value):
        return {go: _norm(getattr(value, attr)) for go, attr, _kind in value.FIELDS}
    if isinstance(value, bytes):
        return base64.b64encode(value).decode() if value else None
    if isinstance(value, list):
        return [_norm(v) for v in value] or None
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items()} or None
    return value


def _norm_go(value):
    if isinstance(value, list):
        return [_norm_go(v) for v in value] or None
    if isinstance(value, dict):
        return {k: _norm_go(v) for k, v in value.items()} or None
    return value


# ------------------------------------------------------------------ tags


@pytest.mark.parametrize("vector", VECTORS["tags"], ids=lambda v: v["name"])
def test_tags_vectors(vector):
    wire = bytes.fromhex(vector["wire"])
    tags = vector["tags"] or {}
    if vector["protocol"] < 3:
        assert decode_tags(wire) == {"role": tags["role"]}
    else:
        assert decode_tags(wire) == tags
    if vector["exact"]:
        assert encode_tags(tags, vector["protocol"]) == wire
    else:
        # Go's map order is random: ours is sorted, and Go reads it (tag_decodes)
        assert decode_tags(encode_tags(tags)) == tags
        assert sorted(encode_tags(tags)) == sorted(wire)


@pytest.mark.parametrize("vector", VECTORS["tag_decodes"], ids=lambda v: v["name"])
def test_tags_as_go_decodes_them(vector):
    assert decode_tags(bytes.fromhex(vector["meta"])) == (vector["tags"] or {})


def test_tags_go_out_sorted_and_go_reads_them():
    sorted_meta = next(v["meta"] for v in VECTORS["tag_decodes"] if v["name"] == "decode-sorted")
    assert encode_tags({"role": "web", "rack": "r1", "dc": "east"}).hex() == sorted_meta


def test_tags_over_the_meta_limit_are_refused_clearly():
    tags = {f"k{i}": "v" * 10 for i in range(40)}
    with pytest.raises(ConfigurationError, match=r"tags take 5\d\d bytes encoded, over the 512-byte limit"):
        encode_tags(tags)
    encode_tags({"k": "v" * 505})  # 1 + 1 + 2 + 3 + 505 = 512: fits
    with pytest.raises(ConfigurationError, match="513 bytes"):
        encode_tags({"k": "v" * 506})
    with pytest.raises(ConfigurationError, match="must be strings"):
        encode_tags({"k": 1})  # type: ignore[dict-item]
    with pytest.raises(ConfigurationError, match="not encodable"):
        encode_tags({"k": "\ud800"})
    # bytes that are not UTF-8 (Go strings may hold any) survive a round trip
    assert encode_tags(decode_tags(b"\xff\x81\xa1k\xa1\xfe")) == b"\xff\x81\xa1k\xa1\xfe"


@pytest.mark.parametrize("meta, reason", [
    (b"\xff" + bytes(512), "too_large"),
    (b"\xff\x81\xa1k\x01", "bad_field"),          # a value that is not a string
    (b"\xff\x92\xa1a\xa1b", "bad_field"),          # a list, not a map
    (b"\xff\x81\xa1k", "truncated"),
    (b"\xff\x80\x00", "trailing_bytes"),
])
def test_bad_tags_raise_the_wire_error(meta, reason):
    with pytest.raises(GossipWireError) as err:
        decode_tags(meta)
    assert err.value.reason == reason


def test_tags_count_is_bounded():
    meta = encode_tags({f"k{i}": "" for i in range(20)})
    with pytest.raises(GossipWireError) as err:
        decode_tags(meta, SerfLimits(max_tags=19))
    assert err.value.reason in ("too_many", "bad_msgpack")
    assert len(decode_tags(meta, SerfLimits(max_tags=20))) == 20


# -------------------------------------------------------------- messages

PLAIN = {"join": m.Join, "leave": m.Leave, "user_event": m.UserEvent, "query": m.Query,
         "query_response": m.QueryResponse, "key_request": m.KeyRequest, "key_response": m.KeyResponse,
         "push_pull": m.SerfPushPull}


@pytest.mark.parametrize("vector", [v for v in VECTORS["messages"] if v["type"] in PLAIN], ids=lambda v: v["name"])
def test_message_vectors_both_ways(vector):
    wire = bytes.fromhex(vector["wire"])
    msg = m.decode(wire, LIMITS)
    assert type(msg) is PLAIN[vector["type"]]
    assert _norm(msg) == _norm_go(vector["fields"])
    if vector["exact"]:
        assert m.encode(msg) == wire
    else:
        assert m.decode(m.encode(msg), LIMITS) == msg
        assert len(m.encode(msg)) == len(wire)


def test_message_type_numbers_are_serfs():
    assert [t.name for t in SerfMessageType] == [
        "LEAVE", "JOIN", "PUSH_PULL", "USER_EVENT", "QUERY", "QUERY_RESPONSE", "CONFLICT_RESPONSE",
        "KEY_REQUEST", "KEY_RESPONSE", "RELAY"]
    assert [int(t) for t in SerfMessageType] == list(range(10))
    for name, cls in PLAIN.items():
        assert bytes.fromhex(next(v["wire"] for v in VECTORS["messages"] if v["type"] == name))[0] == cls.TYPE


def test_query_flags_and_duration():
    query = m.decode(bytes.fromhex(_vector("query")["wire"]), LIMITS)
    assert (query.ack, query.no_broadcast, query.timeout) == (True, False, 3_200_000_000)
    nb = m.decode(bytes.fromhex(_vector("query-no-broadcast")["wire"]), LIMITS)
    assert (nb.ack, nb.no_broadcast) == (True, True)
    assert m.decode(bytes.fromhex(_vector("query-response-ack")["wire"]), LIMITS).ack


def test_filter_vectors_both_ways():
    node = bytes.fromhex(_vector("filter-node")["wire"])
    tag = bytes.fromhex(_vector("filter-tag")["wire"])
    assert m.decode_filter(node, LIMITS) == ["serf-1", "py-1"]
    assert m.decode_filter(tag, LIMITS) == m.FilterTag(tag="role", expr="^web$")
    assert m.encode_node_filter(["serf-1", "py-1"]) == node
    assert m.encode_tag_filter("role", "^web$") == tag
    query = m.decode(bytes.fromhex(_vector("query")["wire"]), LIMITS)
    assert query.filters == [node, bytes.fromhex("0182a445787072a55e77656224a3546167a4726f6c65")]


def test_relay_vectors_both_ways():
    for name, host in (("relay-ipv4", "10.0.0.7"), ("relay-ipv6", "fd00::1")):
        vector = _vector(name)
        wire = bytes.fromhex(vector["wire"])
        header, inner = m.decode_relay(wire, LIMITS)
        fields = vector["fields"]
        assert m.relay_address(header) == (host, fields["DestAddr"]["Port"])
        assert header.dest_name == fields["DestName"]
        response = m.decode(inner, LIMITS)
        assert _norm(response) == _norm_go(fields["Message"])
        assert m.encode_relay(header.dest_addr.ip, header.dest_addr.port, header.dest_name, inner) == wire


def test_conflict_response_vectors_both_ways():
    wire = bytes.fromhex(_vector("conflict-response")["wire"])
    member = m.decode_conflict_response(wire, LIMITS)
    assert member == m.SerfMember(name="py-1", addr=bytes([10, 0, 0, 7]), port=7946, tags={"role": "web"},
                                  status=MemberStatus.ALIVE, protocol_min=1, protocol_max=5, protocol_cur=2,
                                  delegate_min=2, delegate_max=5, delegate_cur=4)
    assert m.encode_conflict_response(member) == wire
    unknown = bytes.fromhex(_vector("conflict-response-unknown")["wire"])
    assert m.decode_conflict_response(unknown, LIMITS) is None
    assert m.encode_conflict_response(None) == unknown


def test_key_list_response_inside_a_query_response():
    """Serf's list-keys answer, cut to fit the 1024-byte response limit, as Serf sized it."""
    wire = bytes.fromhex(_vector("query-response-key-list-truncated")["wire"])
    assert len(wire) <= 1024
    response = m.decode(wire, LIMITS)
    keys = m.decode(response.payload, LIMITS)
    assert isinstance(keys, m.KeyResponse)
    assert (keys.result, len(keys.keys), keys.primary_key) == (True, 34, "EBceJSwzOkFIT1ZdZGtyeQ==")
    assert keys.message == "truncated key list response, showing first 34 of 60 keys"
    assert m.encode(response) == wire


def test_ack_payload_coordinate_both_ways():
    vector = _vector("ack-payload-coordinate")
    wire = bytes.fromhex(vector["wire"])
    coordinate = m.decode_ack_payload(wire, LIMITS)
    assert _norm(coordinate) == _norm_go(vector["fields"])
    assert m.encode_ack_payload(coordinate) == wire


def test_push_pull_keeps_nil_event_slots_and_empty_lists_as_go_sends_them():
    pp = m.decode(bytes.fromhex(_vector("push-pull-three")["wire"]), LIMITS)
    assert len(pp.events) == 512 and pp.events == [None] * 512
    assert pp.status_ltimes == {"py-1": 12, "serf-1": 9, "serf-2": 4}
    empty = m.SerfPushPull()
    assert m.encode(empty).hex() == "0286aa4576656e744c54696d6500a64576656e747390a54c54696d6500ab4c6566744d656d626572739" \
                                   "0aa51756572794c54696d6500ac5374617475734c54696d657380"


# ------------------------------------------------------- bad input, bounded


def _push_pull(**fields):
    return m.encode(m.SerfPushPull(**fields))


@pytest.mark.parametrize("buf, limits, reason", [
    (b"", LIMITS, "truncated"),
    (b"\x0a\x80", LIMITS, "bad_type"),
    (b"\x06\xc0", LIMITS, "bad_type"),                          # conflict response: its own decoder
    (b"\x01\x82\xa5LTime\x07\xa4Node\xa1n\x00", LIMITS, "trailing_bytes"),
    (b"\x01\x81\xa5LTime\xff", LIMITS, "bad_field"),            # negative Lamport time
    (b"\x01\x81\xa4Node\x07", LIMITS, "bad_field"),             # a number for a string
    (b"\x01\x93\x01\x02\x03", LIMITS, "bad_message"),           # a list for a struct
    (b"\x01\x82\xa5LTime\x07\xa4Node", LIMITS, "truncated"),
    (b"\x04\x81\xa4Port\xce\x00\x01\x00\x00", LIMITS, "bad_field"),  # port over 65535
    (_push_pull(status_ltimes={f"n{i}": i for i in range(11)}), SerfLimits(max_members=10), "too_many"),
    (_push_pull(left_members=[f"n{i}" for i in range(11)]), SerfLimits(max_members=10), "too_many"),
    (_push_pull(events=[None] * 11), SerfLimits(max_event_slots=10), "too_many"),
    (_push_pull(events=[None] * 11), SerfLimits(max_event_slots=10, max_list=10, max_members=10, max_events_per_slot=10, max_tags=10), "bad_msgpack"),
    (_push_pull(events=[m.EventSlot(ltime=1, events=[m.EventEntry(name=str(i)) for i in range(3)])]),
     SerfLimits(max_events_per_slot=2), "too_many"),
    (_push_pull(left_members=["x" * 100]), SerfLimits(max_message=50), "too_large"),
    (m.encode(m.Query(filters=[b"f"] * 5)), SerfLimits(max_list=4), "too_many"),
    (m.encode(m.KeyResponse(keys=["k"] * 5)), SerfLimits(max_list=4), "too_many"),
    (b"\x02\x81\xa6Events\x91\x81\xa6Events\x91\x81\xa4Name\x91\x91\x91\x01", LIMITS, "too_deep"),
])
def test_bad_messages_raise_the_wire_error(buf, limits, reason):
    with pytest.raises(GossipWireError) as err:
        m.decode(buf, limits)
    assert err.value.reason == reason


def test_cut_messages_are_truncated_at_every_length():
    for vector in VECTORS["messages"]:
        if vector["type"] not in PLAIN:
            continue
        wire = bytes.fromhex(vector["wire"])
        for cut in range(len(wire) - 1, 0, -max(1, len(wire) // 40)):
            with pytest.raises(GossipWireError):
                m.decode(wire[:cut], LIMITS)


@pytest.mark.parametrize("buf, reason", [
    (b"\x09", "truncated"),
    (m.encode_relay(b"\x01\x02\x03", 7946, "x", b"\x05\x80"), "bad_field"),   # a 3-byte address
    (m.encode_relay(b"\x7f\0\0\x01", 0, "x", b"\x05\x80"), "bad_field"),      # port 0
    (m.encode_relay(b"\x7f\0\0\x01", 7946, "x", b""), "truncated"),           # nothing to forward
    (b"\x05\x80", "bad_type"),
])
def test_bad_relays_raise_the_wire_error(buf, reason):
    with pytest.raises(GossipWireError) as err:
        m.decode_relay(buf, LIMITS)
    assert err.value.reason == reason


def test_bad_filters_and_ack_payloads_raise_the_wire_error():
    for buf, reason in ((b"", "truncated"), (b"\x02\x90", "bad_type"), (b"\x00\x91\x01", "bad_field"),
                        (b"\x00\x90\x00", "trailing_bytes")):
        with pytest.raises(GossipWireError) as err:
            m.decode_filter(buf, LIMITS)
        assert err.value.reason == reason
    with pytest.raises(Truncated):
        m.decode_ack_payload(b"", LIMITS)
    with pytest.raises(GossipWireError) as err:
        m.decode_ack_payload(b"\x02\x80", LIMITS)
    assert err.value.reason == "bad_version"


# ---------------------------------------------------------- Lamport clock


def test_lamport_clock_steps_as_go():
    clock = LamportClock()
    for step in VECTORS["clock"]:
        if step["op"] == "increment":
            assert clock.increment() == step["result"]
        else:
            clock.witness(step["value"])
        assert clock.time() == step["time"], step


# ------------------------------------------------- event and query buffers


@pytest.mark.parametrize("vector", VECTORS["buffers"], ids=lambda v: v["name"])
def test_buffers_decide_as_go(vector):
    if vector["kind"] == "event":
        buffer = UserEventBuffer(size=vector["size"])
    else:
        buffer = QueryBuffer(size=vector["size"])
    buffer.min_time = vector["min_time"]
    for step in vector["steps"]:
        if vector["kind"] == "event":
            new = buffer.handle(m.UserEvent(ltime=step["ltime"], name=step["name"],
                                            payload=bytes.fromhex(step["payload"])))
            rebroadcast = delivered = new
        else:
            flags = 2 if step["payload"] == "nb" else 0
            outcome = buffer.handle(m.Query(ltime=step["ltime"], id=step["id"], name=step["name"], flags=flags))
            rebroadcast, delivered = outcome.rebroadcast, outcome.new
        assert (rebroadcast, delivered, buffer.clock.time()) == (step["rebroadcast"], step["delivered"],
                                                                 step["clock"]), step


def test_event_slot_is_bounded_and_counted():
    buffer = UserEventBuffer(size=4, max_per_slot=2)
    assert [buffer.handle(m.UserEvent(ltime=1, name=str(i))) for i in range(4)] == [True, True, False, False]
    assert buffer.dropped == 2
    queries = QueryBuffer(size=4, max_per_slot=1)
    assert [queries.handle(m.Query(ltime=1, id=i)).new for i in range(3)] == [True, False, False]
    assert queries.dropped == 2


def test_event_buffer_refuses_events_bigger_than_serf_sends():
    buffer = UserEventBuffer()
    largest = m.UserEvent(ltime=1, name="e", payload=bytes(9 * 1024 - 1))
    assert buffer.handle(largest)
    assert not buffer.handle(m.UserEvent(ltime=1, name="e", payload=bytes(9 * 1024)))
    assert (buffer.dropped, buffer.bytes) == (1, 9 * 1024)


def test_event_buffer_bytes_forget_the_oldest_times_never_the_newest_event():
    buffer = UserEventBuffer(size=8, max_bytes=3 * 9 * 1024)
    big = bytes(9 * 1024 - 2)
    for ltime in (3, 1, 2):
        assert buffer.handle(m.UserEvent(ltime=ltime, name="e" + str(ltime), payload=big))
    assert (buffer.bytes, buffer.evicted) == (3 * 9 * 1024, 0)
    # a fourth: the oldest event time (1) goes, whatever order they came in
    assert buffer.handle(m.UserEvent(ltime=4, name="e4", payload=big))
    assert [s.ltime if s else None for s in buffer.slots()] == [None, None, 2, 3, 4, None, None, None]
    assert (buffer.evicted, buffer.bytes, buffer.dropped) == (1, 3 * 9 * 1024, 0)
    # a slot overwritten by a newer time gives its bytes back
    assert buffer.handle(m.UserEvent(ltime=10, name="x", payload=b"ab"))
    assert buffer.bytes == 2 * 9 * 1024 + 3


def test_event_buffer_needs_room_for_one_event():
    with pytest.raises(ValueError, match="at least one event of 9216 bytes"):
        UserEventBuffer(max_bytes=9 * 1024 - 1)


def test_new_event_follows_serf_user_event():
    buffer = UserEventBuffer()
    msg, raw = buffer.new_event("deploy", b"v1.2", coalesce=True)
    assert raw == bytes.fromhex(_vector("user-event")["wire"]).replace(b"LTime\x03", b"LTime\x00")
    assert (msg.ltime, buffer.clock.time()) == (0, 1)
    assert not buffer.handle(msg)  # already in the buffer
    with pytest.raises(ValueError, match="exceeds configured limit of 512 bytes before encoding"):
        buffer.new_event("e", bytes(512))
    with pytest.raises(ValueError, match="encoded user event exceeds configured limit of 512 bytes"):
        buffer.new_event("e", bytes(500))
    with pytest.raises(ValueError, match="sane limit of 9216"):
        buffer.new_event("e", bytes(9216), size_limit=20_000)
    assert buffer.clock.time() == 1


def test_query_filters_select_as_serf():
    tags = {"role": "web", "dc": "east"}
    node = m.encode_node_filter(["py-1", "serf-1"])
    assert should_process_query([], "py-1", tags)
    assert should_process_query([node], "py-1", tags)
    assert not should_process_query([node], "py-2", tags)
    assert should_process_query([node, m.encode_tag_filter("role", "^we")], "py-1", tags)
    assert not should_process_query([m.encode_tag_filter("role", "^db$")], "py-1", tags)
    assert should_process_query([m.encode_tag_filter("rack", "^$")], "py-1", tags)  # missing tag is ""
    assert not should_process_query([m.encode_tag_filter("role", "(")], "py-1", tags)  # bad regexp
    assert not should_process_query([b"\x05"], "py-1", tags)  # unknown filter type
    # Go's regexp semantics and hostile patterns: test_serf_query_filters.py


# ------------------------------------------------------ intents and members


def _view(core):
    members = {n: {"status": s.status.name.lower(), "ltime": s.status_ltime}
               for n, s in core.members.members.items()}
    intents = {n: {"status": i.kind.name.lower(), "ltime": i.ltime} for n, i in core.members.intents.items()}
    return members, intents


def _event_text(event):
    if event.kind == "user":
        return f"user:{event.name}:{event.payload.hex()}"
    return f"{event.kind}:{event.name}"


@pytest.mark.parametrize("vector", VECTORS["intents"], ids=lambda v: v["name"])
def test_intents_and_member_statuses_as_go(vector):
    core = SerfCore(vector["self"])
    members = core.members
    for now, step in enumerate(vector["steps"]):
        result = False
        op = step["op"]
        if op == "join_intent":
            result = members.join_intent(m.Join(ltime=step["ltime"], node=step["node"]), now)
        elif op == "leave_intent":
            result = members.leave_intent(m.Leave(ltime=step["ltime"], node=step["node"]), now).rebroadcast
        elif op == "node_join":
            members.node_join(step["node"], now)
        elif op == "node_leave":
            members.node_leave(step["node"], now)
        elif op == "merge":
            state = m.decode(bytes.fromhex(step["state"]), LIMITS)
            core.merge_remote_state(state, step.get("join", False), now)
        elif op == "local_leave":
            msg = members.local_leave(now)
            assert msg.ltime == step["ltime"]
            result = True
        assert result == step["result"], step
        assert members.clock.time() == step["clock"], step
        assert _view(core) == (step["members"], step["intents"]), step
        assert [_event_text(e) for e in core.take_events()] == step["events"], step
        assert (sorted(members.left_members), sorted(members.failed_members)) == (step["left"], step["failed"])


def test_a_leave_intent_about_us_while_alive_is_refuted():
    members = SerfMembers("py-1")
    members.node_join("py-1", 0)
    outcome = members.leave_intent(m.Leave(ltime=5, node="py-1"), 1)
    assert (outcome.rebroadcast, outcome.refute) == (False, True)
    assert members.clock.time() == 6
    join = members.local_join(2)
    assert join == m.Join(ltime=6, node="py-1")
    assert (members.members["py-1"].status_ltime, members.clock.time()) == (6, 7)
    # the stale leave is now old
    assert members.leave_intent(m.Leave(ltime=5, node="py-1"), 3).rebroadcast is False
    members.local_leave(4)
    with pytest.raises(RuntimeError, match="cannot leave: this node is leaving"):
        members.local_leave(5)


def test_prune_and_reap_erase_members():
    members = SerfMembers("py-1", reconnect_timeout=10, tombstone_timeout=20)
    for name in ("a", "b", "c"):
        members.node_join(name, 0)
    members.node_leave("a", 0)                        # failed at 0
    members.clock.witness(3)                          # intents must be newer than the status time (0)
    msg, outcome = members.force_leave("b", 1, prune=True)
    assert (msg.prune, outcome.rebroadcast, outcome.prune) == (True, True, True)
    members.erase("b")
    members.leave_intent(m.Leave(ltime=9, node="c"), 2)
    members.node_leave("c", 5)                        # left at 5
    members.take_events()
    members.intents.upsert("ghost", SerfMessageType.JOIN, 1, 0)
    members.reap(10)
    assert sorted(members.members) == ["a", "c"]
    members.reap(10.5)
    assert sorted(members.members) == ["c"] and members.failed_members == []
    members.reap(25.5)
    assert members.members == {} and members.left_members == []
    assert [e.kind + ":" + e.name for e in members.take_events()] == ["member-reap:a", "member-reap:c"]
    assert len(members.intents) == 1
    members.intents.timeout = 5
    members.intents.reap(5)
    assert len(members.intents) == 1
    members.intents.reap(5.5)
    assert len(members.intents) == 0


def test_intent_buffer_is_bounded_oldest_out():
    intents = IntentBuffer(max_nodes=2)
    assert intents.upsert("a", SerfMessageType.JOIN, 1, 0)
    assert intents.upsert("b", SerfMessageType.JOIN, 1, 1)
    assert intents.upsert("a", SerfMessageType.LEAVE, 2, 2)   # a is now the newest
    assert intents.upsert("c", SerfMessageType.JOIN, 1, 3)    # b goes
    assert ([n for n, _ in intents.items()], intents.evicted) == (["a", "c"], 1)
    assert intents.recent("a", SerfMessageType.LEAVE) == 2
    assert intents.recent("a", SerfMessageType.JOIN) is None


def test_member_table_is_bounded_and_counted():
    members = SerfMembers("py-1", max_members=2)
    for name in ("a", "b", "c"):
        members.node_join(name, 0)
    assert (sorted(members.members), members.refused) == (["a", "b"], 1)


def test_local_state_round_trips_and_merges_into_another_node():
    a = SerfCore("py-1")
    a.members.node_join("py-1", 0)
    a.members.local_join(0)
    a.members.node_join("serf-1", 0)
    a.members.leave_intent(m.Leave(ltime=4, node="serf-1"), 1)
    a.members.node_leave("serf-1", 2)
    a.event_buffer.new_event("deploy", b"v1")
    state = a.local_state()
    raw = m.encode(state)
    assert m.decode(raw, LIMITS) == state
    assert len(state.events) == 512

    b = SerfCore("py-2")
    b.members.node_join("py-2", 0)
    b.members.node_join("serf-1", 0)
    b.event_join_ignore = False
    assert b.merge_remote_state(m.decode(raw, LIMITS), join=True, now=3) is False
    assert b.members.members["serf-1"].status == MemberStatus.LEAVING
    assert b.members.intents.recent("py-1", SerfMessageType.JOIN) == 0
    assert [(e.kind, e.name, e.payload) for e in b.take_events()] == [
        ("member-join", "py-2", b""), ("member-join", "serf-1", b""), ("user", "deploy", b"v1")]
    # a's clock is 5: b witnesses 4, then serf-1's leave at its status time 4 + 1
    assert (a.members.clock.time(), b.members.clock.time(), b.event_buffer.clock.time()) == (5, 6, 1)

    # a join that ignores old events takes the peer's event time as its minimum
    c = SerfCore("py-3")
    c.event_join_ignore = True
    c.merge_remote_state(m.decode(raw, LIMITS), join=True, now=3)
    assert c.event_buffer.min_time == 1
    assert c.take_events() == []


def test_a_new_node_starts_its_clocks_at_one_as_serf_create():
    core = SerfCore.create("py-1")
    assert (core.members.clock.time(), core.event_buffer.clock.time(), core.query_buffer.clock.time()) == (1, 1, 1)
    core.members.node_join("py-1", 0)
    assert core.members.local_join(0) == m.Join(ltime=1, node="py-1")


def test_merge_refutes_a_stale_leave_about_us():
    core = SerfCore("py-1")
    core.members.node_join("py-1", 0)
    state = m.SerfPushPull(ltime=3, status_ltimes={"py-1": 2}, left_members=["py-1"])
    assert core.merge_remote_state(state, join=False, now=1) is True
    assert core.members.members["py-1"].status == MemberStatus.ALIVE


def test_a_left_members_time_at_the_uint64_top_wraps_as_go():
    """A push/pull's leave is one past the member's status time, a Go
    uint64: at 2**64 - 1 it wraps to 0, an old leave (found by
    tests/fuzz/fuzz_gossip.py: it was 2**64, which our own push/pull then failed
    to encode)."""
    core = SerfCore.create("py-1")
    for name in ("py-1", "b"):
        core.members.node_join(name, 0)
    core.members.join_intent(m.Join(ltime=5, node="b"), 0)
    state = m.SerfPushPull(status_ltimes={"b": 2**64 - 1, "c": 2**64 - 1}, left_members=["b", "c"])
    assert core.merge_remote_state(state, join=False, now=1) is False
    assert (core.members.members["b"].status, core.members.members["b"].status_ltime) == (MemberStatus.ALIVE, 5)
    assert [(name, intent.kind, intent.ltime) for name, intent in core.members.intents.items()] \
        == [("c", SerfMessageType.LEAVE, 0)]
    assert m.decode(m.encode(core.local_state()), LIMITS).status_ltimes == {"py-1": 0, "b": 5}


# ----------------------------------------------------- queries and key management


def _key_query(name, key=b"", ltime=4, qid=77):
    return m.Query(ltime=ltime, id=qid, name=name, payload=m.encode(m.KeyRequest(key=key)))


def _answer(query, keyring, **kwargs):
    answer = answer_internal_query(query, "py-1", keyring, **kwargs)
    if answer.response is None:
        return answer, None
    response = m.decode(answer.response, LIMITS)
    assert (response.ltime, response.id, response.from_, response.flags) == (query.ltime, query.id, "py-1", 0)
    return answer, response.payload


def test_acks_and_responses_as_serf_writes_them():
    assert make_ack(m.Query(ltime=12, id=9), "py-1").hex() == _vector("query-response-ack")["wire"]
    assert make_response(m.Query(ltime=12, id=0x7FFFFFFF), "py-1", b"up 3 days").hex() == \
        _vector("query-response")["wire"]
    with pytest.raises(ValueError, match="response exceeds limit of 1024 bytes"):
        make_response(m.Query(), "py-1", bytes(1000))


def test_key_queries_change_the_keyring_and_answer_as_serf():
    old, new = bytes(range(16)), bytes(range(32))
    assert m.decode(bytes.fromhex(_vector("key-request")["wire"]), LIMITS).key == bytes(
        (0x30 + i * 7) & 0xFF for i in range(32))
    ok = bytes.fromhex(_vector("key-response-ok")["wire"])
    no_keyring = bytes.fromhex(_vector("key-response-error")["wire"])

    assert _answer(_key_query(QUERY_INSTALL_KEY, new), None)[1] == no_keyring
    keyring = Keyring([old])
    answer, payload = _answer(_key_query(QUERY_INSTALL_KEY, new), keyring)
    assert (payload, answer.keyring_changed, keyring.keys) == (ok, True, (old, new))
    answer, payload = _answer(_key_query(QUERY_USE_KEY, new), keyring)
    assert (payload, keyring.keys) == (ok, (new, old))
    answer, payload = _answer(_key_query(QUERY_REMOVE_KEY, old), keyring)
    assert (payload, keyring.keys) == (ok, (new,))

    failures = [(QUERY_INSTALL_KEY, b"short", "key size must be 16, 24 or 32 bytes"),
                (QUERY_USE_KEY, old, "Requested key is not in the keyring"),
                (QUERY_REMOVE_KEY, new, "Removing the primary key is not allowed")]
    for name, key, text in failures:
        answer, payload = _answer(_key_query(name, key), keyring)
        assert m.decode(payload, LIMITS) == m.KeyResponse(result=False, message=text)
        assert not answer.keyring_changed and keyring.keys == (new,)
    # a request Serf cannot decode: a bare failure
    answer, payload = _answer(m.Query(name=QUERY_INSTALL_KEY, payload=b"\x07\x01"), keyring)
    assert m.decode(payload, LIMITS) == m.KeyResponse(result=False, message="")

    _, payload = _answer(m.Query(name=QUERY_LIST_KEYS), Keyring([new, old]))
    b64 = [base64.b64encode(k).decode() for k in (new, old)]
    assert m.decode(payload, LIMITS) == m.KeyResponse(result=True, keys=b64, primary_key=b64[0])
    _, payload = _answer(m.Query(name=QUERY_LIST_KEYS), None)
    assert m.decode(payload, LIMITS) == m.KeyResponse(message="Keyring is empty (encryption not enabled)")


def test_key_list_is_cut_to_the_response_limit_as_serf_cuts_it():
    keyring = Keyring([bytes([i]) * 16 for i in range(60)])
    query = m.Query(ltime=4, id=77, name=QUERY_LIST_KEYS)
    raw = answer_internal_query(query, "py-1", keyring).response
    go = bytes.fromhex(_vector("query-response-key-list-truncated")["wire"])
    assert len(raw) == len(go)  # 60 keys of 16 bytes, as Serf's vector: the same 34 fit
    keys = m.decode(m.decode(raw, LIMITS).payload, LIMITS)
    assert (len(keys.keys), keys.message) == (34, "truncated key list response, showing first 34 of 60 keys")


def test_conflict_and_other_internal_queries():
    known = m.SerfMember(name="py-2", addr=b"\x7f\0\0\x02", port=7946, status=MemberStatus.ALIVE)
    lookup = {"py-2": known}.get
    _, payload = _answer(m.Query(name=QUERY_CONFLICT, payload=b"py-2"), None, member=lookup)
    assert m.decode_conflict_response(payload, LIMITS) == known
    _, payload = _answer(m.Query(name=QUERY_CONFLICT, payload=b"py-9"), None, member=lookup)
    assert m.decode_conflict_response(payload, LIMITS) is None
    assert _answer(m.Query(name=QUERY_CONFLICT, payload=b"py-1"), None)[1] is None   # about us: no answer
    assert _answer(m.Query(name=QUERY_PING), None)[1] is None
    assert _answer(m.Query(name="_serf_unknown"), None)[1] is None


# ------------------------------------------------------------------ fuzzing

_SMALL = SerfLimits(max_message=4096, max_members=64, max_event_slots=64, max_events_per_slot=8, max_list=16,
                    max_tags=16)
_SEEDS = [bytes.fromhex(v["wire"]) for v in VECTORS["messages"]]


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.binary(max_size=200),
                 st.tuples(st.sampled_from(_SEEDS), st.integers(0, 400), st.binary(min_size=1, max_size=4)).map(
                     lambda t: t[0][:t[1]] + t[2] + t[0][t[1] + len(t[2]):])))
def test_fuzzed_bytes_raise_only_the_wire_error(buf):
    for parse in (lambda b: m.decode(b, _SMALL), lambda b: decode_tags(b[:512], _SMALL),
                  lambda b: m.decode_relay(b, _SMALL), lambda b: m.decode_filter(b, _SMALL),
                  lambda b: m.decode_ack_payload(b, _SMALL), lambda b: m.decode_conflict_response(b, _SMALL)):
        try:
            parse(buf)
        except GossipWireError:
            pass


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
_ltime = st.integers(0, (1 << 64) - 1)


@settings(max_examples=100, deadline=None)
@given(st.builds(m.SerfPushPull, ltime=_ltime, status_ltimes=st.dictionaries(_text, _ltime, max_size=5),
                 left_members=st.lists(_text, max_size=5), event_ltime=_ltime,
                 events=st.lists(st.none() | st.builds(m.EventSlot, ltime=_ltime, events=st.lists(
                     st.builds(m.EventEntry, name=_text, payload=st.binary(max_size=10)), min_size=1, max_size=3)),
                     max_size=6),
                 query_ltime=_ltime),
       st.dictionaries(_text, _text, max_size=8))
def test_round_trips(state, tags):
    raw = m.encode(state)
    assert m.decode(raw, LIMITS) == state
    assert m.encode(m.decode(raw, LIMITS)) == raw
    assert decode_tags(encode_tags(tags)) == tags


def test_new_query_as_serf_makes_it():
    buffer = QueryBuffer()
    buffer.clock.witness(11)
    filters = m.decode(bytes.fromhex(_vector("query")["wire"]), LIMITS).filters
    query, raw = new_query(buffer, 0x7FFFFFFF, "uptime", b"?", "serf-1", bytes([10, 0, 0, 7]), 7946,
                           timeout=default_query_timeout(9), filters=filters, request_ack=True, relay_factor=2)
    assert raw.hex() == _vector("query")["wire"]     # 3.2 s: 0.2 s x 16 x ceil(log10(10))
    assert buffer.clock.time() == 13                  # handled locally: witnessed
    assert not buffer.handle(query).new
    with pytest.raises(ValueError, match="query exceeds limit of 1024 bytes"):
        new_query(buffer, 1, "big", bytes(1000), "py-1", b"\x7f\0\0\x01", 7946, timeout=1)


def test_query_tracker_counts_each_node_once_until_the_deadline():
    tracker = QueryTracker(max_pending=2)
    query = m.Query(ltime=5, id=9, timeout=2_000_000_000, flags=1)
    tracker.open(query, now=10)
    ack = m.QueryResponse(ltime=5, id=9, from_="a", flags=1)
    answer = m.QueryResponse(ltime=5, id=9, from_="a", payload=b"x")
    assert [tracker.handle(r, 11) for r in (ack, ack, answer, answer)] == ["ack", None, "response", None]
    assert tracker.duplicates == 2
    assert tracker.handle(m.QueryResponse(ltime=5, id=8, from_="b"), 11) is None     # another ID
    assert tracker.handle(m.QueryResponse(ltime=6, id=9, from_="b"), 11) is None     # no such query
    assert tracker.handle(m.QueryResponse(ltime=5, id=9, from_="b"), 12.5) is None   # past the deadline
    no_acks = m.Query(ltime=6, id=1, timeout=1_000_000_000)
    tracker.open(no_acks, now=10)
    assert tracker.handle(m.QueryResponse(ltime=6, id=1, from_="a", flags=1), 10) is None
    tracker.open(m.Query(ltime=7, id=1), now=10)
    assert (len(tracker), tracker.evicted) == (2, 1)
    assert [p.ltime for p in tracker.expire(11.5)] == [6, 7]
    assert len(tracker) == 0


# ------------------------------------------------------ network coordinates

COORD_VECTORS = json.loads((pathlib.Path(__file__).resolve().parents[1] / "interop" / "gossip_vectors" / "coord_vectors.json").read_text())


def _coordinate(go):
    return m.Coordinate(vec=go["Vec"], error=go["Error"], adjustment=go["Adjustment"], height=go["Height"])


def test_coordinate_client_moves_as_serfs_step_by_step():
    """Serf's ping delegate fed 46 completed probes (coord_gen.go): the
    latency filter and the adjustment window roll over, bad payloads and
    insane coordinates or RTTs are refused, a coordinate far away makes ours
    invalid and it starts again. Ours ends each step on the same bits, and
    acks with the same bytes."""
    from mcastmember.gossip.serf.coordinates import CoordinateClient, CoordinateConfig, CoordinateRefused
    config = COORD_VECTORS["config"]
    assert dataclasses.astuple(CoordinateConfig()) == (
        config["Dimensionality"], config["VivaldiErrorMax"], config["VivaldiCE"], config["VivaldiCC"],
        config["AdjustmentWindowSize"], config["HeightMin"], config["LatencyFilterSize"], config["GravityRho"])
    client = CoordinateClient()
    assert m.encode_ack_payload(client.coordinate).hex() == COORD_VECTORS["fresh"]
    outcomes = []
    for step in COORD_VECTORS["steps"]:
        try:
            other = m.decode_ack_payload(bytes.fromhex(step["payload"]), LIMITS)
            client.update(step["node"], other, step["rtt_ns"] / 1e9)
            outcomes.append(True)
        except (GossipWireError, CoordinateRefused):
            outcomes.append(False)
        assert client.coordinate == _coordinate(step["after"])
        assert m.encode_ack_payload(client.coordinate).hex() == step["ack"]
        assert client.resets == step["resets"]
    assert outcomes == [step["accepted"] for step in COORD_VECTORS["steps"]]
    assert outcomes.count(False) == 9 and client.resets == 5
    assert len(client) == 4
    client.forget("serf-far")
    assert len(client) == 3


def test_estimate_rtt_is_what_serf_rtt_prints():
    from mcastmember.gossip.serf import estimate_rtt
    for vector in COORD_VECTORS["distances"]:
        assert estimate_rtt(_coordinate(vector["a"]), _coordinate(vector["b"])) == vector["nanos"] / 1e9
    from mcastmember.gossip.serf.coordinates import CoordinateRefused, new_coordinate
    with pytest.raises(CoordinateRefused, match="coordinates of 8 and 2 dimensions cannot be compared"):
        estimate_rtt(new_coordinate(), m.Coordinate(vec=[0.0, 0.0]))
