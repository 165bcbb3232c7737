"""Logging that cannot be turned into a flood by what arrives on the network."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import logging
    from collections.abc import Callable


class RateLimitedLog:
    """Logs a message under a key at most once per ``interval`` seconds,
    adding how many were held back since the last one."""

    def __init__(self, logger: logging.Logger, interval: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._logger = logger
        self._interval = interval
        self._clock = clock
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def log(self, level: int, key: str, message: str, *args: object) -> bool:
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self._interval:
            self._held[key] = self._held.get(key, 0) + 1
            return False
        held = self._held.pop(key, 0)
        self._last[key] = now
        if held:
            message += " (%d more like this in the last %.0f s)"
            args = args + (held, self._interval)
        self._logger.log(level, message, *args)
        return True
