"""Serf's layer on top of memberlist (serf 0.9.4), as bytes and rules only (sans-IO).

- :mod:`.layout`: Serf's wire numbers and defaults, in one place;
- :mod:`.codec`: Serf's structs as go-msgpack writes them, and :class:`SerfLimits`;
- :mod:`.tags`: tags in the node meta (magic byte 255 + a msgpack map);
- :mod:`.messages`: join/leave intents, user events, queries and responses,
  the push/pull user state, key-management payloads, relays, filters, the
  ping-ack coordinate;
- :mod:`.coordinates`: the network coordinate (Vivaldi) updated from probes,
  and :func:`~.coordinates.estimate_rtt` between two coordinates;
- :mod:`.clock`: the Lamport clock;
- :mod:`.buffers`: the recent-intent, event and query buffers, query filters;
- :mod:`.members`: member statuses from intents and memberlist's events, and
  the push/pull merge (:class:`SerfCore`);
- :mod:`.broadcasts`: the intent, query and event queues and what Serf
  piggybacks on memberlist's packets;
- :mod:`.ping_delegate`: our coordinate in our acks, the acker's cached;
- :mod:`.node`: :class:`~.node.SerfNode`, all of the above wired into the
  gossip engine (its events and Serf's messages each to a handler by type):
  one sans-IO Serf member.

Like :mod:`mcastmember.gossip` it needs the ``gossip`` extra and is never
imported by ``import mcastmember``. Decoders raise
:class:`~mcastmember.gossip.GossipWireError`.
"""

from .clock import LamportClock
from .codec import SerfLimits
from .coordinates import estimate_rtt
from .layout import MemberStatus, SerfMessageType
from .tags import decode_tags, encode_tags

__all__ = ["LamportClock", "MemberStatus", "SerfLimits", "SerfMessageType", "decode_tags", "encode_tags",
           "estimate_rtt"]
