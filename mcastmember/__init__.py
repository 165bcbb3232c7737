"""mcastmember: cluster membership over UDP multicast, wire-compatible with
Apache Tomcat Tribes.

Names are loaded on first use (PEP 562), so ``import mcastmember`` costs
almost nothing and never imports construct::

    from mcastmember import McastService
    with McastService(interface="127.0.0.1", ttl=0, member_port=4001) as service:
        service.add_listener(print)
"""

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
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'mcastmember' has no attribute {name!r}")
    from importlib import import_module
    value = getattr(import_module(f".{module_name}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
