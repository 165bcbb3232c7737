"""SerfNode (mcastmember.gossip.serf.node): Serf's layer wired into the gossip
engine, several nodes on tests/gossipnet.py's fake network and clock. No
sockets, no real time; pure Python (one implementation)."""

import pytest

from gossipnet import Net
from mcastmember._runtime.errors import ConfigurationError
from mcastmember.gossip import Limits
from mcastmember.gossip.memberlist import framing
from mcastmember.gossip.memberlist import messages as wire
from mcastmember.gossip.memberlist.layout import MessageType
from mcastmember.gossip.memberlist.settings import GossipSettings
from mcastmember.gossip.serf import MemberStatus, SerfLimits, SerfMessageType, decode_tags
from mcastmember.gossip.serf import messages
from mcastmember.gossip.serf.node import (ConflictResolved, JoinDone, KeyResult, KeyringChanged, LeaveDone,
                                          SerfMemberEvent, QueryAnswer, QueryFinished, QueryReceived, SerfNode,
                                          SerfSettings, UserEventReceived, b64)

TAGS = {"a": {"role": "web", "dc": "east"}, "b": {"role": "db"}, "c": {"role": "cache"},
        "d": {"role": "web", "dc": "west"}, "e": {}}
K1, K2 = bytes(range(16)), bytes(range(100, 132))


def serf_net(**net_args):
    return Net(factory=lambda settings, seed: SerfNode(settings, TAGS[settings.name], seed=seed), **net_args)


def cluster(names, settle=5.0, **overrides):
    net = serf_net()
    net.cluster(names, settle=settle, **overrides)
    return net


def view(net, name):
    return {m.name: (m.status.name.lower(), m.tags) for m in net[name].members()}


def of(net, name, kind):
    return [e for _t, e in net.events[name] if isinstance(e, kind)]


def member_events(net, name, about):
    return [e.kind for e in of(net, name, SerfMemberEvent) if e.member.name == about]


def test_versions_and_tags_are_what_a_serf_agent_advertises():
    node = SerfNode(GossipSettings(name="py", protocol_version=5), {"role": "web"})
    # serf.Create: memberlist protocol 2 (ProtocolVersionMap[5]), delegate 2..5, current 5
    assert node.engine.settings.vsn() == bytes((1, 5, 2, 2, 5, 5))
    node.start(0.0)
    me = node.engine.node("py")
    assert me.meta == b"\xff\x81\xa4role\xa3web" and decode_tags(me.meta) == {"role": "web"}
    (joined,) = node.events()
    assert joined == SerfMemberEvent("joined", node.member("py")) and joined.member.status == MemberStatus.ALIVE


def test_five_nodes_join_and_see_each_others_tags():
    names = ["a", "b", "c", "d", "e"]
    net = cluster(names)
    expected = {n: ("alive", TAGS[n]) for n in names}
    for name in names:
        assert view(net, name) == expected
        assert sorted(e.member.name for e in of(net, name, SerfMemberEvent) if e.kind == "joined") == names
        assert of(net, name, JoinDone) == ([] if name == "a" else [JoinDone(1, ())])
        # every joiner's intent reached everyone (the seed a joined nobody, so sent none)
        times = {n: m.status_ltime for n, m in net[name].core.members.members.items()}
        assert sorted(n for n, t in times.items() if t > 0) == names[1:]
    # a joiner hears of the seed's members before its join is done
    kinds = [e.kind if isinstance(e, SerfMemberEvent) else type(e).__name__ for _t, e in net.events["b"]]
    assert kinds[:3] == ["joined", "joined", "JoinDone"]


def test_tag_change_shows_as_updated_everywhere():
    net = cluster(["a", "b", "c"])
    net["b"].set_tags({"role": "db", "primary": "yes"}, net.now)
    net.run(net.now + 3.0)
    for name in "abc":
        assert member_events(net, name, "b") == ["joined", "updated"]
        assert view(net, name)["b"] == ("alive", {"role": "db", "primary": "yes"})


def test_graceful_leave_shows_left_everywhere_not_failed():
    net = cluster(["a", "b", "c", "d"])
    start = len(net.sent)
    net["c"].leave(net.now)
    net.run(net.now + 10.0)
    assert of(net, "c", LeaveDone) == [LeaveDone(True)] and net["c"].leave_done
    for name in "abd":
        assert view(net, name)["c"] == ("left", TAGS["c"])
        assert member_events(net, name, "c") == ["joined", "left"]
    # the leave intent went out before memberlist's own dead message about c
    first_leave = first_dead = None
    for i, (_t, src, _dst, data) in enumerate(net.sent[start:]):
        if src != net.names["c"]:
            continue
        for part in _user_and_wire(data):
            if isinstance(part, messages.Leave) and first_leave is None:
                first_leave = i
            if isinstance(part, wire.Dead) and first_dead is None:
                first_dead = i
    assert first_leave is not None and first_dead is not None and first_leave < first_dead


def _leave_on_the_wire(settle, **overrides):
    """c leaves from a five-node cluster settled ``settle`` s: (seconds after
    the leave, to, what) of c's datagrams carrying its leave intent or its
    dead message, and when each other member marked c left."""
    net = cluster(list("abcde"), settle=settle, **overrides)
    start, t0 = len(net.sent), net.now
    net["c"].leave(net.now)
    net.run(net.now + 10.0)
    names = {addr: name for name, addr in net.names.items()}
    sent = []
    for t, src, dst, data in net.sent[start:]:
        parts = _user_and_wire(data) if src == net.names["c"] else []
        what = [type(p).__name__ for p in parts
                if isinstance(p, wire.Ping) or isinstance(p, (messages.Leave, wire.Dead)) and p.node == "c"]
        if any(kind != "Ping" for kind in what):
            sent.append((round(t - t0, 3), names[dst], what))
    assert of(net, "c", LeaveDone) == [LeaveDone(True)]
    # every other member had the intent before the dead message: left, never failed
    left = []
    for name in "abde":
        assert member_events(net, name, "c") == ["joined", "left"]
        left += [round(t - t0, 3) for t, e in net.events[name]
                 if isinstance(e, SerfMemberEvent) and e.member.name == "c" and e.kind == "left"]
    return sent, sorted(left)


def test_memberlist_leave_starts_once_the_send_that_finished_the_intent_is_out():
    """Serf's Leave waits on the intent's Finished, which memberlist calls as
    GetBroadcasts takes the last transmission, and then queues memberlist's
    dead message: on Serf's agents it goes out on the next packet, seldom on
    the rest of the gossip round in hand. N = 5: each message goes out 4 x
    ceil(log10(6)) = 4 times; 3 gossip targets a round, every 0.2 s; the
    probe's ping every 1 s, on a gossip tick, before the round."""
    # the last transmission on the round's first target: the rest of the round
    # has nothing to send, the dead message goes out next round
    sent, left = _leave_on_the_wire(5.05)
    assert [(t, what) for t, _to, what in sent] == [
        (0.15, ["Leave"]), (0.15, ["Leave"]), (0.15, ["Leave"]), (0.35, ["Leave"]),
        (0.55, ["Dead"]), (0.55, ["Dead"]), (0.55, ["Dead"]), (0.75, ["Dead"])]
    assert left == [0.551, 0.551, 0.551, 0.751]
    # the last transmission on our probe's ping: the gossip round of the same
    # tick (one timer call: 0.25 s adds up exactly to the probe's 1 s) carries
    # the dead message, not the round after it (then 0.65: three at 0.651)
    sent, left = _leave_on_the_wire(5.6, gossip_interval=0.25)
    assert [(t, what) for t, _to, what in sent] == [
        (0.15, ["Leave"]), (0.15, ["Leave"]), (0.15, ["Leave"]), (0.4, ["Ping", "Leave"]),
        (0.4, ["Dead"]), (0.4, ["Dead"]), (0.4, ["Dead"]), (0.401, ["Dead"])]    # the last on an ack
    assert left == [0.401, 0.401, 0.401, 0.651]     # a had the ping, then the others' relays


def test_silent_node_shows_failed_everywhere():
    net = cluster(["a", "b", "c", "d"])
    net.silence("d")
    net.run(net.now + 30.0)
    for name in "abc":
        assert view(net, name)["d"] == ("failed", TAGS["d"])
        assert member_events(net, name, "d") == ["joined", "failed"]


def test_stats_count_the_members_by_status():
    net = cluster(["a", "b", "c", "d"])
    net["c"].leave(net.now)
    net.silence("d")
    net.run(net.now + 30.0)
    stats = net["a"].stats()
    assert [stats[f"members.{s}"] for s in ("alive", "leaving", "left", "failed")] == [2, 0, 1, 1]


def test_user_event_reaches_everyone_once():
    names = ["a", "b", "c", "d", "e"]
    net = cluster(names)
    net["b"].user_event("deploy", b"v2", net.now)
    net["d"].user_event("deploy", b"v3", net.now, coalesce=False)
    net.run(net.now + 5.0)
    for name in names:
        got = sorted((e.name, e.payload, e.coalesce) for e in of(net, name, UserEventReceived))
        assert got == [("deploy", b"v2", True), ("deploy", b"v3", False)]
    # the same LTime from two senders is two events; one sender's repeat is not
    assert {e.ltime for e in of(net, "a", UserEventReceived)} == {1}


def test_user_event_over_the_limit_is_refused():
    net = cluster(["a"])
    with pytest.raises(ValueError, match="exceeds configured limit of 512 bytes"):
        net["a"].user_event("big", b"x" * 600, net.now)


def test_key_queries_rotate_a_shared_keyring_and_nobody_is_removed():
    names = ["a", "b", "c", "d"]
    net = cluster(names, keys=(K1,))
    for op, key in (("install", K2), ("use", K2), ("remove", K1), ("list", b"")):
        net["b"].key_operation(op, key, net.now)
        net.run(net.now + 3.0)
        (result,) = [r for r in of(net, "b", KeyResult) if r.op == op]
        assert (result.ok, result.num_nodes, result.num_resp, result.num_err, result.messages) == (
            True, 4, 4, 0, {})
    assert result.keys == {b64(K2): 4} and result.primary_keys == {b64(K2): 4}
    for name in names:
        assert net[name].engine.keyring.keys == (K2,)
        assert [e.keys for e in of(net, name, KeyringChanged)] == [(K1, K2), (K2, K1), (K2,)]
        assert view(net, name) == {n: ("alive", TAGS[n]) for n in names}
        assert net[name].stats()["bad_input"] == 0
    net.run(net.now + 20.0)     # still one cluster on the new key alone
    for name in names:
        assert view(net, name) == {n: ("alive", TAGS[n]) for n in names}


def test_removing_the_primary_key_fails_on_every_node():
    net = cluster(["a", "b", "c"], keys=(K1,))
    net["a"].key_operation("remove", K1, net.now)
    net.run(net.now + 3.0)
    (result,) = of(net, "a", KeyResult)
    assert (result.ok, result.num_resp, result.num_err) == (False, 3, 3)
    assert result.messages == dict.fromkeys("abc", "Removing the primary key is not allowed")


def test_a_query_is_answered_by_udp_to_the_asker_and_collected():
    net = cluster(["a", "b", "c"])
    query = net["a"].query("load", b"?", net.now, request_ack=True, relay_factor=1)
    net.run(net.now + 0.1)
    for name in "abc":
        (received,) = of(net, name, QueryReceived)
        assert (received.query.name, received.query.payload) == ("load", b"?")
        net[name].respond(received, name.encode() * 2, net.now)
    net.run(net.now + 5.0)
    answers = of(net, "a", QueryAnswer)
    assert sorted((e.from_, e.payload, e.ack) for e in answers) == [
        ("a", b"", True), ("a", b"aa", False), ("b", b"", True), ("b", b"bb", False), ("c", b"", True),
        ("c", b"cc", False)]
    assert of(net, "a", QueryFinished) == [QueryFinished(query.id, "load", tuple(e.from_ for e in answers if e.ack),
                                                         tuple(e.from_ for e in answers if not e.ack))]
    # relay factor 1: each ack and answer also came through one other member, counted once
    assert sum(net[n].stats()["relays_forwarded"] for n in "abc") == 6
    assert net["a"].tracker.duplicates == 6
    with pytest.raises(ValueError, match="past the deadline"):
        net["b"].respond(of(net, "b", QueryReceived)[0], b"late", net.now)


def test_push_pull_carries_serf_state_to_a_late_joiner():
    net = cluster(["a", "b", "c"])
    net["c"].leave(net.now)
    net.run(net.now + 10.0)
    net.run(net.now + 40.0)     # memberlist reaps c; Serf keeps it as left (tombstone)
    assert net["a"].engine.node("c") is None and view(net, "a")["c"] == ("left", TAGS["c"])
    net["a"].user_event("old", b"", net.now)
    net.run(net.now + 5.0)
    late = net.add("d")
    late.join([net.names["a"]], net.now)
    net.run(net.now + 5.0)
    # the push/pull's LeftMembers and StatusLTimes told d of c's leave
    core = late.core.members
    assert "c" in core.intents and core.intents.recent("c", SerfMessageType.LEAVE) == \
        net["a"].core.members.members["c"].status_ltime
    assert late.core.members.clock.time() >= net["a"].core.members.clock.time() - 1
    # ignore_old (serf join's default): the old event is not delivered to d
    assert of(net, "d", UserEventReceived) == []
    assert late.core.event_buffer.min_time == net["a"].core.event_buffer.clock.time()
    assert view(net, "d") == {n: ("alive", TAGS[n]) for n in "abd"}


def test_a_join_with_replay_delivers_old_events():
    net = cluster(["a", "b"])
    net["a"].user_event("old", b"1", net.now)
    net.run(net.now + 5.0)
    late = net.add("c")
    late.join([net.names["a"]], net.now, ignore_old=False)
    net.run(net.now + 1.0)
    assert [(e.name, e.payload) for e in of(net, "c", UserEventReceived)] == [("old", b"1")]


def test_a_leave_intent_about_a_live_node_is_refuted():
    net = cluster(["a", "b", "c"])
    b = net["b"]
    before = b.core.members.members["b"].status_ltime
    fake = messages.encode(messages.Leave(ltime=b.core.members.clock.time() + 5, node="b"))
    for target in "bc":
        net["a"].engine.send_user(net.names[target], fake, net.now)
    net.run(net.now + 0.01)
    assert view(net, "c")["b"] == ("leaving", TAGS["b"])
    net.run(net.now + 5.0)
    assert b.core.members.members["b"].status_ltime > before + 5
    for name in "abc":
        assert view(net, name)["b"] == ("alive", TAGS["b"])


def test_outgoing_bytes_are_valid_serf_messages():
    net = cluster(["a", "b", "c"], keys=(K1,))
    net["a"].user_event("e", b"p", net.now)
    net["b"].query("q", b"", net.now, request_ack=True)
    net.run(net.now + 0.2)
    net["b"].respond(of(net, "b", QueryReceived)[0], b"r", net.now)
    net["c"].leave(net.now)
    net.run(net.now + 10.0)
    kinds = set()
    for _t, _src, _dst, data in net.sent:
        for part in _user_and_wire(data, keys=(K1,)):
            kinds.add(type(part).__name__)
    assert {"Join", "Leave", "UserEvent", "Query", "QueryResponse"} <= kinds
    state = messages.decode(net["a"]._local_state(False), SerfLimits())
    assert isinstance(state, messages.SerfPushPull) and state.left_members == ["c"]
    assert set(state.status_ltimes) == {"a", "b", "c"}


def _user_and_wire(data, keys=()):
    """Every message in a datagram: memberlist's decoded, user messages as Serf's."""
    parts, cut = framing.split_messages(framing.open_packet(data, Limits(), keys=keys), Limits())
    assert cut == 0
    out = []
    for p in parts:
        if p[0] == MessageType.USER:
            out.append(messages.decode(p[1:], SerfLimits()))
        else:
            out.append(wire.decode(p, Limits()))
    return out


def test_bad_serf_messages_and_full_queues_are_counted_and_relays_forwarded():
    net = cluster(["a", "b"], max_broadcasts=2)
    a = net["a"]
    for n in range(3):
        a.user_event("e", b"%d" % n, net.now)
    assert len(a.user_events) == 2 and a.stats()["serf_broadcasts_dropped"] == 1
    a.engine.send_user(net.names["b"], b"\x03\xc1", net.now)        # a user event with a bad body
    answer = messages.encode(messages.QueryResponse(ltime=9, id=1, from_="x", payload=b"r"))
    relay = messages.encode_relay(bytes([127, 0, 0, 1]), 7946, "a", answer)
    a.engine.send_user(net.names["b"], relay, net.now)
    start = len(net.sent)
    net.run(net.now + 0.01)
    stats = net["b"].stats()
    assert (stats["serf_messages_bad"], stats["relays_forwarded"]) == (1, 1)
    forwarded = [d for _t, src, dst, d in net.sent[start:] if src == net.names["b"] and dst == net.names["a"]]
    assert any(messages.QueryResponse(ltime=9, id=1, from_="x", payload=b"r") in _user_and_wire(d)
               for d in forwarded)


def test_queries_and_relays_answer_members_at_their_own_address_only():
    """Serf sends a query's ack and answer, and each relayed copy, to the
    address the query names, and a relay to the address its header names:
    a forged query would turn every member into a reflector at a third
    party. Only a member at its listed address is answered or relayed to."""
    net = cluster(["a", "b", "c"])
    victim, start = ("127.0.0.99", 7946), len(net.sent)
    forged = messages.Query(ltime=50, id=7, addr=bytes([127, 0, 0, 99]), port=7946, source_node="b",
                            flags=1, relay_factor=2, timeout=10**9, name="_serf_ping")
    answer = messages.encode(messages.QueryResponse(ltime=50, id=7, from_="a", payload=b""))
    net["a"].engine.send_user(net.names["b"], messages.encode(forged), net.now)
    net["a"].engine.send_user(net.names["c"], messages.encode_relay(bytes([127, 0, 0, 99]), 7946, "x", answer),
                              net.now)
    net["a"].engine.send_user(net.names["c"], messages.encode_relay(bytes([127, 0, 0, 99]), 7946, "b", answer),
                              net.now)
    net.run(net.now + 2.0)
    assert [d for _t, _src, dst, d in net.sent[start:] if dst == victim] == []
    assert (net["b"].stats()["answers_refused"], net["c"].stats()["relays_refused"]) == (1, 2)
    assert net["c"].stats()["relays_forwarded"] == 0


def test_serf_buffers_at_their_bounds_are_counted_in_stats():
    net = cluster(["a", "b"])
    big = messages.encode(messages.UserEvent(ltime=3, name="e", payload=bytes(9 * 1024)))   # over 9 KiB in all
    net["a"].engine.send_user(net.names["b"], big, net.now)
    net.run(net.now + 0.1)
    stats = net["b"].stats()
    assert (stats["user_events_refused"], stats["user_events_forgotten"], stats["queries_refused"],
            stats["intents_evicted"]) == (1, 0, 0, 0)
    assert [e for e in of(net, "b", UserEventReceived)] == []


def test_a_healed_partition_re_merges_by_reconnecting_to_failed_members():
    net = cluster(["a", "b", "c", "d"])
    for other in "abc":
        net.cut_both("d", other)
    net.run(net.now + 45.0)     # d's health is low, so it is slower to find the others failed
    assert {n: view(net, n)["d" if n != "d" else "a"][0] for n in "abcd"} == dict.fromkeys("abcd", "failed")
    net.cut.clear()
    net.run(net.now + 35.0)     # d's next reconnect tick (failed 3 / alive 1: it always tries)
    for name in "abcd":
        assert view(net, name) == {n: ("alive", TAGS[n]) for n in "abcd"}
        assert member_events(net, name, "d" if name != "d" else "a") == ["joined", "failed", "joined"]
    assert net["d"].stats()["reconnects_ok"] >= 1
    assert of(net, "d", JoinDone) == [JoinDone(1, ())]      # reconnects are not joins


def test_a_node_claiming_a_known_name_asks_the_cluster_and_is_in_the_minority():
    net = cluster(["a", "b", "c", "d"])
    impostor = SerfNode(GossipSettings(name="b", advertise_addr="127.0.0.9"), {}, seed=9)
    net.engines[("127.0.0.9", 7946)] = impostor
    impostor.start(net.now)
    impostor.join([net.names["a"]], net.now)
    net.run(net.now + 5.0)
    # a, c and d list b at 127.0.0.2, so they answer no query from 127.0.0.9
    # that calls itself b (a member's queries are answered at its listed
    # address only); with no answers, as with the three Serf would give,
    # the impostor is in the minority
    resolved = [e for _t, e in net.events["b"] if isinstance(e, ConflictResolved)]
    assert resolved == [ConflictResolved(matching=0, responses=0)] and not resolved[0].majority
    assert sum(net[name].stats()["answers_refused"] for name in "acd") == 3
    for name in "acd":
        assert net[name].member("b").addr == "127.0.0.2"


def test_settings_are_checked_and_old_protocols_have_no_queries():
    with pytest.raises(ConfigurationError, match="Serf protocol_version 6 is outside 2-5"):
        SerfSettings(protocol_version=6)
    with pytest.raises(ConfigurationError, match="reconnect_interval must be positive"):
        SerfSettings(reconnect_interval=0)
    old = SerfNode(GossipSettings(name="old"), {"role": "web", "dc": "x"}, SerfSettings(protocol_version=3))
    assert old.engine.settings.vsn() == bytes((1, 5, 2, 2, 5, 3))
    old.start(0.0)
    with pytest.raises(RuntimeError, match="queries need Serf protocol 4 or newer"):
        old.query("q", b"", 0.0)
    proto2 = SerfNode(GossipSettings(name="p2"), {"role": "web", "dc": "x"}, SerfSettings(protocol_version=2))
    proto2.start(0.0)
    assert proto2.member("p2").tags == {"role": "web"}      # below protocol 3 only the role travels


# ------------------------------------------------------ network coordinates

def _acks(net, src, dst):
    """The acks ``src`` sent ``dst``, decoded."""
    out = []
    for _t, s, d, data in net.sent:
        if s == net.names[src] and d == net.names[dst]:
            out += [p for p in _user_and_wire(data) if isinstance(p, wire.Ack)]
    return out


def test_coordinates_follow_the_probes_and_ride_in_every_ack():
    from mcastmember.gossip.serf import estimate_rtt
    net = cluster(["a", "b", "c"], settle=30.0)
    a, b = net["a"], net["b"]
    # the fake network's RTT is 2 ms: the estimates have found it
    for name in "bc":
        assert round(estimate_rtt(a.coordinate(), a.cached_coordinate(name)), 3) == 0.002
    assert a.cached_coordinate("a") == a.coordinate()
    assert a.cached_coordinate("nobody") is None
    # every direct probe answered moved a's coordinate once
    acks = _acks(net, "b", "a") + _acks(net, "c", "a")
    stats = a.stats()
    assert stats["coordinate_updates"] == len(acks) == stats["acks_received"]
    assert (stats["coordinates_cached"], stats["coordinates_bad"], stats["coordinates_refused"]) == (3, 0, 0)
    # b's acks carry its coordinate of the moment: the last one, b's current
    payloads = [ack.payload for ack in _acks(net, "b", "a")]
    assert len(set(payloads)) > len(payloads) // 2
    assert messages.decode_ack_payload(payloads[-1], SerfLimits()) == a.cached_coordinate("b")
    assert b.engine.ack_payload == messages.encode_ack_payload(b.coordinate())


def _node_with(serf, payloads=None):
    """A Net factory: SerfNodes with ``serf`` settings; those named in
    ``payloads`` ack with that payload (and keep no coordinates)."""

    def factory(settings, seed):
        if payloads and settings.name in payloads:
            node = SerfNode(settings, {}, SerfSettings(disable_coordinates=True), seed=seed)
            node.engine.ack_payload = payloads[settings.name]
            return node
        return SerfNode(settings, TAGS.get(settings.name, {}), serf, seed=seed)
    return factory


def test_bad_and_insane_coordinates_are_counted_and_never_cached():
    from mcastmember.gossip.serf.coordinates import new_coordinate
    nan = new_coordinate()
    nan.vec[3] = float("nan")
    payloads = {"x": b"\x02" + messages.encode_ack_payload(new_coordinate())[1:],      # version 2
                "y": messages.encode_ack_payload(nan),
                "z": messages.encode_ack_payload(messages.Coordinate(vec=[0.001, 0.002], error=0.5, height=1e-5)),
                "w": b""}                                                             # coordinates off
    net = Net(factory=_node_with(SerfSettings(), payloads))
    net.cluster(["a", "b", "x", "y", "z", "w"], settle=30.0)
    a = net["a"]
    stats = a.stats()
    assert stats["coordinates_bad"] == len(_acks(net, "x", "a")) > 0
    assert stats["coordinates_refused"] == len(_acks(net, "y", "a")) + len(_acks(net, "z", "a")) > 0
    assert stats["coordinate_updates"] == len(_acks(net, "b", "a")) > 0
    assert stats["coordinates_cached"] == 2
    assert [a.cached_coordinate(n) for n in "xyzw"] == [None] * 4
    assert a.cached_coordinate("b") is not None


def test_reaped_members_leave_the_coordinate_cache():
    net = Net(factory=_node_with(SerfSettings(tombstone_timeout=5.0, reap_interval=2.0)))
    net.cluster(["a", "b", "c"], settle=10.0)
    a = net["a"]
    assert a.cached_coordinate("c") is not None and len(a.coordinates) == 2
    net["c"].leave(net.now)
    net.run(net.now + 20.0)
    assert member_events(net, "a", "c") == ["joined", "left", "reaped"]
    assert a.cached_coordinate("c") is None and len(a.coordinates) == 1
    assert a.stats()["coordinates_cached"] == 2


def test_coordinates_can_be_turned_off():
    net = Net(factory=_node_with(SerfSettings(disable_coordinates=True)))
    net.cluster(["a", "b"], settle=10.0)
    a = net["a"]
    assert {ack.payload for ack in _acks(net, "b", "a")} == {b""}
    with pytest.raises(RuntimeError, match="network coordinates are disabled"):
        a.coordinate()
    assert a.cached_coordinate("b") is None and a.cached_coordinate("a") is None
    stats = a.stats()
    assert (stats["coordinate_updates"], stats["coordinates_cached"], stats["coordinate_resets"]) == (0, 0, 0)
