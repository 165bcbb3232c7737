"""Every setting of a gossip member, declared once: what ``SerfService``,
``AsyncSerfService`` (and ``GossipFront`` below them) take as keywords,
``SerfService(name, bind_addr, port, **settings)``.

``SerfServiceSettings`` is the TypedDict type checkers see for those
keywords (``**settings: Unpack[SerfServiceSettings]``); each field's
``Annotated`` metadata is a :class:`~mcastmember._runtime.settings.Setting`
(its default, its description). The runtime's machinery reads it (as it
reads the heartbeat declaration), and from it come: the fronts' signatures,
``help()`` and docstrings (``takes_settings``), the refusal of a mistyped
keyword with the likeliest one meant, each value's check against its
declared type (a ConfigurationError naming the setting), the table in
docs/gossip.md and the defaults of ``mcast-demo gossip``'s flags
(tests/gossip/test_gossip_settings.py keeps both to it).

The settings are the front's own, memberlist's and Serf's, in that order.
Where memberlist's or Serf's are the sans-IO engines' input (the
``GossipSettings`` and ``SerfSettings`` dataclasses), their defaults are
read from those dataclasses, and :func:`front_settings` is the one place
that builds the two from what a front was given. Two names are taken by
another part, so the declaration renames them: memberlist's ``max_streams``
is ``max_outgoing_streams`` (the front's ``max_streams`` bounds the streams
others open to us) and Serf's ``limits`` is ``serf_limits``. Memberlist's
``protocol_version`` and delegate versions are none of a front's: Serf sets
them from its own ``protocol_version`` (serf.Create does the same).

No ``from __future__ import annotations`` here: the annotations are
evaluated as the class is made, so their metadata can be read at run time.
Needs the ``gossip`` extra (msgpack and cryptography), as the fronts do.
"""

import dataclasses
import ipaddress
import os
import socket
from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypedDict, TypeVar, Union

from ..._runtime.errors import ConfigurationError
from ..._runtime.events import EVENT_QUEUE_BYTES
from ..._runtime.settings import Declaration, Setting
from ..memberlist.limits import Limits
from ..memberlist.profiles import DEFAULT_PROFILE, PROFILES, Profile
from ..memberlist.settings import GossipSettings
from ..serf.codec import SerfLimits
from ..serf.settings import SerfSettings
from ..serf.retry_join import DEFAULT_RETRY_INTERVAL, RetryJoin
from ..agent.handlers import (DEFAULT_CONCURRENCY as DEFAULT_HANDLER_CONCURRENCY, DEFAULT_QUEUE as
                              DEFAULT_HANDLER_QUEUE, DEFAULT_TIMEOUT as DEFAULT_HANDLER_TIMEOUT, HandlerSettings,
                              handler_settings)
from ..agent.rpc_server import RpcConfig, RpcLimits
from .addresses import choose_advertise, parse_address, parse_seeds
from .keyring_file import load_keyring
from .tags_file import load_tags

_Class = TypeVar("_Class")

# The positional settings: the address we bind and advertise, and Serf's port.
DEFAULT_BIND_ADDR = "127.0.0.1"
DEFAULT_PORT = 7946
#: the agent RPC's port where ``rpc_addr`` gives none (Serf's)
RPC_PORT = 7373
#: streams others opened to us that are still being read or answered
MAX_INCOMING_STREAMS = 32


def _defaults(kind: type) -> dict[str, Any]:
    """The defaults of a settings dataclass's fields, by name."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(kind):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
    return out


_ML = _defaults(GossipSettings)
RPC_LIMITS = RpcLimits()
_SERF = _defaults(SerfSettings)

KeyringKeys = Union[tuple[bytes, ...], list[bytes]]


class _FrontSettings(TypedDict, total=False):
    tags: Annotated[Union[Mapping[str, str], None], Setting(
        None, "this member's tags, as ``serf members`` shows them", "none")]
    tags_file: Annotated[Union[str, os.PathLike[str], None], Setting(
        None, "Serf's ``-tags-file``: a JSON object of tag names to values, read at start "
              "(instead of ``tags``; a missing file: no tags) and written again, in one "
              "rename, whenever ``set_tags`` changes them", "none")]
    keyring_file: Annotated[Union[str, os.PathLike[str], None], Setting(
        None, "Serf's ``-keyring-file``: a JSON list of base64 keys, the primary first, read at "
              "start (instead of ``keys``) and written again whenever ``serf keys`` changes "
              "them (a failed write is logged and counted ``keyring_file_errors``)", "none")]
    snapshot_path: Annotated[Union[str, os.PathLike[str], None], Setting(
        None, "Serf's ``-snapshot``: a file in Serf's snapshot format (the agent's files are "
              "read), appended as members join, leave and fail and as the clocks move, "
              "compacted past its bound; at start its clocks are restored before any packet "
              "(old user events are not replayed) and its members rejoined: those last seen "
              "alive, then those that had failed (never after our graceful leave)", "none")]
    rejoin: Annotated[bool, Setting(
        False, "Serf's ``-rejoin``: with ``snapshot_path``, rejoin the snapshot's members even "
               "after a graceful leave")]
    max_streams: Annotated[int, Setting(
        MAX_INCOMING_STREAMS, "streams others keep open to us, shared per source: a member's "
                              "host may hold half, another source an eighth; past its share a "
                              "connection is refused (``connections_refused``), at the cap a "
                              "member's host closes the idlest stranger's "
                              "(``connections_evicted``)")]
    event_queue_size: Annotated[Union[int, None], Setting(
        None, "events waiting for the listeners (SerfService) or for each reader of "
              "``events()`` (AsyncSerfService); past it they get one ``EventsLost`` where "
              "events were dropped", "65,536 (SerfService), 1,024 (AsyncSerfService)")]
    event_queue_bytes: Annotated[int, Setting(
        EVENT_QUEUE_BYTES, "the same queues' bound in bytes of the events' names, tags and "
                           "payloads (``serf_event_bytes``), the heartbeat fronts' bound",
        "16,777,216 (16 MiB)")]
    seed: Annotated[Union[int, None], Setting(
        None, "seeds every random choice of the node (tests)", "random")]
    advertise: Annotated[Union[str, None], Setting(
        None, "Serf's ``-advertise``: ``ADDR`` or ``ADDR:PORT`` (``[ADDR]:PORT`` for IPv6) the "
              "others list and reach us at, while the sockets are bound to ``bind_addr`` (behind "
              "NAT, in a container); bound to ``0.0.0.0`` or ``::`` without it, the address the "
              "host's routes send from if it is private (as memberlist picks one), else refused",
        "``bind_addr`` and ``port``")]
    retry_join: Annotated[tuple[str, ...], Setting(
        (), "Serf's ``-retry-join``: seeds (``ADDR[:PORT]``, port 7946 by default) joined in the "
            "background from the start, and again every ``retry_interval`` until an attempt "
            "joins another member (one that reaches only ourselves does not count); each end "
            "is an event, ``RetryJoined`` or ``RetryJoinFailed``", "none")]
    retry_interval: Annotated[float, Setting(
        DEFAULT_RETRY_INTERVAL, "Serf's ``-retry-interval``: the wait after an attempt of "
                                "``retry_join`` that joined nobody, s")]
    retry_max: Annotated[int, Setting(
        0, "Serf's ``-retry-max``: ``retry_join`` gives up (``RetryJoinFailed.gave_up``, logged; "
           "the member stays up) when the first attempt and this many more joined nobody; 0: never")]
    event_handlers: Annotated[tuple[str, ...], Setting(
        (), "Serf's ``-event-handler``: ``[FILTER=]SCRIPT`` texts, each script run by ``/bin/sh -c`` "
            "for the events its filter names (``member-join``, ``member-leave``, ``member-failed``, "
            "``member-update``, ``member-reap``, ``user``, ``user:NAME``, ``query``, ``query:NAME``, "
            "``*``, comma-separated; none: every event) with Serf's environment and stdin; a query's "
            "script that exits 0 answers it with its output", "none")]
    handler_timeout: Annotated[float, Setting(
        DEFAULT_HANDLER_TIMEOUT, "a handler run still going after so long is killed, its process "
                                 "group with it (``handlers_timed_out``), s")]
    handler_concurrency: Annotated[int, Setting(
        DEFAULT_HANDLER_CONCURRENCY, "handler runs going on at once; 1 runs them one after another, "
                                     "in the events' order, as Serf's agent does")]
    handler_queue: Annotated[int, Setting(
        DEFAULT_HANDLER_QUEUE, "handler runs waiting for one of those; past it a run is dropped "
                               "(``handlers_dropped``)")]
    rpc_addr: Annotated[Union[str, None], Setting(
        None, "Serf's ``-rpc-addr``: ``ADDR:PORT`` where the agent's RPC listens, for ``serf "
              "members -rpc-addr=...`` and Serf's RPC clients (``mcast-demo gossip`` listens on "
              "127.0.0.1:7373, as the agent)", "none: no RPC")]
    rpc_auth: Annotated[Union[str, None], Setting(
        None, "Serf's ``-rpc-auth``: the token an RPC client must give before any command but "
              "the handshake (``-rpc-auth=...``)", "none")]
    rpc_max_connections: Annotated[int, Setting(
        RPC_LIMITS.max_connections, "RPC connections open at once, half of them per source; past "
                                    "its share a connection is refused (``rpc_connections_refused``)")]
    rpc_max_request: Annotated[int, Setting(
        RPC_LIMITS.max_request, "the longest RPC request (header and body), bytes; a longer one "
                                "closes its connection (``rpc_requests_too_big``)")]
    rpc_max_pending: Annotated[int, Setting(
        RPC_LIMITS.max_pending, "RPC requests of one connection in progress (a join, a key "
                                "operation); at it the connection is not read until one ends "
                                "(``rpc_pending_full``)")]
    rpc_max_streams: Annotated[int, Setting(
        RPC_LIMITS.max_streams, "RPC streams open at once (``stream``, ``monitor``, a query's "
                                "answers), all connections together; past it one is refused "
                                "(``rpc_streams_refused``)")]
    rpc_stream_queue: Annotated[int, Setting(
        RPC_LIMITS.stream_queue, "stream records waiting to be written to one RPC connection; past "
                                 "it a record is dropped (``rpc_records_dropped``), as the agent "
                                 "drops what a slow subscriber cannot take")]


class _MemberlistSettings(TypedDict, total=False):
    profile: Annotated[Profile, Setting(
        DEFAULT_PROFILE, "Serf's ``-profile``: memberlist's timing defaults for a \"lan\", a "
                         "\"wan\" or a \"local\" (one host) cluster; it sets ``tcp_timeout``, "
                         "``indirect_checks``, ``retransmit_mult``, ``suspicion_mult``, "
                         "``push_pull_interval``, ``probe_timeout``, ``probe_interval``, "
                         "``gossip_nodes``, ``gossip_interval`` and ``gossip_to_the_dead_time`` "
                         "where they are not given (the defaults shown are \"lan\"'s)")]
    tcp_timeout: Annotated[float, Setting(
        _ML["tcp_timeout"], "deadline of a whole TCP stream, from its start, s")]
    indirect_checks: Annotated[int, Setting(
        _ML["indirect_checks"], "members asked to ping one that missed a direct ping")]
    retransmit_mult: Annotated[int, Setting(
        _ML["retransmit_mult"], "a broadcast is sent this many times the log of the members")]
    suspicion_mult: Annotated[int, Setting(
        _ML["suspicion_mult"], "the suspicion timeout's multiplier of the probe interval")]
    suspicion_max_timeout_mult: Annotated[int, Setting(
        _ML["suspicion_max_timeout_mult"], "Lifeguard's suspicion timeout starts at this many "
                                           "times the least and shrinks with confirmations; 1: a "
                                           "fixed timeout (plain SWIM)")]
    push_pull_interval: Annotated[float, Setting(
        _ML["push_pull_interval"], "full state exchange with a random member every so often, "
                                   "s; 0: never")]
    probe_timeout: Annotated[float, Setting(
        _ML["probe_timeout"], "how long a direct ping waits for its ack, s")]
    probe_interval: Annotated[float, Setting(
        _ML["probe_interval"], "one member probed every so often, s")]
    disable_tcp_pings: Annotated[bool, Setting(
        _ML["disable_tcp_pings"], "no ping by TCP beside the indirect ones")]
    nacks: Annotated[bool, Setting(
        _ML["nacks"], "ask indirect probers for nacks (Lifeguard); False: plain SWIM's "
                      "indirect pings")]
    awareness_max_multiplier: Annotated[int, Setting(
        _ML["awareness_max_multiplier"], "Lifeguard's local health: the probe interval is "
                                         "scaled by up to this factor; 1 turns it off")]
    tell_accused: Annotated[Literal["every", "prober"], Setting(
        _ML["tell_accused"], "who also tells a new suspicion straight to the accused: "
                             "\"every\" member that starts suspecting it, or only the "
                             "\"prober\" that accuses in its own name")]
    gossip_nodes: Annotated[int, Setting(
        _ML["gossip_nodes"], "members each gossip round goes to")]
    gossip_interval: Annotated[float, Setting(
        _ML["gossip_interval"], "one gossip round every so often, s")]
    gossip_to_the_dead_time: Annotated[float, Setting(
        _ML["gossip_to_the_dead_time"], "a dead member still gets gossip for so long, s, and "
                                        "is reaped after it")]
    gossip_verify_incoming: Annotated[bool, Setting(
        _ML["gossip_verify_incoming"], "with keys, refuse what is not encrypted")]
    gossip_verify_outgoing: Annotated[bool, Setting(
        _ML["gossip_verify_outgoing"], "with keys, encrypt what we send")]
    enable_compression: Annotated[bool, Setting(
        _ML["enable_compression"], "compress (LZW) what we send")]
    udp_buffer_size: Annotated[int, Setting(
        _ML["udp_buffer_size"], "the largest datagram we send, bytes")]
    dead_node_reclaim_time: Annotated[float, Setting(
        _ML["dead_node_reclaim_time"], "a dead (not left) member's name may move to a new "
                                       "address after so long, s; 0: never")]
    keys: Annotated[KeyringKeys, Setting(
        _ML["keys"], "encryption keys (16, 24 or 32 bytes each), the primary first", "none: "
                     "no encryption")]
    label: Annotated[bytes, Setting(
        _ML["label"], "the label every packet carries (memberlist >= 0.3's ``Label``; no Serf agent sets one)",
        "none")]
    limits: Annotated[Limits, Setting(
        _ML["limits"], "memberlist's wire parsers' bounds", "``Limits()``")]
    max_nodes: Annotated[int, Setting(
        _ML["max_nodes"], "members in the table, ourselves and dead ones included; when full, a "
                          "newcomer takes the place of the one that left or died longest ago "
                          "(``nodes_evicted``)")]
    max_dead_nodes: Annotated[int, Setting(
        _ML["max_dead_nodes"], "dead and left members kept until their reaping; past it the "
                               "oldest is forgotten early (``dead_nodes_evicted``)")]
    max_broadcasts: Annotated[int, Setting(
        _ML["max_broadcasts"], "queued broadcasts, memberlist's and Serf's each")]
    max_broadcast_bytes: Annotated[int, Setting(
        _ML["max_broadcast_bytes"], "bytes of queued broadcasts, memberlist's and Serf's each")]
    max_pending_acks: Annotated[int, Setting(
        _ML["max_pending_acks"], "outstanding acks: our probes and indirect pings we relay")]
    max_outgoing_streams: Annotated[int, Setting(
        _ML["max_streams"], "streams the node opens (push/pulls, TCP pings, reconnects) that "
                            "have not ended")]
    max_datagrams: Annotated[int, Setting(
        _ML["max_datagrams"], "datagrams waiting to be sent")]
    max_events: Annotated[int, Setting(
        _ML["max_events"], "the node's events waiting for the front")]
    ping_events: Annotated[bool, Setting(
        _ML["ping_events"], "an event for every direct ack (always on with coordinates)")]


class _SerfSettings(TypedDict, total=False):
    protocol_version: Annotated[int, Setting(
        _SERF["protocol_version"], "Serf's protocol (2-5); sets memberlist's")]
    broadcast_timeout: Annotated[float, Setting(
        _SERF["broadcast_timeout"], "how long a leave waits for its intent, then memberlist's "
                                    "leave, to go out, s")]
    leave_propagate_delay: Annotated[float, Setting(
        _SERF["leave_propagate_delay"], "how long a leave stays up after memberlist's leave "
                                        "went out, s")]
    reap_interval: Annotated[float, Setting(
        _SERF["reap_interval"], "failed and left members are reaped every so often, s")]
    reconnect_interval: Annotated[float, Setting(
        _SERF["reconnect_interval"], "a failed member is tried again every so often, s")]
    reconnect_timeout: Annotated[float, Setting(
        _SERF["reconnect_timeout"], "a failed member is forgotten after so long, s")]
    tombstone_timeout: Annotated[float, Setting(
        _SERF["tombstone_timeout"], "a left member is forgotten after so long, s")]
    max_failed_members: Annotated[int, Setting(
        _SERF["max_failed_members"], "failed members kept for reconnects; past it the one that "
                                     "failed first is forgotten early (``serf_failed_evicted``)")]
    max_left_members: Annotated[int, Setting(
        _SERF["max_left_members"], "left members kept; past it the one that left first is "
                                   "forgotten early (``serf_left_evicted``)")]
    query_timeout_mult: Annotated[int, Setting(
        _SERF["query_timeout_mult"], "a query's default timeout: this times the gossip interval "
                                     "times the log of the members")]
    query_size_limit: Annotated[int, Setting(
        _SERF["query_size_limit"], "the largest query we send, bytes")]
    query_response_size_limit: Annotated[int, Setting(
        _SERF["query_response_size_limit"], "the largest answer to a query, bytes")]
    user_event_size_limit: Annotated[int, Setting(
        _SERF["user_event_size_limit"], "the largest user event, bytes")]
    serf_limits: Annotated[SerfLimits, Setting(
        _SERF["limits"], "Serf's decoders' bounds", "``SerfLimits()``")]
    replay_on_join: Annotated[bool, Setting(
        _SERF["replay_on_join"], "Serf's ``-replay``: a join (``join()`` unless its ``ignore_old`` "
                                 "says otherwise, and each of ``retry_join``'s) delivers the user "
                                 "events the cluster still holds from before it; off, a joiner "
                                 "ignores them, as ``serf join`` does")]
    disable_coordinates: Annotated[bool, Setting(
        _SERF["disable_coordinates"], "no network coordinates: acks carry none, others' are "
                                      "ignored")]


class SerfServiceSettings(_FrontSettings, _MemberlistSettings, _SerfSettings, total=False):
    """The keyword settings of SerfService, AsyncSerfService and GossipFront,
    with their types (``**settings: Unpack[SerfServiceSettings]``), defaults
    and descriptions."""


_DECLARATION = Declaration(SerfServiceSettings, "Settings (keyword-only; times in seconds):")
#: every setting's metadata, by name, in the declaration's order
SETTINGS: dict[str, Setting] = _DECLARATION.specs
#: the settings that are fields of GossipSettings and SerfSettings, each by its field's name
MEMBERLIST = {name: "max_streams" if name == "max_outgoing_streams" else name
              for name in _MemberlistSettings.__annotations__ if name != "profile"}
SERF = {name: "limits" if name == "serf_limits" else name for name in _SerfSettings.__annotations__}
# What a keyword of the fronts before these settings was, and what to give instead.
_RETIRED = {
    "gossip": "memberlist's settings are keywords of their own now (probe_interval=0.5, not gossip={...})",
    "serf": "Serf's settings are keywords of their own now (reap_interval=5.0, not serf={...})",
}


def takes_settings(cls: type[_Class]) -> type[_Class]:
    """Class decorator of a front: its signature, ``help()`` and docstring
    show every setting, ``event_queue_size`` with the front's own default
    (its ``_default_event_queue``), which the declaration leaves to each."""
    own = getattr(cls, "_default_event_queue", None)
    return _DECLARATION.takes_settings(cls, None if own is None else {"event_queue_size": own})


def settings_table() -> list[str]:
    """docs/gossip.md's table of the settings, line by line."""
    return _DECLARATION.markdown_table()


@dataclasses.dataclass(frozen=True)
class FrontSettings:
    """Everything a gossip front is made of, checked."""

    gossip: GossipSettings
    serf: SerfSettings
    family: socket.AddressFamily
    tags: Mapping[str, str] | None
    tags_file: "str | os.PathLike[str] | None"
    keyring_file: "str | os.PathLike[str] | None"
    max_streams: int
    event_queue_size: int
    event_queue_bytes: int
    seed: int | None
    #: the -retry-join plan the node follows (None: no retry-join)
    retry: RetryJoin | None = None
    #: the event handlers and their bounds
    handlers: HandlerSettings = HandlerSettings()
    #: the agent's RPC (None: none)
    rpc: RpcConfig | None = None


def front_settings(front: str, name: str, bind_addr: str, port: int, settings: Mapping[str, Any],
                   event_queue_size: int | None) -> FrontSettings:
    """The settings of the front called ``front`` (``event_queue_size``: its
    default), or a ConfigurationError saying in one sentence what is wrong,
    naming the setting (the same for both fronts); an UnknownSetting (a
    ConfigurationError and a TypeError) for a keyword that is no setting.
    The keyring file and the tags file, if given, are read here."""
    _DECLARATION.refuse_unknown(front, settings, ("name", "bind_addr", "port"), _RETIRED)
    try:
        ip = ipaddress.ip_address(bind_addr)
    except ValueError:
        raise ConfigurationError(f"bind address {bind_addr!r} is not an IP address") from None
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise ConfigurationError(f"port {port!r} is not between 1 and 65535")
    given = {key: _DECLARATION.check(key, value) for key, value in sorted(settings.items())}
    # The profile's timings where none was given: one given explicitly wins.
    for key, value in PROFILES[given.get("profile", DEFAULT_PROFILE)].items():
        given.setdefault(key, value)
    if given.get("event_queue_size") is None:
        if event_queue_size is None:
            raise ConfigurationError(f"{front} has no default event_queue_size: give one")
        given["event_queue_size"] = event_queue_size
    given = _DECLARATION.with_defaults(given)
    # The bounds the engines' dataclasses do not check under these names.
    for key in ("max_streams", "event_queue_size", "event_queue_bytes", "max_outgoing_streams"):
        if given[key] < 1:
            raise ConfigurationError(f"{key} must be at least 1")
    if given["keyring_file"] is not None:
        if "keys" in settings:
            raise ConfigurationError("give the keys in the keyring file or in the setting 'keys', not both")
        given["keys"] = load_keyring(given["keyring_file"])
    if given["tags_file"] is not None:
        if given["tags"]:          # (as the agent: an empty map is no tags given)
            raise ConfigurationError("give the tags in the tags file or in the setting 'tags', not both")
        given["tags"] = load_tags(given["tags_file"])
    advertise = choose_advertise(bind_addr, port, given["advertise"])
    gossip = GossipSettings(name=name, advertise_addr=advertise[0], advertise_port=advertise[1],
                            **{field: given[key] for key, field in MEMBERLIST.items()})
    serf = SerfSettings(**{field: given[key] for key, field in SERF.items()})
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    return FrontSettings(gossip, serf, family, given["tags"], given["tags_file"], given["keyring_file"],
                         given["max_streams"], given["event_queue_size"], given["event_queue_bytes"], given["seed"],
                         _retry_join(given), handler_settings(given["event_handlers"], given["handler_timeout"],
                                                              given["handler_concurrency"], given["handler_queue"]),
                         _rpc(given))


def _rpc(given: Mapping[str, Any]) -> RpcConfig | None:
    """The agent RPC the settings ask for (checked), None without ``rpc_addr``."""
    for key in ("rpc_max_connections", "rpc_max_request", "rpc_max_pending", "rpc_max_streams", "rpc_stream_queue"):
        if given[key] < 1:
            raise ConfigurationError(f"{key} must be at least 1")
    if given["rpc_addr"] is None:
        return None
    host, port = parse_address(given["rpc_addr"], RPC_PORT, "rpc_addr")
    limits = RpcLimits(given["rpc_max_connections"], given["rpc_max_request"], given["rpc_max_pending"],
                       given["rpc_max_streams"], given["rpc_stream_queue"])
    return RpcConfig(host, port, given["rpc_auth"] or "", limits, tuple(given["event_handlers"]))


def _retry_join(given: Mapping[str, Any]) -> RetryJoin | None:
    """The retry-join plan the settings give (checked), None without seeds."""
    if not given["retry_interval"] > 0:
        raise ConfigurationError(f"retry_interval must be more than 0 seconds, not {given['retry_interval']!r}")
    if given["retry_max"] < 0:
        raise ConfigurationError(f"retry_max must be 0 (never give up) or more, not {given['retry_max']!r}")
    seeds = parse_seeds(given["retry_join"], DEFAULT_PORT)
    return RetryJoin(seeds, given["retry_interval"], given["retry_max"]) if seeds else None


__all__ = ["DEFAULT_BIND_ADDR", "DEFAULT_PORT", "MAX_INCOMING_STREAMS", "MEMBERLIST", "SERF", "SETTINGS",
           "FrontSettings", "SerfServiceSettings", "front_settings", "settings_table", "takes_settings"]
