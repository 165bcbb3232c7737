"""Serf's own settings for a node (config.go DefaultConfig, the agent's
protocol), checked when made; memberlist's are
:class:`~mcastmember.gossip.memberlist.settings.GossipSettings`."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..._runtime.errors import ConfigurationError
from .codec import SerfLimits
from .layout import (AGENT_PROTOCOL_VERSION, DEFAULT_QUERY_RESPONSE_SIZE_LIMIT, DEFAULT_QUERY_SIZE_LIMIT,
                     DEFAULT_QUERY_TIMEOUT_MULT, DEFAULT_REAP_INTERVAL, DEFAULT_RECONNECT_TIMEOUT,
                     DEFAULT_TOMBSTONE_TIMEOUT, DEFAULT_USER_EVENT_SIZE_LIMIT, PROTOCOL_VERSION_MAX,
                     PROTOCOL_VERSION_MIN)
from .members import DEFAULT_MAX_FAILED_MEMBERS, DEFAULT_MAX_LEFT_MEMBERS


@dataclass(frozen=True)
class SerfSettings:
    """Serf's own settings (config.go DefaultConfig, the agent's protocol)."""

    #: Serf's protocol (the agent's default: 5); sets memberlist's protocol
    #: (ProtocolVersionMap) and the delegate version in the alive's Vsn
    protocol_version: int = AGENT_PROTOCOL_VERSION
    #: how long a leave waits for its intent, then memberlist's leave, to go out
    broadcast_timeout: float = 5.0
    #: how long a leave stays up after memberlist's leave went out
    leave_propagate_delay: float = 1.0
    reap_interval: float = DEFAULT_REAP_INTERVAL
    #: how often a failed member may be tried again (a memberlist join with it)
    reconnect_interval: float = 30.0
    reconnect_timeout: float = DEFAULT_RECONNECT_TIMEOUT
    tombstone_timeout: float = DEFAULT_TOMBSTONE_TIMEOUT
    #: failed members kept (for reconnects) until the reconnect timeout; past
    #: it the one that failed first is forgotten early (``serf_failed_evicted``)
    max_failed_members: int = DEFAULT_MAX_FAILED_MEMBERS
    #: left members kept until the tombstone timeout; past it the one that
    #: left first is forgotten early (``serf_left_evicted``)
    max_left_members: int = DEFAULT_MAX_LEFT_MEMBERS
    query_timeout_mult: int = DEFAULT_QUERY_TIMEOUT_MULT
    query_size_limit: int = DEFAULT_QUERY_SIZE_LIMIT
    query_response_size_limit: int = DEFAULT_QUERY_RESPONSE_SIZE_LIMIT
    user_event_size_limit: int = DEFAULT_USER_EVENT_SIZE_LIMIT
    limits: SerfLimits = field(default_factory=SerfLimits)
    #: no network coordinates: acks carry none, others' are ignored (Serf's DisableCoordinates)
    disable_coordinates: bool = False
    #: the agent's ``replay_on_join`` (``-replay``): a join, unless told
    #: otherwise, and each retry-join deliver the user events the seeds still
    #: hold from before it; off, a joiner ignores them as ``serf join`` does
    replay_on_join: bool = False

    def __post_init__(self) -> None:
        if not PROTOCOL_VERSION_MIN <= self.protocol_version <= PROTOCOL_VERSION_MAX:
            raise ConfigurationError(f"Serf protocol_version {self.protocol_version} is outside "
                                     f"{PROTOCOL_VERSION_MIN}-{PROTOCOL_VERSION_MAX}")
        for name in ("broadcast_timeout", "reap_interval", "reconnect_interval"):
            if not getattr(self, name) > 0:
                raise ConfigurationError(f"{name} must be positive")
        for name in ("leave_propagate_delay", "reconnect_timeout", "tombstone_timeout"):
            if getattr(self, name) < 0:
                raise ConfigurationError(f"{name} cannot be negative")
        for name in ("max_failed_members", "max_left_members"):
            if getattr(self, name) < 1:
                raise ConfigurationError(f"{name} must be at least 1")
