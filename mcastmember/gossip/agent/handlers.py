"""Event handlers as Serf's agent runs them: which events a script is for,
what it is given, what its output answers; the bounds and counters both
runners share.

A handler is ``[FILTER=]SCRIPT`` (Serf's ``-event-handler``): FILTER is a
comma-separated list of ``member-join``, ``member-leave``,
``member-failed``, ``member-update``, ``member-reap``, ``user``,
``user:NAME``, ``query``, ``query:NAME`` or ``*`` (no filter: every
event). A run is ``/bin/sh -c SCRIPT`` with Serf's environment
(``SERF_EVENT``, ``SERF_SELF_NAME``, ``SERF_SELF_ROLE``, ``SERF_TAG_<KEY>``,
and ``SERF_USER_EVENT``/``SERF_USER_LTIME`` or
``SERF_QUERY_NAME``/``SERF_QUERY_LTIME``) and Serf's stdin (a line per
member, or the payload). A query's script that exits 0 with output answers
the query with it. Python callables answer queries too
(``on_query(name, handler)`` on the services).

Beyond Serf's agent, which runs one handler at a time with no time limit
and lets a slow one hold up the member's events: runs are bounded in time
(``handler_timeout``: the run's process group is killed past it) and in
number (``handler_concurrency`` at once, ``handler_queue`` more waiting,
the rest dropped and counted), and each failure is counted and logged.
The runners that start the processes are the fronts' own:
:mod:`.handler_threads` (SerfService) and :mod:`.handler_aio`
(AsyncSerfService).
"""

from __future__ import annotations

import collections
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..._runtime.errors import ConfigurationError
from ..._runtime.ratelimit import RateLimitedLog
from ..serf.events import (MEMBER_EVENT_TYPES, GossipMember, QueryReceived, SerfMemberEvent, UserEventReceived,
                           serf_event_type)
from ..serf.queries import make_response

if TYPE_CHECKING:
    from ..serf.events import SerfNodeEvent
    from ..serf.node import SerfNode

log = logging.getLogger("mcastmember")

#: the events a filter may name, as Serf's agent spells them (EventFilter.Valid)
EVENT_TYPES = (*MEMBER_EVENT_TYPES.values(), "user", "query")
#: the defaults of the bounds (Serf's agent has none: see the module)
DEFAULT_TIMEOUT = 60.0
DEFAULT_CONCURRENCY = 1
DEFAULT_QUEUE = 1024
#: bytes of a run's output kept beside a query's answer, for the log
LOGGED_OUTPUT = 512

#: the counters every front's stats() has: runs by outcome (ok: exit 0 or a
#: callable that returned; failed: another exit status or a callable that
#: raised; timed_out: killed at handler_timeout; not_started: the shell or
#: the callable could not be started; dropped: past the queue), answers to
#: queries (sent, truncated to the response size limit, refused: too late)
HANDLER_COUNTERS = ("handlers_ok", "handlers_failed", "handlers_timed_out", "handlers_not_started",
                    "handlers_dropped", "handler_responses", "handler_responses_truncated",
                    "handler_responses_refused")
#: and the gauges: runs going on, runs waiting for a slot
HANDLER_GAUGES = ("handlers_running", "handlers_waiting")

#: what a Python query handler returns: the answer (bytes or text), or None for none
QueryHandler = Callable[[QueryReceived], Any]

_TAG_NAME = re.compile(r"[^A-Z0-9_]")


# ------------------------------------------------------------------ filters

@dataclass(frozen=True)
class EventScript:
    """One script and one filter of it: ``event`` one of EVENT_TYPES or
    ``*``, ``name`` the user event's or query's name ("" for any)."""

    event: str
    name: str
    script: str

    def wants(self, event_type: str, name: str) -> bool:
        """Whether an event of ``event_type`` (``name``: a user event's or
        query's) runs this script (Serf's EventFilter.Invoke)."""
        if self.event == "*":
            return True
        return self.event == event_type and (not self.name or self.name == name)


def parse_handler(spec: str) -> tuple[EventScript, ...]:
    """``[FILTER=]SCRIPT`` as Serf's agent reads it (the first ``=`` ends
    the filter; ``user:`` with no name is any user event, as there), one
    EventScript per filter; a ConfigurationError of one sentence for a
    filter Serf does not know or no script."""
    if not isinstance(spec, str):
        raise ConfigurationError(f"an event handler is text, [FILTER=]SCRIPT, not {spec!r}")
    filters, equals, script = spec.partition("=")
    if not equals:
        filters, script = "", spec
    if not script.strip():
        raise ConfigurationError(f"event handler {spec!r} has no script: give [FILTER=]SCRIPT")
    out = []
    for one in (filters or "*").split(","):
        event, colon, name = one.partition(":")
        if event not in EVENT_TYPES and event != "*" or colon and event not in ("user", "query"):
            raise ConfigurationError(
                f"event handler {spec!r}: {one!r} is not an event filter (give member-join, member-leave, "
                "member-failed, member-update, member-reap, user, user:NAME, query, query:NAME or *, "
                "comma-separated)")
        out.append(EventScript(event, name, script))
    return tuple(out)


@dataclass(frozen=True)
class HandlerSettings:
    """The handlers a front runs and their bounds, checked."""

    scripts: tuple[EventScript, ...] = ()
    timeout: float = DEFAULT_TIMEOUT
    concurrency: int = DEFAULT_CONCURRENCY
    queue: int = DEFAULT_QUEUE


def handler_settings(specs: Iterable[str], timeout: float, concurrency: int, queue: int) -> HandlerSettings:
    """The settings ``event_handlers``, ``handler_timeout``,
    ``handler_concurrency`` and ``handler_queue``, checked (a
    ConfigurationError of one sentence naming the setting)."""
    if isinstance(specs, str):
        raise ConfigurationError("event_handlers is a list of \"[FILTER=]SCRIPT\" texts, not one text")
    scripts = tuple(s for spec in specs for s in parse_handler(spec))
    if not timeout > 0:
        raise ConfigurationError(f"handler_timeout must be more than 0 seconds, not {timeout!r}")
    if concurrency < 1:
        raise ConfigurationError(f"handler_concurrency must be at least 1, not {concurrency!r}")
    if queue < 0:
        raise ConfigurationError(f"handler_queue must be 0 (no run waits) or more, not {queue!r}")
    return HandlerSettings(scripts, float(timeout), concurrency, queue)


# ------------------------------------------------------------------ what a run is given

def tag_variable(key: str) -> str:
    """The environment variable of tag ``key``: ``SERF_TAG_`` and the key in
    capitals, each character not a capital, a digit or ``_`` made ``_`` (a
    character at a time, as Go's ToUpper maps runes)."""
    upper = "".join(c.upper() if len(c.upper()) == 1 else c for c in key)
    return "SERF_TAG_" + _TAG_NAME.sub("_", upper)


def _clean(text: str) -> str:
    """A field of a member line: tabs and line breaks written as ``\\t`` and ``\\n``."""
    return text.replace("\t", "\\t").replace("\n", "\\n")


def member_lines(members: Iterable[GossipMember]) -> bytes:
    """A member event's stdin: a line per member, NAME, ADDRESS, ROLE and
    TAGS (``k=v,k=v``, by name) separated by tabs."""
    lines = []
    for m in members:
        tags = ",".join(f"{k}={v}" for k, v in sorted(m.tags.items()))
        lines.append(f"{_clean(m.name)}\t{m.addr}\t{_clean(m.tags.get('role', ''))}\t{_clean(tags)}\n")
    return "".join(lines).encode("utf-8", "surrogateescape")


def _payload(data: bytes) -> bytes:
    """A user event's or query's stdin: the payload, a line break added
    when it has none at its end (shells' ``read`` wants one)."""
    return data + b"\n" if data and not data.endswith(b"\n") else data


def environment(event_type: str, self_name: str, self_tags: Mapping[str, str],
                extra: Mapping[str, str] = {}) -> dict[str, str]:
    """The variables a run gets beside the member's own environment."""
    env = {"SERF_EVENT": event_type, "SERF_SELF_NAME": self_name, "SERF_SELF_ROLE": self_tags.get("role", "")}
    for key in sorted(self_tags):
        env[tag_variable(key)] = self_tags[key]
    env.update(extra)
    return env


@dataclass
class Run:
    """One run waiting or going on: a script (``script``, with ``env`` and
    ``stdin``) or a Python query handler (``call``), for ``event_type``;
    ``received`` the query it answers, if it is one."""

    event_type: str
    script: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    stdin: bytes = b""
    call: QueryHandler | None = None
    received: QueryReceived | None = None
    #: when the event reached the runner (time.monotonic)
    offered: float = 0.0

    @property
    def label(self) -> str:
        what = self.script if self.script is not None else getattr(self.call, "__qualname__", repr(self.call))
        return f"{what!r} ({self.event_type})"


# ------------------------------------------------------------------ the bounds

class HandlerCore:
    """The scripts, the Python query handlers, the runs waiting and going on,
    and the counters: what both runners share. Not thread-safe: a runner
    calls it under its own lock (threads) or on its loop."""

    def __init__(self, settings: HandlerSettings) -> None:
        self.settings = settings
        self.query_handlers: dict[str | None, QueryHandler] = {}
        self.counts: dict[str, int] = dict.fromkeys(HANDLER_COUNTERS, 0)
        self.waiting: collections.deque[Run] = collections.deque()
        self.running = 0
        self.closed = False
        self.rate_log = RateLimitedLog(log)

    def set_query_handler(self, name: str | None, handler: QueryHandler | None) -> None:
        if name is not None and not isinstance(name, str):
            raise TypeError(f"a query handler is for a query's name (text) or None (any query), not {name!r}")
        if handler is None:
            self.query_handlers.pop(name, None)
        elif not callable(handler):
            raise TypeError(f"a query handler is a callable, not {handler!r}")
        else:
            self.query_handlers[name] = handler

    @property
    def idle(self) -> bool:
        """No script and no query handler: events need no look."""
        return not self.settings.scripts and not self.query_handlers

    def runs(self, events: Sequence[SerfNodeEvent], self_name: str, self_tags: Mapping[str, str],
             now: float) -> list[Run]:
        """The runs ``events`` ask for, in order. Member events of one kind
        that came together are one run per script with a line each, as the
        agent's coalesced events are."""
        out: list[Run] = []
        pending: tuple[str, list[GossipMember]] | None = None

        def flush() -> None:
            if pending is not None:
                kind, members = pending
                stdin = member_lines(members)
                env = environment(kind, self_name, self_tags)
                out.extend(Run(kind, s.script, env, stdin, offered=now)
                           for s in self.settings.scripts if s.wants(kind, ""))

        for event in events:
            key = serf_event_type(event)
            if key is None:
                continue
            kind, name = key
            if isinstance(event, SerfMemberEvent):
                if pending is not None and pending[0] == kind:
                    pending[1].append(event.member)
                    continue
                flush()
                pending = (kind, [event.member])
                continue
            flush()
            pending = None
            if isinstance(event, UserEventReceived):
                extra = {"SERF_USER_EVENT": name, "SERF_USER_LTIME": str(event.ltime)}
                payload = event.payload
                received = None
            else:
                assert isinstance(event, QueryReceived)
                extra = {"SERF_QUERY_NAME": name, "SERF_QUERY_LTIME": str(event.query.ltime)}
                payload = event.query.payload
                received = event
                call = self.query_handlers.get(name, self.query_handlers.get(None))
                if call is not None:
                    out.append(Run(kind, call=call, received=event, offered=now))
            env = environment(kind, self_name, self_tags, extra)
            out.extend(Run(kind, s.script, env, _payload(payload), received=received, offered=now)
                       for s in self.settings.scripts if s.wants(kind, name))
        flush()
        return out

    def admit(self, run: Run) -> bool:
        """True: start ``run`` now (a slot is taken); else it waits, or is
        dropped past the queue (counted, logged)."""
        if self.closed:
            return False
        if self.running < self.settings.concurrency:
            self.running += 1
            return True
        if len(self.waiting) < self.settings.queue:
            self.waiting.append(run)
            return False
        self.counts["handlers_dropped"] += 1
        self.rate_log.log(logging.WARNING, "dropped", "event handler %s dropped: %d runs going on "
                          "(handler_concurrency) and %d waiting (handler_queue)", run.label, self.running,
                          len(self.waiting))
        return False

    def next(self) -> Run | None:
        """A run ended: the next one waiting takes its slot, or the slot is freed (None)."""
        if self.waiting and not self.closed:
            return self.waiting.popleft()
        self.running -= 1
        return None

    def close(self) -> None:
        """No run starts from now on; those waiting are forgotten."""
        self.closed = True
        self.waiting.clear()

    def stats(self) -> dict[str, int]:
        out = dict(self.counts)
        out["handlers_running"] = self.running
        out["handlers_waiting"] = len(self.waiting)
        return out

    # -------------------------------------------------------- outcomes

    def ended(self, run: Run, status: int | None, output: bytes, errors: bytes, node: SerfNode) -> bytes | None:
        """A script's run ended: ``status`` its exit status (None: killed at the
        time limit), ``output`` the first bytes of its stdout, ``errors`` the
        first of its stderr. Counted and logged; returns its query's answer
        (exit 0 and some output, as the agent answers), None for none. A run
        the member's stop killed is neither."""
        if self.closed:
            log.debug("event handler %s ended with the member (status %s)", run.label, status)
            return None
        if status is None:
            self.counts["handlers_timed_out"] += 1
            self.rate_log.log(logging.WARNING, f"timeout {run.script}", "event handler %s killed: still "
                              "running after %s s (handler_timeout)", run.label, self.settings.timeout)
        elif status != 0:
            self.counts["handlers_failed"] += 1
            self.rate_log.log(logging.WARNING, f"failed {run.script}", "event handler %s exited with status "
                              "%d: %s", run.label, status, _shown(errors or output))
        else:
            self.counts["handlers_ok"] += 1
            log.debug("event handler %s: %s", run.label, _shown(output))
            return self.answer(run, output, node)
        return None

    def not_started(self, run: Run, error: BaseException) -> None:
        self.counts["handlers_not_started"] += 1
        self.rate_log.log(logging.WARNING, f"start {run.script}", "event handler %s could not start: %s",
                          run.label, error)

    def called(self, run: Run, output: object, error: BaseException | None, late: bool,
               node: SerfNode) -> bytes | None:
        """A Python query handler returned ``output`` (``error``: what it
        raised; ``late``: past the time limit); returns its answer, None for none."""
        if error is not None:
            self.counts["handlers_failed"] += 1
            log.warning("query handler %s raised %s", run.label, error,
                        exc_info=(type(error), error, error.__traceback__))
        elif late:
            self.counts["handlers_timed_out"] += 1
            self.rate_log.log(logging.WARNING, f"late {run.label}", "query handler %s returned after %s s "
                              "(handler_timeout): its answer is dropped", run.label, self.settings.timeout)
        else:
            self.counts["handlers_ok"] += 1
            return self.answer(run, output, node)
        return None

    def answer(self, run: Run, output: object, node: SerfNode) -> bytes | None:
        """What a run answers its query with, fitted to the response size
        limit (truncated, counted and logged past it), None for no answer:
        no query, an empty output (as Serf's agent) or not bytes or text."""
        if run.received is None or output is None:
            return None
        if isinstance(output, str):
            output = output.encode("utf-8")
        if not isinstance(output, (bytes, bytearray, memoryview)):
            self.counts["handlers_failed"] += 1
            log.warning("query handler %s returned %s, not bytes, text or None: no answer", run.label,
                        type(output).__name__)
            return None
        data = bytes(output)
        if not data:
            return None
        size_limit = node.serf_settings.query_response_size_limit
        fitted = fit_response(run.received, node.name, data, size_limit)
        if len(fitted) < len(data):
            self.counts["handler_responses_truncated"] += 1
            self.rate_log.log(logging.WARNING, f"truncated {run.label}", "event handler %s answered %d bytes: "
                              "cut to %d (query_response_size_limit %d)", run.label, len(data), len(fitted),
                              size_limit)
        return fitted or None

    def responded(self, run: Run, error: Exception | None) -> None:
        if error is None:
            self.counts["handler_responses"] += 1
        else:
            self.counts["handler_responses_refused"] += 1
            self.rate_log.log(logging.WARNING, f"respond {run.label}", "event handler %s: its answer is "
                              "refused: %s", run.label, error)


def respond(front: Any, run: Run, answer: bytes) -> Exception | None:
    """Answer ``run``'s query through ``front`` (a service's ``respond``);
    what refused it (the member stopped, the query's deadline passed), None if sent."""
    assert run.received is not None
    if not front.running:
        return RuntimeError("the member has stopped")
    try:
        front.respond(run.received, answer)
    except ValueError as exc:
        return exc
    return None


def fit_response(received: QueryReceived, node: str, payload: bytes, size_limit: int) -> bytes:
    """``payload`` cut to the longest start of it whose response message fits
    ``size_limit`` (the whole of it if it fits)."""
    def fits(n: int) -> bool:
        try:
            make_response(received.query, node, payload[:n], size_limit)
        except ValueError:
            return False
        return True

    if fits(len(payload)):
        return payload
    low, high = 0, len(payload)           # fits(low) or nothing fits; not fits(high)
    if not fits(0):
        return b""
    while high - low > 1:
        middle = (low + high) // 2
        if fits(middle):
            low = middle
        else:
            high = middle
    return payload[:low]


def _shown(data: bytes) -> str:
    text = data[:LOGGED_OUTPUT].decode("utf-8", "replace").strip()
    return text or "(no output)"


__all__ = ["DEFAULT_CONCURRENCY", "DEFAULT_QUEUE", "DEFAULT_TIMEOUT", "EVENT_TYPES", "HANDLER_COUNTERS",
           "HANDLER_GAUGES", "EventScript", "HandlerCore", "HandlerSettings", "QueryHandler", "Run",
           "environment", "fit_response", "handler_settings", "member_lines", "parse_handler", "respond",
           "tag_variable"]
