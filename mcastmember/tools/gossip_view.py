"""What ``mcast-demo gossip`` shows: JSON lines, a line per event (pipes and
logs), or the live table on a terminal (``view.TableView``'s drawing, with a
gossip member's columns: name, address, status, tags).

``--json`` carries one object per event per line and nothing else, as
``join --json`` does: ``added``, ``updated`` and ``removed`` (``reason``
``left`` or ``failed``) with the member (``name``, ``addr``, ``port``,
``tags``, ``status``); ``user`` for a user event; ``keyring`` when ``serf
keys`` changed our keyring; ``conflict`` when another node claims our name;
``events_lost`` (with its ``count``) where the listener fell behind.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from .._runtime.events import EventsLost, iso_time
from ..gossip.memberlist.events import NameConflict
from ..gossip.serf.node import ConflictResolved, GossipMember, KeyringChanged, SerfMemberEvent, UserEventReceived
from .view import JsonView, LineView, TableView, host_port

if TYPE_CHECKING:
    import os
    from collections.abc import Mapping
    from typing import TextIO

    from ..gossip.fronts.service import SerfService
    from ..gossip.serf.node import SerfNodeEvent

# Serf's event kinds as join's JSON names them: (event, reason); reaped (a
# left or failed member forgotten) is not a change of the membership
KINDS = {"joined": ("added", None), "updated": ("updated", None), "left": ("removed", "left"),
         "failed": ("removed", "failed")}
STATUS_KIND = {"alive": "added", "leaving": "updated", "left": "removed", "failed": "removed"}


def member_json(member: GossipMember) -> dict[str, Any]:
    return {"name": member.name, "addr": member.addr, "port": member.port, "tags": dict(member.tags),
            "status": member.status.name.lower()}


def event_json(event: SerfNodeEvent | EventsLost, now: float | None = None) -> dict[str, Any] | None:
    """An event as its ``--json`` line, or None for one not shown (queries,
    acks, a join's or a leave's end)."""
    stamp = iso_time(time.time() if now is None else now)
    if isinstance(event, SerfMemberEvent):
        if event.kind not in KINDS:
            return None
        kind, reason = KINDS[event.kind]
        return {"event": kind, "reason": reason, "member": member_json(event.member), "time": stamp}
    if isinstance(event, UserEventReceived):
        return {"event": "user", "name": event.name, "payload": event.payload.decode("utf-8", "replace"),
                "payload_hex": event.payload.hex(), "ltime": event.ltime, "coalesce": event.coalesce,
                "time": stamp}
    if isinstance(event, KeyringChanged):
        return {"event": "keyring", "keys": len(event.keys), "time": stamp}
    if isinstance(event, NameConflict):
        other = event.other
        return {"event": "conflict", "name": other.name, "addr": other.addr, "port": other.port,
                "time": stamp}
    if isinstance(event, ConflictResolved):
        return {"event": "conflict_resolved", "matching": event.matching, "responses": event.responses,
                "majority": event.majority, "time": stamp}
    if isinstance(event, EventsLost):
        return {"event": event.kind, "count": event.count, "time": stamp}
    return None


def show_tags(tags: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(tags.items())) or "-"


def event_text(line: dict[str, Any]) -> str:
    """An event's ``--json`` object as the line view's words."""
    kind = line["event"]
    if "member" in line:
        m = line["member"]
        reason = f" ({line['reason']})" if line["reason"] else ""
        return f"{kind}{reason}: {m['name']} {host_port(m['addr'], m['port'])} tags {show_tags(m['tags'])}"
    if kind == "user":
        return f"user event {line['name']!r}: {line['payload']!r}"
    if kind == "keyring":
        return f"keyring changed: {line['keys']} key(s)"
    if kind == "conflict":
        return f"name conflict: {line['name']} claimed by {host_port(line['addr'], line['port'])}"
    if kind == "events_lost":
        return f"{line['count']} events lost: the listener fell behind"
    return f"name conflict resolved: {line['matching']} of {line['responses']} name us"


def choose_view(json_lines: bool, stream: TextIO) -> GossipJsonView:
    if json_lines:
        return GossipJsonView(stream)
    return GossipTableView(stream) if stream.isatty() else GossipLineView(stream)


def describe(service: SerfService) -> str:
    return f"{service.node.name} on {host_port(service.bind_addr, service.port)}"


class GossipJsonView(JsonView):
    """One JSON object per event per line; nothing else on stdout."""

    def on_event(self, event: SerfNodeEvent | EventsLost) -> None:  # type: ignore[override]
        line = event_json(event)
        if line is not None:
            with self._lock:
                self._out.write(json.dumps(line) + "\n")
                self._out.flush()

    def started(self, service: SerfService, metrics: object = None) -> None:  # type: ignore[override]
        pass

    def stopped(self, service: SerfService) -> None:  # type: ignore[override]
        pass

    def tick(self, service: SerfService) -> None:  # type: ignore[override]
        pass


class GossipLineView(LineView, GossipJsonView):
    """A line per event, for logs and pipes."""

    def on_event(self, event: SerfNodeEvent | EventsLost) -> None:  # type: ignore[override]
        line = event_json(event)
        if line is not None:
            self._say(event_text(line))

    def started(self, service: SerfService, metrics: object = None) -> None:  # type: ignore[override]
        keys = len(service.node.engine.keyring.keys) if service.node.engine.keyring else 0
        self._say(f"gossiping as {describe(service)} (encryption {'on' if keys else 'off'}, "
                  f"tags {show_tags(service.node.tags)})")

    def stopped(self, service: SerfService) -> None:  # type: ignore[override]
        self._say("left the cluster")


class GossipTableView(TableView, GossipLineView):  # type: ignore[misc]  # (a SerfService, not an McastService)
    """The live table: a row per member, by name; the last changes under it."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__(None, stream)  # type: ignore[arg-type]  # (the service is not kept)

    def on_event(self, event: SerfNodeEvent | EventsLost) -> None:  # type: ignore[override]
        line = event_json(event)
        if line is None:
            return
        with self._lock:
            self._changes.append((STATUS_KIND.get(line.get("member", {}).get("status", ""), "updated"),
                                  f"{time.strftime('%H:%M:%S')} {event_text(line)}"))
            self._dirty = True

    def _frame(self, service: SerfService, size: os.terminal_size,  # type: ignore[override]
               changes: list[tuple[str, str]], recent: dict[bytes, str]) -> list[str]:
        width = max(20, size.columns - 1)
        members = service.members()
        stats = service.stats()
        title = f"mcast-demo gossip  {describe(service)}"
        summary = (f"{len(members)} member(s)  datagrams in {stats['datagrams_received']} "
                   f"out {stats['datagrams_sent']}  bad input {stats['bad_input']}  Ctrl-C leaves")
        names = max([4] + [len(m.name) for m in members])
        addrs = max([4] + [len(host_port(m.addr, m.port)) for m in members])
        rows = [(STATUS_KIND.get(m.status.name.lower()),
                 f"{m.name:<{names}}  {host_port(m.addr, m.port):<{addrs}}  "
                 f"{m.status.name.lower():<7}  {show_tags(m.tags)}") for m in members]
        room = max(0, size.lines - 6 - len(changes))
        if len(rows) > room:
            kept = max(0, room - 1)
            rows = rows[:kept] + [(None, f"... and {len(rows) - kept} more (a taller terminal shows them)")]
        header = f"{'name':<{names}}  {'addr':<{addrs}}  {'status':<7}  tags"
        lines = [self._cut(title, width), self._cut(summary, width), "",
                 self._paint("header", self._cut(header, width))]
        lines += [self._paint(kind if kind != "added" else None, self._cut(text, width)) for kind, text in rows]
        lines += ["", "recent changes:" if changes else "no change yet"]
        lines += [self._paint(kind, self._cut(text, width)) for kind, text in changes]
        return lines[:size.lines]


__all__ = ["choose_view", "event_json", "member_json"]
