"""mcastmember: cluster membership over UDP multicast, wire-compatible with
Apache Tomcat Tribes.

Names are loaded on first use (PEP 562), so ``import mcastmember`` costs
almost nothing and never imports construct, nor the gossip fronts'
msgpack and cryptography (``SerfService``, ``AsyncSerfService``: the
``gossip`` extra)::

    from mcastmember import McastService
    with McastService(interface="127.0.0.1", ttl=0, member_port=4001) as service:
        service.add_listener(print)
"""

from __future__ import annotations

# typing.TYPE_CHECKING without importing typing (see above): both checkers
# take this name for it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    # What the checkers see: the names __getattr__ loads on first use.
    from .fronts.aio import AsyncMembership as AsyncMembership
    from .engine.config import ServiceConfig as ServiceConfig
    from .wire.errors import ConfigurationError as ConfigurationError
    from .wire.errors import MalformedPacket as MalformedPacket
    from .engine.events import EventKind as EventKind
    from .engine.events import EventsLost as EventsLost
    from .engine.events import MemberEvent as MemberEvent
    from .engine.events import Reason as Reason
    from .engine.member import Member as Member
    from .engine.member import domain_from_text as domain_from_text
    from .engine.packet import decode as decode
    from .engine.packet import encode as encode
    from .engine.packet import implementation as implementation
    from .fronts.service import McastService as McastService
    from .engine.stats import Stats as Stats
    from .engine.table import Membership as Membership
    from .fronts.gossip_service import SerfService as SerfService
    from .fronts.gossip_aio import AsyncSerfService as AsyncSerfService
    from .fronts.gossip_driver import GossipMember as GossipMember

__version__ = "0.1.0"

_EXPORTS = {
    "McastService": "fronts.service",
    "AsyncMembership": "fronts.aio",
    "EventsLost": "engine.events",
    "ServiceConfig": "engine.config",
    "Member": "engine.member",
    "domain_from_text": "engine.member",
    "Membership": "engine.table",
    "MemberEvent": "engine.events",
    "EventKind": "engine.events",
    "Reason": "engine.events",
    "MalformedPacket": "wire.errors",
    "ConfigurationError": "wire.errors",
    "decode": "engine.packet",
    "encode": "engine.packet",
    "implementation": "engine.packet",
    "Stats": "engine.stats",
    # gossip (the ``gossip`` extra: without it, a one-sentence ModuleNotFoundError)
    "SerfService": "fronts.gossip_service",
    "AsyncSerfService": "fronts.gossip_aio",
    "GossipMember": "fronts.gossip_driver",
}

# Spelled out, for the checkers and IDEs (a test keeps it sorted(_EXPORTS)).
__all__ = ["AsyncMembership", "AsyncSerfService", "ConfigurationError", "EventKind", "EventsLost",
           "GossipMember", "MalformedPacket", "McastService", "Member", "MemberEvent", "Membership", "Reason",
           "SerfService", "ServiceConfig", "Stats", "decode", "domain_from_text", "encode", "implementation"]


def __getattr__(name: str) -> object:
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'mcastmember' has no attribute {name!r}")
    from importlib import import_module
    value = getattr(import_module(f".{module_name}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
