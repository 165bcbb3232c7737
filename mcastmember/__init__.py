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
    from .tribes.fronts.aio import AsyncMcastService as AsyncMcastService
    from .tribes.fronts.aio import AsyncMembership as AsyncMembership
    from .tribes.engine.config import ServiceConfig as ServiceConfig
    from ._runtime.errors import ConfigurationError as ConfigurationError
    from .tribes.wire.errors import MalformedPacket as MalformedPacket
    from .tribes.engine.events import EventKind as EventKind
    from ._runtime.events import EventsLost as EventsLost
    from .tribes.engine.events import MemberEvent as MemberEvent
    from .tribes.engine.events import Reason as Reason
    from .tribes.engine.member import Member as Member
    from .tribes.engine.member import domain_from_text as domain_from_text
    from .tribes.engine.packet import decode as decode
    from .tribes.engine.packet import encode as encode
    from .tribes.engine.packet import implementation as implementation
    from .tribes.fronts.service import McastService as McastService
    from .tribes.engine.stats import Stats as Stats
    from .tribes.engine.table import Membership as Membership
    from .gossip.fronts.service import SerfService as SerfService
    from .gossip.fronts.aio import AsyncSerfService as AsyncSerfService
    from .gossip.fronts.driver import GossipMember as GossipMember

__version__ = "0.1.0"

_EXPORTS = {
    "McastService": "tribes.fronts.service",
    "AsyncMcastService": "tribes.fronts.aio",
    "AsyncMembership": "tribes.fronts.aio",
    "EventsLost": "_runtime.events",
    "ServiceConfig": "tribes.engine.config",
    "Member": "tribes.engine.member",
    "domain_from_text": "tribes.engine.member",
    "Membership": "tribes.engine.table",
    "MemberEvent": "tribes.engine.events",
    "EventKind": "tribes.engine.events",
    "Reason": "tribes.engine.events",
    "MalformedPacket": "tribes.wire.errors",
    "ConfigurationError": "_runtime.errors",
    "decode": "tribes.engine.packet",
    "encode": "tribes.engine.packet",
    "implementation": "tribes.engine.packet",
    "Stats": "tribes.engine.stats",
    # gossip (the ``gossip`` extra: without it, a one-sentence ModuleNotFoundError)
    "SerfService": "gossip.fronts.service",
    "AsyncSerfService": "gossip.fronts.aio",
    "GossipMember": "gossip.fronts.driver",
}

# Spelled out, for the checkers and IDEs (a test keeps it sorted(_EXPORTS)).
__all__ = ["AsyncMcastService", "AsyncMembership", "AsyncSerfService", "ConfigurationError", "EventKind", "EventsLost",
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
