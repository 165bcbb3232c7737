# pyright: strict
"""What a user's code does with stats(), checked as a user's would be:
.ci/typecheck runs mypy --strict and pyright (strict) over this file, and
pytest runs it. Self-contained: it imports only mcastmember."""

from __future__ import annotations

import asyncio

from mcastmember import AsyncMembership, McastService, Stats

LOOPBACK = "127.0.0.1"


def summary(stats: Stats) -> str:
    # Each counter is an int to a checker: arithmetic needs no cast.
    received: int = stats["received"] + 1
    lost: int = stats["removed.expired"] + stats["malformed.truncated"] + stats["auth.bad_mac"]
    codec: str = stats["implementation"]
    healthy: bool = stats["healthy"]
    return f"{received - 1} {lost} {codec.upper()} {not healthy}"


def check(stats: Stats) -> None:
    # A dict at run time, with exactly the keys Stats names, each of its type.
    assert isinstance(stats, dict)
    assert set(stats) == set(Stats.__annotations__)
    wrong = {key: type(value).__name__ for key, value in stats.items()
             if type(value) is not Stats.__annotations__[key]}
    assert wrong == {}
    assert summary(stats) == f"0 0 {stats['implementation'].upper()} False"


def test_threaded_stats_are_typed_and_a_plain_dict() -> None:
    check(McastService("228.0.0.4", 45564, interface=LOOPBACK, ttl=0, tomcat=True).stats())


def test_asyncio_stats_are_typed_and_a_plain_dict() -> None:
    async def main() -> Stats:
        return AsyncMembership("228.0.0.4", 45564, interface=LOOPBACK, ttl=0).stats()
    check(asyncio.run(main()))


def test_the_gossip_fronts_are_typed_for_a_user() -> None:
    """Settings as typed dicts, members as GossipMember, stats as ints."""
    from mcastmember import AsyncSerfService, GossipMember, SerfService

    threaded = SerfService("a", LOOPBACK, 7946, probe_interval=0.5, keys=[bytes(16)], reap_interval=5.0)
    probes: int = threaded.stats()["probes"] + 1

    async def main() -> list[GossipMember]:
        return AsyncSerfService("b", LOOPBACK, 7946, tags={"role": "web"}).members()

    members = asyncio.run(main())         # not started: nobody yet
    tags: list[dict[str, str]] = [dict(m.tags) for m in members]
    assert (probes, [m.name for m in members], tags) == (1, [], [])
