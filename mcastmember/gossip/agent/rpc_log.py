"""The agent RPC's ``monitor``: the member's log lines as the agent writes
them (``2006/01/02 15:04:05 [INFO] text``), at Serf's levels, taken from
the ``mcastmember`` logger by a filter."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

#: Serf's log levels, lowest first, and the Python level each starts at
LOG_LEVELS = {"TRACE": 0, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
              "ERR": logging.ERROR}


def log_line(levelno: int, message: str, when: float | None = None) -> str:
    """A log line as the agent writes them: ``2006/01/02 15:04:05 [INFO] text``."""
    level = "ERR" if levelno >= logging.ERROR else "WARN" if levelno >= logging.WARNING else \
        "INFO" if levelno >= logging.INFO else "DEBUG" if levelno >= logging.DEBUG else "TRACE"
    stamp = time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(when))
    return f"{stamp} [{level}] {message}"


class LogFeed(logging.Filter):
    """The ``mcastmember`` logger's lines, as the agent writes them, to a
    callable (the front's: it hands them to its server on its own thread).
    A filter on the logger, never a handler: a handler would count as the
    application's logging being configured, and Python's last-resort
    output of warnings (when it is not) would stop. Passes every record;
    those below every monitor's level are skipped here, cheaply."""

    def __init__(self, sink: Callable[[int, str], None], least: Callable[[], int | None]) -> None:
        super().__init__()
        self._sink = sink
        self._least = least

    def filter(self, record: logging.LogRecord) -> bool:
        least = self._least()
        if least is not None and record.levelno >= least:
            try:
                self._sink(record.levelno, log_line(record.levelno, record.getMessage(), record.created))
            except Exception:       # a log line never fails its caller
                pass
        return True


__all__ = ["LOG_LEVELS", "LogFeed", "log_line"]
