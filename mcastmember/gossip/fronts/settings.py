"""The gossip fronts' settings, checked once for both (SerfService and
AsyncSerfService), so that both refuse the same bad input in the same
words: the memberlist and Serf settings a front may change (``gossip=``,
``serf=``), each checked against the type its dataclass field declares,
and the front's own (address, port, stream slots, event queue bounds).

Needs the ``gossip`` extra (msgpack and cryptography), as the fronts do.
"""

from __future__ import annotations

import ipaddress
import socket
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from ..._runtime.events import EVENT_QUEUE_BYTES
from ..memberlist.limits import Limits
from ..serf.codec import SerfLimits
from ..serf.settings import SerfSettings
from ..memberlist.settings import GossipSettings
from ..._runtime.errors import ConfigurationError


class GossipOptions(TypedDict, total=False):
    """The memberlist settings a front's ``gossip=`` may change: the fields of
    :class:`~mcastmember.gossip.memberlist.settings.GossipSettings` but the three its
    own arguments give (``name``, ``advertise_addr``, ``advertise_port``)."""

    protocol_version: int
    delegate_protocol_min: int
    delegate_protocol_max: int
    delegate_protocol_version: int
    tcp_timeout: float
    indirect_checks: int
    retransmit_mult: int
    suspicion_mult: int
    suspicion_max_timeout_mult: int
    push_pull_interval: float
    probe_timeout: float
    probe_interval: float
    disable_tcp_pings: bool
    nacks: bool
    awareness_max_multiplier: int
    tell_accused: Literal["every", "prober"]
    gossip_nodes: int
    gossip_interval: float
    gossip_to_the_dead_time: float
    gossip_verify_incoming: bool
    gossip_verify_outgoing: bool
    enable_compression: bool
    udp_buffer_size: int
    dead_node_reclaim_time: float
    keys: Iterable[bytes]
    label: bytes
    limits: Limits
    max_nodes: int
    max_dead_nodes: int
    max_broadcasts: int
    max_broadcast_bytes: int
    max_pending_acks: int
    max_streams: int
    max_datagrams: int
    max_events: int
    ping_events: bool


class SerfOptions(TypedDict, total=False):
    """The Serf settings a front's ``serf=`` may change (the fields of
    :class:`~mcastmember.gossip.serf.settings.SerfSettings`)."""

    protocol_version: int
    broadcast_timeout: float
    leave_propagate_delay: float
    reap_interval: float
    reconnect_interval: float
    reconnect_timeout: float
    tombstone_timeout: float
    max_failed_members: int
    max_left_members: int
    query_timeout_mult: int
    query_size_limit: int
    query_response_size_limit: int
    user_event_size_limit: int
    limits: SerfLimits
    disable_coordinates: bool


_OWN = ("name", "advertise_addr", "advertise_port")


def _checked(kind: type[Any], values: Mapping[str, Any], what: str, own: tuple[str, ...] = (),
             front: str = "") -> dict[str, Any]:
    """``values`` for the dataclass ``kind``, each of the type its field
    declares, as one sentence when not (ConfigurationError)."""
    if not isinstance(values, Mapping):
        raise ConfigurationError(f"{what} settings must be a mapping of names to values, not {values!r}")
    hints = typing.get_type_hints(kind)
    out = dict(values)
    for name in sorted(out):
        if name not in hints:
            raise ConfigurationError(f"unknown {what} setting {name!r}")
        if name in own:
            raise ConfigurationError(f"{what} setting {name!r} comes from {front}'s own arguments")
        out[name] = _typed(f"{what} setting {name!r}", hints[name], out[name])
    return out


def _typed(what: str, hint: object, value: Any) -> Any:
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigurationError(f"{what} must be true or false, not {value!r}")
    elif hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigurationError(f"{what} must be a number, not {value!r}")
    elif hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigurationError(f"{what} must be a whole number, not {value!r}")
    elif hint is bytes:
        if not isinstance(value, bytes):
            raise ConfigurationError(f"{what} must be bytes, not {value!r}")
    elif typing.get_origin(hint) is tuple:           # keys: tuple[bytes, ...]
        if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
            raise ConfigurationError(f"{what} must be a list of bytes, not {value!r}")
        value = tuple(value)
        for item in value:
            _typed(what, bytes, item)
    elif isinstance(hint, type) and not isinstance(value, hint):     # Limits, SerfLimits
        raise ConfigurationError(f"{what} must be a {hint.__name__}, not {value!r}")
    return value


@dataclass(frozen=True)
class FrontSettings:
    """Everything a gossip front is made of, checked."""

    gossip: GossipSettings
    serf: SerfSettings
    family: socket.AddressFamily
    max_streams: int
    event_queue_size: int
    event_queue_bytes: int


def front_settings(front: str, name: str, bind_addr: str, port: int, gossip: GossipOptions | None,
                   serf: SerfSettings | SerfOptions | None, max_streams: int,
                   event_queue_size: int, event_queue_bytes: int = EVENT_QUEUE_BYTES) -> FrontSettings:
    """The settings of the front called ``front``, or a ConfigurationError
    saying in one sentence what is wrong (the same for both fronts)."""
    try:
        ip = ipaddress.ip_address(bind_addr)
    except ValueError:
        raise ConfigurationError(f"bind address {bind_addr!r} is not an IP address") from None
    if ip.is_unspecified:
        raise ConfigurationError(f"bind address must be a specific address (it is advertised), not {bind_addr}")
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise ConfigurationError(f"port {port!r} is not between 1 and 65535")
    for what, value in (("max_streams", max_streams), ("event_queue_size", event_queue_size),
                        ("event_queue_bytes", event_queue_bytes)):
        _typed(what, int, value)
        if value < 1:
            raise ConfigurationError(f"{what} must be at least 1")
    overrides = _checked(GossipSettings, gossip or {}, "gossip", _OWN, front)
    settings = GossipSettings(name=name, advertise_addr=bind_addr, advertise_port=port, **overrides)
    if not isinstance(serf, SerfSettings):
        serf = SerfSettings(**_checked(SerfSettings, serf or {}, "serf"))
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    return FrontSettings(settings, serf, family, max_streams, event_queue_size, event_queue_bytes)


__all__ = ["FrontSettings", "GossipOptions", "SerfOptions", "front_settings"]
