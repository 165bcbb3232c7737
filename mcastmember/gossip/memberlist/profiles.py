"""Memberlist's three timing profiles (config.go: DefaultLANConfig,
DefaultWANConfig, DefaultLocalConfig), the choice Serf's agent offers as
``-profile lan|wan|local``.

A profile gives the defaults of the timing settings only: a setting given
explicitly wins over it. Times are seconds, as in GossipSettings. The LAN
profile is GossipSettings' own defaults; WAN waits longer for slower,
lossier links (longer timeouts and intervals, one more gossip target);
local is for members on one host (shorter timeouts, fewer indirect checks
and retransmits).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal

Profile = Literal["lan", "wan", "local"]

#: the timing settings a profile sets, in GossipSettings' field names
_LAN: dict[str, float] = {
    "tcp_timeout": 10.0, "indirect_checks": 3, "retransmit_mult": 4, "suspicion_mult": 4,
    "push_pull_interval": 30.0, "probe_timeout": 0.5, "probe_interval": 1.0,
    "gossip_nodes": 3, "gossip_interval": 0.2, "gossip_to_the_dead_time": 30.0,
}

#: each profile's timing settings, by the name ``-profile`` takes
PROFILES: Mapping[str, Mapping[str, float]] = MappingProxyType({
    "lan": MappingProxyType(_LAN),
    "wan": MappingProxyType({**_LAN, "tcp_timeout": 30.0, "suspicion_mult": 6, "push_pull_interval": 60.0,
                             "probe_timeout": 3.0, "probe_interval": 5.0, "gossip_nodes": 4,
                             "gossip_interval": 0.5, "gossip_to_the_dead_time": 60.0}),
    "local": MappingProxyType({**_LAN, "tcp_timeout": 1.0, "indirect_checks": 1, "retransmit_mult": 2,
                               "suspicion_mult": 3, "push_pull_interval": 15.0, "probe_timeout": 0.2,
                               "probe_interval": 1.0, "gossip_interval": 0.1,
                               "gossip_to_the_dead_time": 15.0}),
})
#: Serf's agent's profile when none is named
DEFAULT_PROFILE: Profile = "lan"

__all__ = ["DEFAULT_PROFILE", "PROFILES", "Profile"]
