"""Every setting of a heartbeat member, declared once.

``Settings`` is the TypedDict that type checkers see for the keyword
arguments of ServiceConfig and both fronts (``**settings: Unpack[Settings]``);
each field's ``Annotated`` metadata, a :class:`Setting` (a NamedTuple:
frozen, and lighter to import than a dataclass for mcast-demo), holds its default,
its description and whether it is a time in milliseconds. From that one
declaration come: the signatures ``help()`` and ``inspect.signature`` show and
the list of settings in the docstrings (``takes_settings``), the defaults
ServiceConfig fills in (``with_defaults``), mcast-demo's flag defaults
(tools/cli.py) and the one conversion of times to seconds
(``in_seconds``). tests/test_settings.py keeps docs/usage.md's table and the
CLI's flags to it.

A TypedDict rather than a frozen dataclass: the fronts' keyword arguments
must be typed for the checkers, which only a TypedDict does (PEP 692); a
dataclass beside it would be a second list of the names. ``Annotated`` is
transparent to the checkers, so the types they see are exact.

No ``from __future__ import annotations`` here: the annotations are
evaluated as the class is made, so their metadata can be read at run time.
"""

import functools
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal, NamedTuple, TypedDict, TypeVar, Union, \
    get_args, get_origin, get_type_hints

from ..wire import auth
from .detector import DEFAULT_MIN_STD_MS, DEFAULT_THRESHOLD
from ..._runtime.units import seconds

if TYPE_CHECKING:
    import inspect

_Class = TypeVar("_Class")

# The two positional settings: the group and the port (Tomcat's).
DEFAULT_GROUP = "228.0.0.4"
DEFAULT_GROUP_IPV6 = "ff05::4"       # site-local, the same number (Tomcat has none)
DEFAULT_PORT = 45564

Card = Union[str, int]
# The settings with a type of their own.
Interfaces = Union[Card, list[Card], tuple[Card, ...], None]
Keys = Union[auth.HeartbeatKeys, str, os.PathLike[str], Sequence[tuple[int, bytes]], None]
AuthMode = Literal["off", "permissive", "enforce"]
Detector = Literal["fixed", "phi"]


class Setting(NamedTuple):
    """One setting's metadata: its ``default``, what it is (``doc``, a
    phrase for the docstrings), what a default of None stands for
    (``otherwise``), and ``ms``: a time in milliseconds, as Tomcat's
    ``server.xml`` has it (the engine gets it in seconds)."""

    default: object
    doc: str
    otherwise: str = ""
    ms: bool = False

    def shown(self) -> str:
        """The default as the docstrings and docs/usage.md show it."""
        value = self.default
        if self.otherwise:
            return self.otherwise
        return repr(value).replace("'", '"') if isinstance(value, (str, bytes)) else str(value)


class Settings(TypedDict, total=False):
    """The keyword settings of ServiceConfig and of both fronts, with their
    types (``**settings: Unpack[Settings]``), defaults and descriptions."""

    interface: Annotated[Interfaces, Setting(
        None, "the card to send and receive on: a name (\"eth0\"), an index, an IPv4 or "
              "IPv6 address, or a list of them (heartbeats on each)",
        "the kernel's choice, a multicast route; never all cards")]
    ttl: Annotated[Union[int, None], Setting(None, "multicast TTL / hop limit",
                                             "the OS default, 1")]
    loopback: Annotated[bool, Setting(True, "hear members on this host (IP_MULTICAST_LOOP)")]
    frequency: Annotated[int, Setting(500, "heartbeat period, ms", ms=True)]
    drop_time: Annotated[int, Setting(
        3000, "silence after which a member is removed, ms (longer than ``frequency``)",
        ms=True)]
    host: Annotated[Union[str, bytes, None], Setting(
        None, "the address we advertise (text, or 4/16 raw bytes)", "the interface's address")]
    member_port: Annotated[int, Setting(
        4000, "advertised member (TCP) port; 0: the port the TCP listener gets")]
    secure_port: Annotated[int, Setting(-1, "advertised secure port (-1: unused)")]
    udp_port: Annotated[int, Setting(-1, "advertised UDP port (-1: unused)")]
    domain: Annotated[Union[bytes, str], Setting(
        b"", "advertised domain bytes (text: Tomcat's form, ``{216,123,12,3}`` or "
             "ISO-8859-1)")]
    payload: Annotated[Union[bytes, str], Setting(b"", "advertised payload bytes (a str is "
                                                       "UTF-8)")]
    max_members: Annotated[int, Setting(1024, "table bound: strangers past it are refused")]
    filter_domain: Annotated[bool, Setting(False, "keep only members of our domain")]
    unique_id: Annotated[Union[bytes, None], Setting(None, "16 bytes of identity",
                                                     "random, UUID v4 bits")]
    alive_cap_ms: Annotated[Union[int, None], Setting(
        None, "the alive time we advertise wraps round past it (Tomcat copies a member's "
              "payload only when its alive time changed)",
        "uncapped; 2 x ``frequency`` with the TCP listener")]
    tcp_listener: Annotated[Union[bool, None], Setting(
        None, "serve Tribes' TCP channel on the member port, answering every message at "
              "once, and advertise a negative alive time so that every Tomcat sorts us "
              "after its own nodes (see tribes_listener.py): a Tomcat whose channel has no "
              "TcpFailureDetector lists every member it hears and may ask it for sessions. "
              "By default a busy member port leaves it off, with a warning; True makes "
              "that an error", "on, off with ``listen_only``")]
    tomcat: Annotated[bool, Setting(False, "join a Tomcat cluster as a listed member: the "
                                           "TCP listener, required")]
    multicast: Annotated[bool, Setting(True, "heartbeats on the group; False: unicast only")]
    peers: Annotated[Union[str, Sequence[str]], Setting(
        (), "unicast peers, \"10.0.0.5\", \"10.0.0.5:45564\", \"[fd00::5]:45564\" or host "
            "names (a str: comma-separated)")]
    dns: Annotated[Union[str, None], Setting(
        None, "a name whose A/AAAA records are peers, asked of ``dns_servers`` every "
              "``dns_interval``")]
    dns_srv: Annotated[bool, Setting(False, "read SRV records of ``dns`` instead (each "
                                            "peer's port from its record)")]
    dns_interval: Annotated[int, Setting(
        5000, "how often ``dns`` and the peers' host names are resolved again, ms (at "
              "least 100; Tomcat's cloud membership polls as often)", ms=True)]
    dns_servers: Annotated[Union[str, Sequence[str], None], Setting(
        None, "DNS servers to ask, \"ADDR\" or \"ADDR:PORT\"", "the system's")]
    dns_members: Annotated[bool, Setting(
        False, "the DNS answer's addresses are the members, nothing sent by UDP (Tomcat's "
               "cloud membership; needs ``dns``, no multicast)")]
    accept_unknown: Annotated[bool, Setting(False, "let a unicast sender that is not a peer "
                                                   "join")]
    verify: Annotated[bool, Setting(
        False, "a second opinion before an expiry: a member past its drop time becomes a "
               "suspect and is probed (TCP connects to its member port, up to six within "
               "``verify_timeout``); it stays while its port answers. Turns the TCP "
               "listener on, so that peers can probe us too")]
    verify_timeout: Annotated[int, Setting(
        300, "how long a suspect's probe may take, ms (a TCP connect on a LAN answers in "
             "well under a millisecond; a crashed member's host resets at once)", ms=True)]
    detector: Annotated[Detector, Setting(
        "fixed", "\"fixed\" (the drop time) or \"phi\" (phi-accrual on each member's "
                 "arrival intervals)")]
    phi_threshold: Annotated[Union[float, None], Setting(
        None, "the phi detector's threshold", f"{DEFAULT_THRESHOLD:g}")]
    phi_min_std: Annotated[Union[int, None], Setting(
        None, "the phi detector's least standard deviation, ms", f"{DEFAULT_MIN_STD_MS}",
        ms=True)]
    phi_pause: Annotated[Union[int, None], Setting(
        None, "the phi detector's acceptable pause, ms", "2 x ``frequency``", ms=True)]
    keys: Annotated[Keys, Setting(
        None, "authenticated heartbeats (see auth.py): an ``auth.HeartbeatKeys``, ``(key id, "
              "32-byte secret)`` pairs (the first signs) or a key file's path")]
    auth: Annotated[Union[AuthMode, None], Setting(
        None, "\"off\", \"permissive\" or \"enforce\"", "\"enforce\" with keys, else \"off\"")]
    listen_only: Annotated[bool, Setting(
        False, "hear the group without joining it (``mcast-demo watch``): no heartbeat, no "
               "goodbye, no TCP listener, no socket to send from. Needs multicast, and "
               "neither ``tomcat``, ``verify`` nor ``tcp_listener`` (each sends)")]


def _declared() -> dict[str, tuple[Setting, object]]:
    hints = get_type_hints(Settings, include_extras=True)
    return {name: (hint.__metadata__[0], get_args(hint)[0]) for name, hint in hints.items()}


_DECLARED = _declared()
SETTINGS: dict[str, Setting] = {name: spec for name, (spec, _) in _DECLARED.items()}


def default(name: str) -> Any:
    """The default of the setting ``name`` (KeyError for no setting)."""
    return SETTINGS[name].default


def with_defaults(settings: Mapping[str, object]) -> dict[str, Any]:
    """Every setting: those given, the others at their default."""
    return {name: settings.get(name, spec.default) for name, spec in SETTINGS.items()}


def in_seconds(settings: Mapping[str, object]) -> dict[str, float]:
    """The times among ``settings`` (checked, in ms), in seconds: the one
    place where a setting's milliseconds become the engine's seconds. A time
    left None is left out."""
    return {name: seconds(value) for name, value in settings.items()
            if name in SETTINGS and SETTINGS[name].ms and isinstance(value, (int, float))}


# The default times in seconds (for the table's own defaults).
DEFAULT_SECONDS = in_seconds({name: spec.default for name, spec in SETTINGS.items()})


@functools.cache
def settings_doc() -> str:
    """The list of settings for a docstring, with their defaults (made once:
    each class that takes the settings shows it)."""
    import textwrap

    lines = ["Settings (keyword-only; times in milliseconds, as in Tomcat's ``server.xml``):",
             ""]
    for name, spec in SETTINGS.items():
        lines.extend(textwrap.wrap(f"- ``{name}``: {spec.doc} (default: {spec.shown()}).",
                                   76, subsequent_indent="  "))
    return "\n".join(lines)


def parameters() -> "list[inspect.Parameter]":
    """The settings as keyword-only parameters with their defaults (and
    their types as text), for ``inspect.signature`` and ``help()``."""
    import inspect

    return [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=spec.default,
                              annotation=_type_text(kind))
            for name, (spec, kind) in _DECLARED.items()]


def _type_text(kind: object) -> str:
    """A type as the declaration above spells it (``int | None``)."""
    if kind is type(None):
        return "None"
    args = get_args(kind)
    origin = get_origin(kind)
    if origin is Union:
        return " | ".join(_type_text(arg) for arg in args)
    if origin is Literal:
        return f"Literal[{', '.join(repr(arg).replace(chr(39), chr(34)) for arg in args)}]"
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join('...' if a is Ellipsis else _type_text(a) for a in args)}]"
    return getattr(kind, "__qualname__", str(kind))


def takes_settings(cls: type[_Class]) -> type[_Class]:
    """Class decorator of a class whose ``__init__`` takes ``**settings``:
    ``help()`` and ``inspect.signature`` then show every setting with its
    default, and its docstring lists them (the declaration above)."""
    import inspect

    own = inspect.signature(cls.__init__)
    params = [p for p in own.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    # setattr: __signature__ is no attribute of a function's type, for the checkers.
    setattr(cls.__init__, "__signature__", own.replace(parameters=params + parameters()))
    if cls.__doc__ is not None:     # python -OO strips docstrings
        cls.__doc__ = cls.__doc__.rstrip() + "\n\n" + _indent(settings_doc(), "    ")
    return cls


def _indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line if line else line for line in text.splitlines())
