"""mcastmember: cluster membership over UDP multicast, wire-compatible with
Apache Tomcat Tribes.

Names are loaded on first use (PEP 562), so ``import mcastmember`` costs
almost nothing and never imports construct::

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
    from .aio import AsyncMembership as AsyncMembership
    from .config import ServiceConfig as ServiceConfig
    from .errors import ConfigurationError as ConfigurationError
    from .errors import MalformedPacket as MalformedPacket
    from .events import EventKind as EventKind
    from .events import EventsLost as EventsLost
    from .events import MemberEvent as MemberEvent
    from .events import Reason as Reason
    from .member import Member as Member
    from .member import domain_from_text as domain_from_text
    from .packet import decode as decode
    from .packet import encode as encode
    from .packet import implementation as implementation
    from .service import McastService as McastService
    from .stats import Stats as Stats
    from .table import Membership as Membership

__version__ = "0.1.0"

_EXPORTS = {
    "McastService": "service",
    "AsyncMembership": "aio",
    "EventsLost": "events",
    "ServiceConfig": "config",
    "Member": "member",
    "domain_from_text": "member",
    "Membership": "table",
    "MemberEvent": "events",
    "EventKind": "events",
    "Reason": "events",
    "MalformedPacket": "errors",
    "ConfigurationError": "errors",
    "decode": "packet",
    "encode": "packet",
    "implementation": "packet",
    "Stats": "stats",
}

# Spelled out, for the checkers and IDEs (a test keeps it sorted(_EXPORTS)).
__all__ = ["AsyncMembership", "ConfigurationError", "EventKind", "EventsLost", "MalformedPacket",
           "McastService", "Member", "MemberEvent", "Membership", "Reason", "ServiceConfig",
           "Stats", "decode", "domain_from_text", "encode", "implementation"]


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
