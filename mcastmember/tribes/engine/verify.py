"""The second opinion (verify), decided without I/O.

When a member falls silent past its drop time under ``verify``, the table
keeps it as a suspect and the engine hands it here: a probe of a few TCP
connects to its port decides whether it stays (its port answers: kept for
another drop time) or goes (refused, or nothing answers within the bound).
This module owns those decisions and their bounds: attempts per probe,
sockets in flight, probes per silence, starts per second. The engine asks it
what is due and when, and passes on what the driver reports; the driver
makes the connects (fronts/verify_prober.py, or a task each in asyncio).
"""

from __future__ import annotations

import logging
import math
from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from .member import Member
    from ..._runtime.ratelimit import RateLimitedLog

# The second opinion (verify). A probe is several TCP connects ("attempts")
# within its bound (verify_timeout), a new one every bound / PROBE_ATTEMPTS,
# each given what is left of the bound. Linux retransmits a lost SYN or
# SYN-ACK only after 1 s (its initial retransmission timeout), far past a
# bound of a few hundred ms, so within the bound one connect is one SYN: with
# a share p of the packets lost each way it fails with 1 - (1 - p)^2 (51% at
# 30% loss), and a live member is removed on that luck alone. Six attempts
# all fail with (1 - (1 - p)^2)^6: 1.8% at 30% loss, 18% at 50%. Six keeps
# the gap between attempts (bound / 6: 50 ms by default) a large multiple
# of a LAN's round trip (under 1 ms), so on a healthy network the first
# attempt is answered before the second is due and a probe costs one socket;
# the last attempt still has that gap to be answered in. More attempts
# would share the socket bound among fewer suspects for little more.
PROBE_ATTEMPTS = 6
# Sockets in flight for probes, at most: attempts handed to the front and not
# reported yet, those of probes already decided included (a connect holds
# its socket until the front reports it, whatever the engine decided
# meanwhile). A probe starts only when all its attempts fit, so a probe under
# way always makes its next attempt on time, before any new suspect starts;
# a flood of suspects waits its turn. 48 descriptors are few beside any
# limit (1024 by default), and let MAX_PROBES suspects whose ports never
# answer be probed at once.
MAX_PROBE_SOCKETS = 48
MAX_PROBES = MAX_PROBE_SOCKETS // PROBE_ATTEMPTS
# What a silent member may cost us, whoever named its address (without keys,
# anyone on the network: a forged heartbeat names any host and port). At
# most PROBES_PER_SILENCE probes per member between two of its heartbeats:
# a suspect whose port answers is kept a drop time at a time, and the
# probe that would keep it a PROBES_PER_SILENCE-th time removes it instead
# ("verify.exhausted"): about that many drop times of silence (30 s at the
# default 3 s) outlast any garbage-collection pause, and a process that
# still has not sent a heartbeat is not a member, whatever its kernel
# answers. At most PROBE_RATE probes start in any one second (a sliding
# window, not a token bucket, whose burst and refill could start nearly
# twice that within one second): a flood of suspects waits its turn
# ("verify.deferred"). A probe makes up to PROBE_ATTEMPTS connects (spread
# over verify_timeout; one when the port answers), and at most
# MAX_PROBE_SOCKETS are open at once. A forged member heard again (its
# heartbeats are what a member is) starts a new silence: its budget of
# PROBES_PER_SILENCE is per silence, the rate is what bounds the whole.
PROBES_PER_SILENCE = 10
PROBE_RATE = 32
# An attempt the front has not reported this long after its deadline is
# taken as lost (a front's bug) and its slot freed, so that lost reports
# cannot stall verify for good. Far longer than any live front takes.
LOST_ATTEMPT_S = 1.0


class VerifyProbes:
    """The suspects being probed and the attempts in flight. ``counts`` is
    the engine's counters (``verify.*`` are ours), ``remove(member)`` takes a
    member the probes condemned out of the table, ``log`` warns of attempts
    the driver never reported."""

    def __init__(self, counts: dict[str, int], remove: Callable[[Member], None], log: RateLimitedLog) -> None:
        self._counts, self._remove, self._log = counts, remove, log
        self._probes: dict[bytes, _VerifyProbe] = {}          # identity -> _VerifyProbe of a suspect
        self._attempts: set[ProbeAttempt] = set()       # handed out, not reported yet
        self._starts: deque[float] = deque(maxlen=PROBE_RATE)   # the last probe starts

    def reset(self) -> None:
        """Forget every probe and attempt (the engine stopped)."""
        self._probes = {}
        self._attempts = set()

    @property
    def suspects(self) -> bool:
        """Some suspect is waiting for or under a probe."""
        return bool(self._probes)

    @property
    def busy(self) -> bool:
        """Something to decide: a suspect, or an attempt not reported yet."""
        return bool(self._probes or self._attempts)

    def suspect(self, member: Member, now: float) -> None:
        """``member`` fell silent: probe it (its first probe of this silence)."""
        self._probes[member.identity] = _VerifyProbe(member, now)

    def due(self, now: float, bound: float) -> list[ProbeAttempt]:
        """The probe attempts to make now, each probe's ``bound`` (the
        verify timeout) from its start (see PROBE_ATTEMPTS): for each, try
        a TCP connect to ``attempt.member``'s address and port, close it at
        once, and report with ``on_probe``; give up when ``attempt.deadline``
        passes (on the clock that gives the engine its times;
        ``attempt.timeout`` is the same, counted from ``now``). Report every
        attempt once, whatever the engine decided meanwhile: until then it
        counts against MAX_PROBE_SOCKETS."""
        due: list[ProbeAttempt] = []
        waiting: list[_VerifyProbe] = []
        for probe in self._probes.values():
            if probe.deadline is None:
                if now >= probe.at:
                    waiting.append(probe)
            elif probe.made < PROBE_ATTEMPTS and probe.at <= now < probe.deadline:
                due.append(self._attempt(probe, now, bound))
        if waiting:
            reserved = self._sockets_reserved()
            waiting.sort(key=lambda probe: probe.at)        # the longest waiting first
            for k, probe in enumerate(waiting):
                if self._next_start() > now:
                    for late in waiting[k:]:
                        if not late.deferred:
                            late.deferred = True
                            self._counts["verify.deferred"] += 1
                    break
                if reserved + PROBE_ATTEMPTS > MAX_PROBE_SOCKETS:
                    break
                self._starts.append(now)
                reserved += PROBE_ATTEMPTS
                probe.deadline = now + bound
                due.append(self._attempt(probe, now, bound))
        return due

    def _attempt(self, probe: _VerifyProbe, now: float, bound: float) -> ProbeAttempt:
        assert probe.deadline is not None       # the probe is under way
        probe.made += 1
        # The next attempt's time, on the probe's own grid: a late wake-up
        # delays one attempt, not the ones after it.
        probe.at = probe.deadline - bound * (PROBE_ATTEMPTS - probe.made) / PROBE_ATTEMPTS
        attempt = ProbeAttempt(probe, probe.deadline - now)
        self._attempts.add(attempt)
        return attempt

    def _next_start(self) -> float:
        """When the rate allows the next probe start: at once while fewer
        than PROBE_RATE started in the last second, else a second after the
        oldest of the last PROBE_RATE."""
        if len(self._starts) < PROBE_RATE:
            return -math.inf
        return self._starts[0] + 1.0

    def _sockets_reserved(self) -> int:
        """Attempts in flight, and those the probes under way may still make."""
        return len(self._attempts) + sum(PROBE_ATTEMPTS - probe.made
                                         for probe in self._probes.values()
                                         if probe.deadline is not None)

    def deadline(self) -> float:
        """When verify needs the driver next: an attempt or a bound due, a
        waiting suspect's turn (only while there is room to start it: else
        the report that frees a slot wakes the driver, which would spin
        meanwhile), an unreported attempt to give up on."""
        soonest = math.inf
        room = self._sockets_reserved() + PROBE_ATTEMPTS <= MAX_PROBE_SOCKETS
        token = self._next_start()
        for probe in self._probes.values():
            if probe.deadline is not None:
                soonest = min(soonest, probe.deadline,
                              probe.at if probe.made < PROBE_ATTEMPTS else math.inf)
            elif room:
                soonest = min(soonest, max(probe.at, token))
        for attempt in self._attempts:
            soonest = min(soonest, attempt.deadline + LOST_ATTEMPT_S)
        return soonest

    def report(self, attempt: ProbeAttempt, answered: bool | None, now: float, drop: float) -> None:
        """``attempt`` (from ``probes_due``) ended: ``answered`` True when the
        port accepted the connection, False when it was refused, None when
        nothing answered by its deadline. The first acceptance keeps the
        member for another drop time (then it is probed again, unless
        heard), but that of its PROBES_PER_SILENCE-th probe since it was
        last heard removes it ("verify.exhausted"); a refusal (nothing
        listens there) removes it ("expired") at once, as does the probe's
        bound passing with no answer
        (``verify.timed_out``, whichever clock ran out: the last attempt's or
        the engine's). The report of a probe already decided only frees its
        socket slot. ``drop`` is the drop time: how long an answered probe
        keeps its member."""
        if attempt not in self._attempts:
            return                      # reported before, from before a stop, or given up as lost
        self._attempts.discard(attempt)
        probe = attempt.probe
        identity = probe.member.identity
        if self._probes.get(identity) is not probe or probe.deadline is None:
            return                      # decided already, heard meanwhile, or gone
        if answered and probe.number >= PROBES_PER_SILENCE:
            self._counts["verify.exhausted"] += 1
            self._confirm(identity)
        elif answered:
            self._counts["verify.kept"] += 1
            self._probes[identity] = _VerifyProbe(probe.member, now + drop, probe.number + 1)
        elif answered is False:
            self._counts["verify.failed"] += 1
            self._confirm(identity)
        elif probe.made == PROBE_ATTEMPTS and not any(a.probe is probe for a in self._attempts):
            self._counts["verify.timed_out"] += 1
            self._confirm(identity)

    def judge(self, now: float, is_suspect: Callable[[bytes], bool]) -> None:
        """Drop the probes of members heard again (no longer ``is_suspect``),
        remove those whose bound passed, forget attempts never reported."""
        for identity, probe in list(self._probes.items()):
            if not is_suspect(identity):
                del self._probes[identity]          # heard again, or said goodbye
            elif probe.deadline is not None and now >= probe.deadline:
                self._counts["verify.timed_out"] += 1
                self._confirm(identity)
        lost = [a for a in self._attempts if now >= a.deadline + LOST_ATTEMPT_S]
        if lost:
            self._attempts.difference_update(lost)
            self._log.log(logging.WARNING, "probe-lost", "%d probe attempts were never "
                          "reported by the driver: their sockets are no longer counted",
                          len(lost))

    def _confirm(self, identity: bytes) -> None:
        self._remove(self._probes.pop(identity).member)


class _VerifyProbe:
    """A suspect's second opinion: when it (under way: its next attempt) is
    due; under way, when its bound ends and how many attempts it made;
    which probe of the member's silence it is (from 1), whether it had to
    wait for PROBE_RATE."""

    __slots__ = ("member", "at", "deadline", "made", "number", "deferred")

    def __init__(self, member: Member, at: float, number: int = 1) -> None:
        self.member, self.at, self.number = member, at, number
        self.deadline: float | None = None
        self.made = 0
        self.deferred = False


class ProbeAttempt:
    """One TCP connect of a suspect's probe, as ``probes_due`` hands it to
    the driver: connect to ``member``, report with ``on_probe`` by
    ``deadline`` at the latest (``timeout`` seconds after it was handed out)."""

    __slots__ = ("probe", "member", "timeout", "deadline")

    def __init__(self, probe: _VerifyProbe, timeout: float) -> None:
        assert probe.deadline is not None       # the probe is under way
        self.probe, self.member = probe, probe.member
        self.timeout, self.deadline = timeout, probe.deadline

    def __repr__(self) -> str:
        return f"ProbeAttempt({self.member.address}:{self.member.port}, timeout={self.timeout:.3f})"
