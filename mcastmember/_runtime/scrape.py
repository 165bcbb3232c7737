"""What a Prometheus scrape reads of a front, for the collectors of both
wings: its ``stats()``, read on the asyncio front's loop when the scrape
runs on another thread (the metrics server's), and a stats value as an int;
and the Prometheus name of a go-metrics key behind a prefix.

Needs no prometheus_client: the collectors that call it import that.
"""

from __future__ import annotations

import asyncio
import re
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


_NOT_IN_A_NAME = re.compile(r"[^a-zA-Z0-9_:]")
_A_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def metric_name(key: str, prefix: str = "") -> str:
    """The Prometheus name of a go-metrics key (``serf.events.deploy``)
    behind ``prefix``: its parts joined with ``_``, and any other character
    Prometheus refuses in a name made ``_`` (go-metrics' Prometheus sink
    does so for ``.``, ``-``, ``=``, ``/`` and spaces)."""
    return _NOT_IN_A_NAME.sub("_", f"{prefix}_{key}" if prefix else key)


def check_prefix(prefix: str | None) -> str:
    """``prefix`` as :func:`metric_name` takes it ('' for none); ValueError if
    it is not a Prometheus name (``consul``, ``my_app``)."""
    if not prefix:
        return ""
    if not _A_NAME.fullmatch(prefix):
        raise ValueError(f"{prefix!r} is not a Prometheus name: letters, digits, '_' and ':', not "
                         "starting with a digit (Consul's prefix is 'consul')")
    return prefix
