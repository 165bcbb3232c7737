"""The type of ``stats()``: a TypedDict, so that a type checker knows each
counter is an int (``stats["received"] + 1`` checks under ``mypy --strict``),
``implementation`` a str and ``healthy`` a bool. At run time it is a plain
dict, the same keys on both fronts, every one present from the start;
docs/usage.md's Counters section says what each counts. A test keeps this list and
the keys stats() returns the same.
"""

from __future__ import annotations

from typing import TypedDict

# The functional form: several keys have a dot ("removed.shutdown").
Stats = TypedDict("Stats", {
    # the table
    "received": int, "fast_path": int, "slow_path": int, "members": int, "added": int,
    "updated": int, "refreshed_slow": int, "refused": int, "refused_unlisted": int,
    "refused_unauthenticated": int, "local": int, "filtered": int, "shutdown_unknown": int,
    "suspected": int, "suspects_heard": int, "unprobed": int, "pauses": int, "channel_frames": int, "doctor_probes": int,
    "removed.shutdown": int, "removed.expired": int, "removed.filtered": int,
    "removed.stopped": int, "removed.unlisted": int,
    "malformed.not_membership": int, "malformed.truncated": int, "malformed.bad_version": int,
    "malformed.bad_body_length": int, "malformed.bad_end_marker": int,
    "malformed.bad_host_length": int, "malformed.field_overrun": int,
    "malformed.length_mismatch": int, "malformed.oversized": int,
    "auth.no_trailer": int, "auth.bad_trailer": int, "auth.unknown_key": int,
    "auth.bad_mac": int, "auth.replay": int, "auth.skew": int,
    # the engine: sending, sockets, verify, peers and lookups
    "sent": int, "send_errors": int, "receive_errors": int, "socket_reopened": int,
    "internal_errors": int, "unicast_sent": int, "unicast_send_errors": int,
    "verify.kept": int, "verify.failed": int, "verify.timed_out": int,
    "verify.exhausted": int, "verify.deferred": int,
    "peers": int, "peers_refused": int, "lookups_answered": int, "lookups_failed.nxdomain": int,
    "lookups_failed.servfail": int, "lookups_failed.timeout": int,
    "lookups_failed.no_answer": int, "lookups_failed.error": int,
    # the front: listeners, and the TCP listener (tomcat=True)
    "events_dropped": int, "listener_errors": int, "subscribers": int,
    "probe_connections": int, "probe_evicted": int, "probe_refused": int,
    "probe_accept_errors": int, "probe_replies_failed": int, "probe_replies_refused": int,
    "probe_replies_limited": int,
    "probe_frames": int, "probe_acks": int, "probe_rpc_replies": int,
    "probe_state_replies": int, "probe_malformed": int,
    # which codec runs ("compiled" or "python"); False after an internal error
    "implementation": str, "healthy": bool,
})
Stats.__doc__ = """What ``stats()`` returns, for type checkers: every counter an int,
``implementation`` a str, ``healthy`` a bool (a plain dict at run time). The
keys and what each counts: docs/usage.md, Counters."""
