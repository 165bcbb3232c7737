"""What a Prometheus scrape reads of a front, for the collectors of both
wings: its ``stats()``, read on the asyncio front's loop when the scrape
runs on another thread (the metrics server's), and a stats value as an int.

Needs no prometheus_client: the collectors that call it import that.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

T = TypeVar("T")

# How long a scrape waits for the asyncio front's loop to read its stats.
LOOP_TIMEOUT_S = 5.0


def read_stats(stats: Callable[[], T], loop: asyncio.AbstractEventLoop | None) -> T:
    """``stats()``, called on ``loop`` when an asyncio front runs there and
    we are on another thread (a scrape), else here."""
    if loop is None or not loop.is_running() or _running_loop() is loop:
        return stats()

    async def read() -> T:
        return stats()
    return asyncio.run_coroutine_threadsafe(read(), loop).result(LOOP_TIMEOUT_S)


def get_int(stats: Mapping[str, int], key: str) -> int:
    """``stats[key]`` as an int, 0 when not counted yet."""
    return int(stats.get(key, 0))


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
