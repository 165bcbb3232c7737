"""The ``label`` check when the seed's answer names no label: it closed the
stream, or refused it with an error.

memberlist >= 0.3 closes a stream whose label it does not take, without a
word, and its replies carry no label header, so the seed's own label cannot
be read off its answer; memberlist 0.2 (Debian's serf agent) reads our label
header as an unknown message type and closes too (or, with a key, answers
that the stream is not encrypted). Asking once more without our label tells
a seed that has none from one that expects another."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...gossip.memberlist import framing
from ...gossip.memberlist import messages
from ...gossip.memberlist.crypto import Keyring
from ...gossip.memberlist.errors import GossipWireError
from ...gossip.memberlist.limits import Limits
from .report import FAIL, hostport

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..gossip_cli import Options
    from .report import CheckName, Status

    Verdict = tuple[CheckName, Status, str, "str | None"]

NO_LABEL_FIX = "leave out --label on this node (or give every member the same label)"
LABEL_FIX = "--label with the cluster's label (the seed's memberlist configuration names it)"


def request(opts: Options, label: bytes) -> bytes:
    """The doctor's push/pull (no node, no Serf state, not a join) with ``label``."""
    keyring = Keyring(opts.keys) if opts.keys else None
    return framing.encode_stream(messages.encode_push_pull(messages.PushPull(False, [], b"")),
                                 keyring=keyring, label=label)


def seed_has_none(opts: Options, seed: tuple[str, int], ask: Callable[[bytes], bytes]) -> Verdict | None:
    """The label verdict when ``seed`` refused our label but answers a
    push/pull without one; None when we have no label or it does not answer
    one without a label either."""
    if not opts.label:
        return None
    try:
        (_, msg), _ = framing.decode_stream(ask(request(opts, b"")), Limits(), keys=opts.keys,
                                            verify_incoming=False)
    except (OSError, GossipWireError):      # refused, closed, or not memberlist's
        return None
    if not isinstance(msg, messages.PushPull):
        return None
    mine = opts.label.decode(errors="replace")
    return ("label", FAIL, f"{hostport(*seed)} refused this node's label {mine!r} and answers without one: "
            "it has no label (memberlist 0.2, as Debian's serf agent, or no label set)", NO_LABEL_FIX)


def closed(opts: Options, seed: tuple[str, int], ask: Callable[[bytes], bytes]) -> Verdict:
    """The label verdict when ``seed`` closed our push/pull without an answer."""
    verdict = seed_has_none(opts, seed, ask)
    if verdict is not None:
        return verdict
    where = hostport(*seed)
    if opts.label:
        mine = opts.label.decode(errors="replace")
        return ("label", FAIL, f"{where} closed the connection without an answer, with this node's label "
                f"{mine!r} and without a label: the labels differ (memberlist >= 0.3 closes a stream whose "
                "label it does not take, and names the label only in its configuration)", LABEL_FIX)
    return ("label", FAIL, f"{where} closed the connection without an answer: it expects a label "
            "(memberlist >= 0.3 closes a stream that lacks its label), or is no memberlist node", LABEL_FIX)


__all__ = ["closed", "request", "seed_has_none"]
