"""Answering Serf's queries, sans-IO: acks, responses, and the internal
queries a Serf node answers by itself (serf/internal_query.go, serf/query.go).

``serf keys -install/-use/-remove/-list`` sends the internal queries
``_serf_install-key``, ``_serf_use-key``, ``_serf_remove-key`` and
``_serf_list-keys`` (payload: type 7 and a :class:`~.messages.KeyRequest`)
to every node and counts the answers (type 8 and a
:class:`~.messages.KeyResponse`): a node that does not answer makes the
command fail. :func:`answer_internal_query` gives the answer Serf would,
changing the :class:`~mcastmember.gossip.memberlist.crypto.Keyring` in place as
memberlist's keyring does, with Serf's messages.
"""

from __future__ import annotations

import base64
import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..memberlist.crypto import Keyring
from ..memberlist.errors import GossipWireError
from ..memberlist.layout import KEY_SIZES
from .buffers import QueryBuffer
from . import messages
from .codec import SerfLimits, go_str
from .events import KeyResult
from .layout import (DEFAULT_QUERY_RESPONSE_SIZE_LIMIT, DEFAULT_QUERY_SIZE_LIMIT, DEFAULT_QUERY_TIMEOUT_MULT,
                     MIN_ENCODED_KEY_LENGTH, QUERY_CONFLICT, QUERY_FLAG_ACK, QUERY_INSTALL_KEY, QUERY_LIST_KEYS,
                     QUERY_REMOVE_KEY, QUERY_USE_KEY)
from .messages import KeyRequest, KeyResponse, Query, QueryResponse, SerfMember, encode, encode_conflict_response

NO_KEYRING = "No keyring to modify (encryption not enabled)"
EMPTY_KEYRING = "Keyring is empty (encryption not enabled)"


def make_ack(query: Query, node: str) -> bytes:
    """The ack a node selected by the query's filters sends at once when the
    query asks for acks (handleQuery)."""
    return encode(QueryResponse(ltime=query.ltime, id=query.id, from_=node, flags=QUERY_FLAG_ACK))


def make_response(query: Query, node: str, payload: bytes,
                  size_limit: int = DEFAULT_QUERY_RESPONSE_SIZE_LIMIT) -> bytes:
    """Our answer to ``query``, to send to its addr:port (Query.Respond).
    Raises ValueError if over the response size limit, as Serf refuses it."""
    raw = encode(QueryResponse(ltime=query.ltime, id=query.id, from_=node, payload=payload))
    if len(raw) > size_limit:
        raise ValueError(f"response exceeds limit of {size_limit} bytes")
    return raw


def default_query_timeout(members: int, gossip_interval: float = 0.2,
                          mult: int = DEFAULT_QUERY_TIMEOUT_MULT) -> float:
    """Serf's default query timeout in seconds: gossip interval x 16 x
    ceil(log10(members + 1)) (query.go DefaultQueryTimeout)."""
    return gossip_interval * mult * math.ceil(math.log10(members + 1))


def new_query(buffer: QueryBuffer, query_id: int, name: str, payload: bytes, node: str, addr: bytes, port: int,
              timeout: float, filters: Sequence[bytes] = (), request_ack: bool = False, relay_factor: int = 0,
              size_limit: int = DEFAULT_QUERY_SIZE_LIMIT) -> tuple[Query, bytes]:
    """Our own query, as Serf.Query makes it: at the current query time, taken
    into the buffer (which moves the clock on), and its bytes to broadcast.
    ``query_id`` is random in Serf (a 31-bit number); ``timeout`` in seconds.
    Raises ValueError if over the query size limit."""
    query = Query(ltime=buffer.clock.time(), id=query_id, addr=addr, port=port, source_node=node,
                  filters=list(filters), flags=QUERY_FLAG_ACK if request_ack else 0, relay_factor=relay_factor,
                  timeout=round(timeout * 1e9), name=name, payload=payload)
    raw = encode(query)
    if len(raw) > size_limit:
        raise ValueError(f"query exceeds limit of {size_limit} bytes")
    buffer.handle(query)
    return query, raw


@dataclass
class PendingQuery:
    """One of our queries still collecting answers (query.go QueryResponse):
    each node's ack and response count once, until ``deadline``."""

    ltime: int
    id: int
    deadline: float
    request_ack: bool
    acks: set[str] = field(default_factory=set)
    responses: set[str] = field(default_factory=set)


class QueryTracker:
    """Our open queries by Lamport time (serf.go ``queryResponse`` and
    ``handleQueryResponse``). ``max_pending`` bounds them (the oldest goes,
    counted in ``evicted``)."""

    def __init__(self, max_pending: int = 1024):
        self.max_pending = max_pending
        self.evicted = 0
        # acks and answers again from a node that gave one (Serf's
        # query_duplicate_acks and query_duplicate_responses)
        self.duplicate_acks = 0
        self.duplicate_responses = 0
        self._pending: dict[int, PendingQuery] = {}

    def __len__(self) -> int:
        return len(self._pending)

    @property
    def duplicates(self) -> int:
        return self.duplicate_acks + self.duplicate_responses

    def open(self, query: Query, now: float) -> PendingQuery:
        """Start collecting answers to ``query`` until its timeout."""
        if len(self._pending) >= self.max_pending:
            del self._pending[next(iter(self._pending))]
            self.evicted += 1
        pending = PendingQuery(query.ltime, query.id, now + query.timeout / 1e9, query.ack)
        self._pending[query.ltime] = pending
        return pending

    def handle(self, response: QueryResponse, now: float) -> str | None:
        """An answer from the network: ``"ack"`` or ``"response"`` if it is the
        first of its kind from that node for an open query, else None (no such
        query, another ID, past the deadline, or a duplicate)."""
        pending = self._pending.get(response.ltime)
        if pending is None or pending.id != response.id or now > pending.deadline:
            return None
        if response.ack:
            if not pending.request_ack:
                return None  # Go has no ack channel then: nothing to deliver
            seen, kind = pending.acks, "ack"
        else:
            seen, kind = pending.responses, "response"
        if response.from_ in seen:
            if response.ack:
                self.duplicate_acks += 1
            else:
                self.duplicate_responses += 1
            return None
        seen.add(response.from_)
        return kind

    def expire(self, now: float) -> list[PendingQuery]:
        """Close and return the queries past their deadline."""
        done = [p for p in self._pending.values() if now > p.deadline]
        for pending in done:
            del self._pending[pending.ltime]
        return done


@dataclass(frozen=True)
class InternalAnswer:
    """The response to send (None: none) and whether the keyring changed (so
    the caller saves its keyring file, as Serf does)."""

    response: bytes | None
    keyring_changed: bool = False


def answer_internal_query(query: Query, node: str, keyring: Keyring | None,
                          member: Callable[[str], SerfMember | None] | None = None,
                          limits: SerfLimits | None = None,
                          size_limit: int = DEFAULT_QUERY_RESPONSE_SIZE_LIMIT) -> InternalAnswer:
    """Serf's answer to one of its internal queries (serfQueries.handleQuery).

    ``keyring`` is None when encryption is off. ``member`` looks a name up for
    the conflict query. ``_serf_ping`` is only acked (:func:`make_ack`), and an
    unknown internal query is not answered.
    """
    limits = limits or SerfLimits()
    if query.name == QUERY_CONFLICT:
        asked = go_str(query.payload)
        if asked == node:
            return InternalAnswer(None)
        found = member(asked) if member is not None else None
        return InternalAnswer(make_response(query, node, encode_conflict_response(found), size_limit))
    if query.name == QUERY_LIST_KEYS:
        return InternalAnswer(_list_keys(query, node, keyring, size_limit))
    if query.name not in (QUERY_INSTALL_KEY, QUERY_USE_KEY, QUERY_REMOVE_KEY):
        return InternalAnswer(None)  # _serf_ping and unknown ones
    response = KeyResponse()
    changed = False
    try:
        request, _end = KeyRequest.decode_body(query.payload, limits, 1)
        key = request.key if request is not None else b""
    except GossipWireError:
        key = None  # Serf answers a bad request with a bare failure
    if key is None:
        pass
    elif keyring is None:
        response.message = NO_KEYRING
    else:
        error = _change_keyring(query.name, keyring, key)
        response.message = error or ""
        response.result = changed = error is None
    return InternalAnswer(make_response(query, node, encode(response), size_limit), changed)


def _change_keyring(name: str, keyring: Keyring, key: bytes) -> str | None:
    """memberlist's keyring operation, with its error texts."""
    if name == QUERY_INSTALL_KEY:
        if len(key) not in KEY_SIZES:
            return "key size must be 16, 24 or 32 bytes"
        keyring.add_key(key)
    elif name == QUERY_USE_KEY:
        if key not in keyring.keys:
            return "Requested key is not in the keyring"
        keyring.use_key(key)
    else:
        if keyring.keys and key == keyring.primary_key:
            return "Removing the primary key is not allowed"
        keyring.remove_key(key)
    return None


def _list_keys(query: Query, node: str, keyring: Keyring | None, size_limit: int) -> bytes:
    """The list-keys answer, cut as keyListResponseWithCorrectSize cuts it to
    fit the response limit (a note in Message says how many are shown)."""
    response = KeyResponse()
    if keyring is None:
        response.message = EMPTY_KEYRING
    else:
        response.keys = [base64.b64encode(k).decode() for k in keyring.keys]
        response.primary_key = base64.b64encode(keyring.primary_key).decode() if keyring.keys else ""
        response.result = True
    total = len(response.keys)
    for shown in range(size_limit // MIN_ENCODED_KEY_LENGTH, -1, -1):
        try:
            return make_response(query, node, encode(response), size_limit)
        except ValueError:
            response.keys = response.keys[:shown]
            response.message = f"truncated key list response, showing first {shown} of {total} keys"
    raise ValueError("Failed to truncate response so that it fits into message")


def count_key_response(result: KeyResult, node: str, payload: bytes, limits: SerfLimits) -> KeyResult:
    """keymanager.go streamKeyResp: ``result`` with one node's answer to a key query counted in."""
    num_err = result.num_err
    try:
        answer = messages.decode(payload, limits)
    except GossipWireError:
        answer = None
    if not isinstance(answer, messages.KeyResponse):
        result.messages[node] = f"Invalid key query response type: {payload!r}"
        return dataclasses.replace(result, num_resp=result.num_resp + 1, num_err=num_err + 1)
    if not answer.result:
        num_err += 1
    if answer.message:
        result.messages[node] = answer.message
    for key in answer.keys:
        result.keys[key] = result.keys.get(key, 0) + 1
    result.primary_keys[answer.primary_key] = result.primary_keys.get(answer.primary_key, 0) + 1
    return dataclasses.replace(result, num_resp=result.num_resp + 1, num_err=num_err)
