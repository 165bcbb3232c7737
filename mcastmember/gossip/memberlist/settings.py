"""The gossip engine's settings: memberlist's LAN defaults (config.go
DefaultLANConfig, 0.2.2), in seconds, plus the engine's own bounds."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Literal

from ..._runtime.errors import ConfigurationError
from . import layout
from .limits import Limits

#: GossipSettings.tell_accused's choices, the default first
TELL_ACCUSED = ("every", "prober")


@dataclass(frozen=True)
class GossipSettings:
    """One gossip member's settings. Times are seconds. Every default is
    memberlist's ``DefaultLANConfig`` except ``protocol_version`` (2, what
    Serf 0.9.4 configures memberlist with) and the bounds, which memberlist
    does not have."""

    #: our node name, unique in the cluster
    name: str
    #: the address and port others reach us at (memberlist's advertise address)
    advertise_addr: str = "127.0.0.1"
    advertise_port: int = 7946
    #: the memberlist protocol we speak (Serf 0.9.4: 2); we understand 1..5
    protocol_version: int = 2
    #: the delegate's (Serf's) protocol range and version, sent in Vsn
    delegate_protocol_min: int = 0
    delegate_protocol_max: int = 0
    delegate_protocol_version: int = 0
    tcp_timeout: float = 10.0
    indirect_checks: int = 3
    retransmit_mult: int = 4
    suspicion_mult: int = 4
    #: Lifeguard's suspicion timeout starts at this many times the minimum and
    #: shrinks with confirmations; 1: a fixed timeout (plain SWIM)
    suspicion_max_timeout_mult: int = 6
    push_pull_interval: float = 30.0
    probe_timeout: float = 0.5
    probe_interval: float = 1.0
    disable_tcp_pings: bool = False
    #: ask indirect probers for nacks (Lifeguard; memberlist always does with
    #: peers of protocol >= 4); False: plain SWIM's indirect pings
    nacks: bool = True
    #: Lifeguard's local health awareness: the probe interval is scaled by up
    #: to this factor; 1 turns it off (plain SWIM)
    awareness_max_multiplier: int = 8
    #: Beyond memberlist, who also sends a new suspicion straight to the
    #: accused, besides gossiping it. "every": each member that starts
    #: suspecting it (one datagram each, N at the accused: what keeps false
    #: "failed" marks near zero at heavy loss). "prober": only a member that
    #: accuses in its own name (its probe failed, or a push/pull listed the
    #: node suspect or dead, which makes the merging member the accuser as
    #: in memberlist), and members whose own latest probes are failing. See
    #: docs/gossip.md, "Suspicions told to the accused".
    tell_accused: Literal["every", "prober"] = "every"
    gossip_nodes: int = 3
    gossip_interval: float = 0.2
    gossip_to_the_dead_time: float = 30.0
    gossip_verify_incoming: bool = True
    gossip_verify_outgoing: bool = True
    enable_compression: bool = True
    udp_buffer_size: int = 1400
    #: a dead (not left) node's name may move to a new address after this; 0: never
    dead_node_reclaim_time: float = 0.0
    #: encryption keys, the primary first (none: no encryption)
    keys: tuple[bytes, ...] = ()
    #: the label header (memberlist >= 0.3); empty: none
    label: bytes = b""
    #: the wire parsers' bounds
    limits: Limits = field(default_factory=Limits)
    # -- the engine's own bounds (memberlist has none), each counted when hit --
    #: nodes in the table, ourselves and dead ones included; when it is
    #: full, a newcomer takes the place of the node that became dead or left
    #: longest ago (``nodes_evicted``), and is refused only if none is
    max_nodes: int = 16_384
    #: dead and left nodes kept until their reaping (gossip_to_the_dead_time);
    #: past it the oldest is forgotten early (``dead_nodes_evicted``)
    max_dead_nodes: int = 4096
    #: queued broadcasts, memberlist's and user ones each
    max_broadcasts: int = 4096
    max_broadcast_bytes: int = 4 * 1024 * 1024
    #: outstanding ack handlers (our probes and indirect pings we relay)
    max_pending_acks: int = 1024
    #: TCP streams we asked the front to open and that have not ended
    max_streams: int = 128
    #: datagrams waiting for the front to take them
    max_datagrams: int = 4096
    #: events waiting for the front to take them
    max_events: int = 65_536
    #: emit a PingCompleted event (with the ack's payload) for every direct ack
    ping_events: bool = False

    def __post_init__(self) -> None:
        if not self.name:
            raise ConfigurationError("a gossip node needs a name")
        try:
            ipaddress.ip_address(self.advertise_addr)
        except ValueError:
            raise ConfigurationError(f"advertise_addr {self.advertise_addr!r} is not an IP address") from None
        if not 0 < self.advertise_port < 65536:
            raise ConfigurationError(f"advertise_port {self.advertise_port} is not a port (1-65535)")
        if not layout.PROTOCOL_VERSION_MIN <= self.protocol_version <= layout.PROTOCOL_VERSION_MAX:
            raise ConfigurationError(f"protocol_version {self.protocol_version} is outside "
                                     f"{layout.PROTOCOL_VERSION_MIN}-{layout.PROTOCOL_VERSION_MAX}")
        for name in ("tcp_timeout", "probe_timeout", "probe_interval", "gossip_interval"):
            if not getattr(self, name) > 0:
                raise ConfigurationError(f"{name} must be positive")
        for name in ("push_pull_interval", "gossip_to_the_dead_time", "dead_node_reclaim_time"):
            if getattr(self, name) < 0:
                raise ConfigurationError(f"{name} cannot be negative")
        for name in ("indirect_checks", "gossip_nodes"):
            if getattr(self, name) < 0:
                raise ConfigurationError(f"{name} cannot be negative")
        for name in ("retransmit_mult", "suspicion_mult", "suspicion_max_timeout_mult",
                     "awareness_max_multiplier", "max_nodes", "max_dead_nodes", "max_broadcasts", "max_pending_acks",
                     "max_streams", "max_datagrams", "max_events"):
            if getattr(self, name) < 1:
                raise ConfigurationError(f"{name} must be at least 1")
        if self.tell_accused not in TELL_ACCUSED:
            raise ConfigurationError(f"tell_accused must be one of {', '.join(TELL_ACCUSED)}, "
                                     f"not {self.tell_accused!r}")
        if self.udp_buffer_size < 64:
            raise ConfigurationError("udp_buffer_size must be at least 64 bytes")
        if self.max_broadcast_bytes < self.udp_buffer_size:
            raise ConfigurationError("max_broadcast_bytes must hold at least one packet's worth")
        for key in self.keys:
            if len(key) not in layout.KEY_SIZES:
                raise ConfigurationError(f"an encryption key must be 16, 24 or 32 bytes, not {len(key)}")
        if len(self.label) > layout.LABEL_MAX_SIZE:
            raise ConfigurationError(f"label is at most {layout.LABEL_MAX_SIZE} bytes, not {len(self.label)}")

    @property
    def encryption_version(self) -> int:
        """net.go encryptionVersion: 0 for protocol 1, else 1."""
        return layout.ENCRYPTION_VERSION_PADDED if self.protocol_version == 1 else layout.ENCRYPTION_VERSION_PLAIN

    def vsn(self) -> bytes:
        """memberlist.go BuildVsnArray: pmin, pmax, pcur, dmin, dmax, dcur."""
        return bytes((layout.PROTOCOL_VERSION_MIN, layout.PROTOCOL_VERSION_MAX, self.protocol_version,
                      self.delegate_protocol_min, self.delegate_protocol_max, self.delegate_protocol_version))
