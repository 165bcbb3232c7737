"""AsyncSerfService (mcastmember.gossip.fronts.aio) on loopback, beside the
threaded SerfService: the same API on asyncio (``async with``, join, leave,
members, listeners, an ``events()`` stream, user events, queries, stats),
the same settings errors from both fronts, and the public GossipMember."""

import asyncio
import base64
import pickle

import pytest

pytest.importorskip("msgpack")

from mcastmember import AsyncSerfService, ConfigurationError, EventsLost, GossipMember, SerfService  # noqa: E402
from mcastmember._runtime.errors import UnknownSetting  # noqa: E402
from mcastmember.gossip.serf.codec import SerfLimits  # noqa: E402
from mcastmember.gossip.serf.layout import MemberStatus  # noqa: E402
from mcastmember.gossip.serf.node import (KeyResult, SerfMemberEvent, QueryAnswer, QueryFinished,  # noqa: E402
                                          QueryReceived, UserEventReceived)
from support import async_wait_until, free_gossip_port, wait_until  # noqa: E402


def view(members):
    return {m.name: (m.addr, m.status.name.lower(), dict(m.tags)) for m in members}


def run(main):
    return asyncio.run(asyncio.wait_for(main(), 30))


async def until(stream, predicate):
    """The events of ``stream`` up to and including the first that matches."""
    seen = []
    async for event in stream:
        seen.append(event)
        if predicate(event):
            return seen
    raise AssertionError(f"the stream ended first: {seen}")


def test_two_async_members_join_see_tags_and_events_and_leave():
    async def main():
        pa, pb = free_gossip_port("127.0.0.1"), free_gossip_port("127.0.0.2")
        async with AsyncSerfService("a", "127.0.0.1", pa, tags={"role": "web"}, seed=1) as a, \
                AsyncSerfService("b", "127.0.0.2", pb, tags={"role": "db"}, seed=2) as b:
            heard = []
            a.add_listener(heard.append)
            stream = a.events()
            done = await b.join([("127.0.0.1", pa)])
            assert (done.joined, done.errors) == (1, ())
            expected = {"a": ("127.0.0.1", "alive", {"role": "web"}),
                        "b": ("127.0.0.2", "alive", {"role": "db"})}
            assert view(await a.wait_for(lambda ms: view(ms) == expected, 5)) == expected
            await b.wait_for(lambda ms: view(ms) == expected, 5)
            b.user_event("deploy", b"v1")
            seen = await until(stream, lambda e: isinstance(e, UserEventReceived))
            assert [(e.kind, e.member.name) for e in seen if isinstance(e, SerfMemberEvent)] \
                == [("joined", "a"), ("joined", "b")]
            assert (seen[-1].name, seen[-1].payload) == ("deploy", b"v1")
            assert (await b.leave()).ok
            await a.wait_for(lambda ms: view(ms)["b"][1] == "left", 5)
            assert [e.kind for e in heard if isinstance(e, SerfMemberEvent) and e.member.name == "b"] \
                == ["joined", "left"]
            stats = a.stats()
            assert stats["connections_accepted"] >= 1 and stats["datagrams_received"] >= 1
            assert stats["bytes_received.tcp"] > 0 and stats["bytes_received.udp"] > 0
            assert (stats["members.alive"], stats["members.left"], stats["subscribers"]) == (1, 1, 2)
            assert [stats[k] for k in ("connections_refused", "connections_too_big",
                                       "listener_events_dropped", "stream_events_dropped")] == [0, 0, 0, 0]
        rest = [event async for event in stream]      # the stop ends the stream
        assert [(e.kind, e.member.name) for e in rest if isinstance(e, SerfMemberEvent)] == [("left", "b")]
    run(main)


def test_an_async_member_and_a_threaded_one_answer_each_others_queries():
    async def main():
        pa, pt = free_gossip_port("127.0.0.1"), free_gossip_port("127.0.0.2")

        def answer(node, tag):
            return lambda e: node.respond(e, tag + e.query.payload) if isinstance(e, QueryReceived) else None

        with SerfService("t", "127.0.0.2", pt, seed=2) as t:
            t_heard = []
            t.add_listener(answer(t, b"t:"))
            t.add_listener(t_heard.append)
            async with AsyncSerfService("a", "127.0.0.1", pa, seed=1) as a:
                a.add_listener(answer(a, b"a:"))
                stream = a.events()
                assert (await a.join([("127.0.0.2", pt)])).joined == 1
                await a.wait_for(lambda ms: len(ms) == 2, 5)
                await asyncio.get_running_loop().run_in_executor(None, wait_until, lambda: len(t.members()) == 2)
                query = a.query("whoami", b"x", request_ack=True, timeout=0.5)
                seen = await until(stream, lambda e: isinstance(e, QueryFinished))
                answers = {(e.from_, e.payload, e.ack) for e in seen
                           if isinstance(e, QueryAnswer) and e.query_id == query.id}
                assert answers == {("t", b"", True), ("t", b"t:x", False), ("a", b"", True), ("a", b"a:x", False)}
                assert (sorted(seen[-1].acks), sorted(seen[-1].responses)) == (["a", "t"], ["a", "t"])
                asked = t.query("whoami", b"y", timeout=0.5)
                await asyncio.get_running_loop().run_in_executor(None, wait_until, lambda: any(
                    isinstance(e, QueryFinished) and e.query_id == asked.id for e in t_heard))
                assert {(e.from_, e.payload) for e in t_heard if isinstance(e, QueryAnswer)
                        and e.query_id == asked.id} == {("a", b"a:y"), ("t", b"t:y")}
    run(main)


def test_a_slow_stream_gets_events_lost_and_a_listener_replay_gets_the_members():
    async def main():
        async with AsyncSerfService("a", "127.0.0.1", free_gossip_port(), seed=1) as a:
            slow, fast = a.events(queue_size=1), a.events()
            for n in range(3):
                a.user_event("e", bytes([n]))
            await until(fast, lambda e: isinstance(e, UserEventReceived) and e.payload == b"\x02")
            replayed = []
            a.add_listener(replayed.append, replay=True)
            assert [(e.kind, e.member.name) for e in replayed] == [("joined", "a")]
            assert a.stats()["stream_events_dropped"] == 3
        events = [event async for event in slow]
        assert [getattr(e, "kind", None) for e in events] == ["joined", "events_lost"]
        assert events[1] == EventsLost(3)
    run(main)


def test_join_and_leave_need_a_started_service_and_events_after_stop_end_at_once():
    async def main():
        a = AsyncSerfService("a", "127.0.0.1", free_gossip_port())
        with pytest.raises(RuntimeError, match="start the service before joining"):
            await a.join([("127.0.0.2", 7946)])
        with pytest.raises(RuntimeError, match="start the service before leaving"):
            await a.leave()
        assert [event async for event in a.events()] == []
        await a.start()
        with pytest.raises(RuntimeError, match="already started"):
            await a.start()
        await a.stop()
        await a.stop()            # twice is fine
    run(main)


def test_streams_past_the_cap_are_refused_and_idle_ones_time_out_on_asyncio_too():
    async def main():
        port = free_gossip_port()
        async with AsyncSerfService("a", "127.0.0.1", port, max_streams=1, tcp_timeout=0.3) as a:
            first, first_w = await asyncio.open_connection("127.0.0.1", port)
            await async_wait_until(lambda: a.stats()["connections_accepted"] >= 1)
            second, second_w = await asyncio.open_connection("127.0.0.1", port)
            assert await second.read(10) == b""          # refused: closed at once
            assert await first.read(10) == b""           # the idle one closed at tcp_timeout
            stats = a.stats()
            assert [stats[k] for k in ("connections_accepted", "connections_refused", "connections_timed_out",
                                       "connections_open")] == [1, 1, 1, 0]
            for writer in (first_w, second_w):
                writer.close()
    run(main)


def test_a_key_rotation_from_an_async_member_reaches_a_threaded_one():
    async def main():
        pa, pt = free_gossip_port("127.0.0.1"), free_gossip_port("127.0.0.2")
        old, new = bytes(16), bytes(range(16))
        with SerfService("t", "127.0.0.2", pt, seed=2, keys=[old]) as t:
            async with AsyncSerfService("a", "127.0.0.1", pa, seed=1, keys=[old]) as a:
                assert (await a.join([("127.0.0.2", pt)])).joined == 1
                await a.wait_for(lambda ms: len(ms) == 2, 5)
                await asyncio.get_running_loop().run_in_executor(None, wait_until, lambda: len(t.members()) == 2)
                stream = a.events()
                results = []
                for op, key in (("install", new), ("use", new), ("remove", old), ("list", b"")):
                    a.key_operation(op, key)
                    seen = await until(stream, lambda e: isinstance(e, KeyResult))
                    results.append((seen[-1].op, seen[-1].ok, seen[-1].num_resp))
                assert results == [("install", True, 2), ("use", True, 2), ("remove", True, 2), ("list", True, 2)]
                assert seen[-1].primary_keys == {base64.b64encode(new).decode(): 2}
                assert t.node.engine.keyring.keys == (new,)
                assert [m.status.name for m in a.members()] == ["ALIVE", "ALIVE"]
    run(main)


FRONTS = {"threads": SerfService, "asyncio": AsyncSerfService}


@pytest.mark.parametrize("front", sorted(FRONTS))
@pytest.mark.parametrize("args, kwargs, message", [
    (("a", "0.0.0.0"), {"advertise": "0.0.0.0"}, "advertise '0.0.0.0' is not a specific address"),
    (("a", "here"), {}, "bind address 'here' is not an IP address"),
    (("a", "127.0.0.1", 0), {}, "port 0 is not between 1 and 65535"),
    (("a", "127.0.0.1", "7946"), {}, "port '7946' is not between 1 and 65535"),
    (("",), {}, "a gossip node needs a name"),
    (("a",), {"max_streams": 0}, "max_streams must be at least 1"),
    (("a",), {"event_queue_size": 0}, "event_queue_size must be at least 1"),
    (("a",), {"max_outgoing_streams": 0}, "max_outgoing_streams must be at least 1"),
    (("a",), {"probe_interval": "1s"}, "probe_interval must be a number, not '1s'"),
    (("a",), {"probe_interval": 0}, "probe_interval must be positive"),
    (("a",), {"enable_compression": 1}, "enable_compression must be True or False, not 1"),
    (("a",), {"indirect_checks": 2.5}, "indirect_checks must be a whole number, not 2.5"),
    (("a",), {"keys": [b"short"]}, "an encryption key must be 16, 24 or 32 bytes, not 5"),
    (("a",), {"keys": ["dc1"]}, "keys must be a list of bytes, not ['dc1']"),
    (("a",), {"label": "dc1"}, "label must be bytes, not 'dc1'"),
    (("a",), {"tell_accused": "all"}, "tell_accused must be one of 'every', 'prober', not 'all'"),
    (("a",), {"tags": ["role"]}, "tags must be a mapping or None, not ['role']"),
    (("a",), {"serf_limits": {}}, "serf_limits must be a SerfLimits, not {}"),
    (("a",), {"reap_interval": -1}, "reap_interval must be positive"),
    (("a",), {"protocol_version": 9}, "Serf protocol_version 9 is outside 2-5"),
])
def test_bad_settings_are_the_same_clear_sentence_from_both_fronts(front, args, kwargs, message):
    with pytest.raises(ConfigurationError) as caught:
        FRONTS[front](*args, **kwargs)
    assert str(caught.value) == message


@pytest.mark.parametrize("front", sorted(FRONTS))
@pytest.mark.parametrize("kwargs, message", [
    ({"probe_intervall": 2}, "got an unexpected keyword argument 'probe_intervall'. Did you mean 'probe_interval'?"),
    ({"bind_adr": "127.0.0.1"}, "got an unexpected keyword argument 'bind_adr'. Did you mean 'bind_addr'?"),
    ({"name": "b"}, "got multiple values for argument 'name'"),
    ({"gossip": {"probe_interval": 2}}, "got an unexpected keyword argument 'gossip': memberlist's settings are "
                                        "keywords of their own now (probe_interval=0.5, not gossip={...})"),
    ({"serf": {"reap_interval": 5}}, "got an unexpected keyword argument 'serf': Serf's settings are keywords of "
                                     "their own now (reap_interval=5.0, not serf={...})"),
])
def test_a_keyword_that_is_no_setting_names_the_front_and_the_likeliest_one(front, kwargs, message):
    """UnknownSetting, a ConfigurationError and the TypeError Python raises
    for a wrong keyword, as the heartbeat fronts raise it."""
    with pytest.raises(TypeError) as caught:
        FRONTS[front]("a", **kwargs)
    assert str(caught.value).endswith(message)
    if "multiple" not in message:
        assert isinstance(caught.value, UnknownSetting)
        assert str(caught.value) == f"{front_name(front)}() {message}"


def front_name(front):
    return FRONTS[front].__name__


@pytest.mark.parametrize("front", sorted(FRONTS))
def test_good_settings_reach_the_node(front):
    svc = FRONTS[front]("a", "127.0.0.1", 7000, keys=[bytes(16)], probe_interval=2, reap_interval=5,
                        max_outgoing_streams=7, serf_limits=SerfLimits(max_tags=9), max_streams=3)
    assert svc.node.engine.settings.keys == (bytes(16),)
    assert svc.node.engine.settings.probe_interval == 2
    assert svc.node.engine.settings.max_streams == 7
    assert svc.node.serf_settings.reap_interval == 5
    assert svc.node.serf_settings.limits == SerfLimits(max_tags=9)
    assert svc._max_streams == 3


def test_the_public_gossip_member():
    member = GossipMember("a", "127.0.0.1", 7946, {"role": "web"}, MemberStatus.ALIVE)
    assert member.to_dict() == {"name": "a", "addr": "127.0.0.1", "port": 7946, "tags": {"role": "web"},
                                "status": "alive"}
    assert member.address == "127.0.0.1"
    with pytest.raises(TypeError):
        member.tags["role"] = "db"           # read-only: the member stays what the node saw
    assert {member, GossipMember("a", "127.0.0.1", 7946, {"role": "web"}, MemberStatus.ALIVE)} == {member}
    assert pickle.loads(pickle.dumps(member)) == member


def test_the_declared_settings_are_every_field_of_the_engines_settings_but_serfs_own():
    """Every field of GossipSettings and SerfSettings is a keyword of the
    fronts (two renamed), but those the fronts' positional arguments give
    and memberlist's versions, which Serf sets from its protocol."""
    import dataclasses

    from mcastmember.gossip.fronts.settings import MEMBERLIST, SERF
    from mcastmember.gossip.memberlist.settings import GossipSettings
    from mcastmember.gossip.serf.node import SerfSettings
    fields = {f.name for f in dataclasses.fields(GossipSettings)}
    assert set(MEMBERLIST.values()) == fields - {"name", "advertise_addr", "advertise_port", "protocol_version",
                                                 "delegate_protocol_min", "delegate_protocol_max",
                                                 "delegate_protocol_version"}
    assert set(SERF.values()) == {f.name for f in dataclasses.fields(SerfSettings)}
