"""Every setting of a heartbeat member, declared once.

``Settings`` is the TypedDict that type checkers see for the keyword
arguments of ServiceConfig and both fronts (``**settings: Unpack[Settings]``);
each field's ``Annotated`` metadata, a :class:`Setting` (a NamedTuple:
frozen, and lighter to import than a dataclass for mcast-demo), holds its default,
its description and whether it is a time in milliseconds. The machinery that
reads it is the runtime's (``_runtime/settings.py``), shared with the gossip
wing's declaration. From that one declaration come: the signatures ``help()`` and ``inspect.signature`` show and
the list of settings in the docstrings (``takes_settings``), the defaults
ServiceConfig fills in (``with_defaults``), mcast-demo's flag defaults
(tools/cli.py) and the one conversion of times to seconds
(``in_seconds``). tests/tribes/test_settings.py keeps docs/usage.md's table and the
CLI's flags to it.

A TypedDict rather than a frozen dataclass: the fronts' keyword arguments
must be typed for the checkers, which only a TypedDict does (PEP 692); a
dataclass beside it would be a second list of the names. ``Annotated`` is
transparent to the checkers, so the types they see are exact.

No ``from __future__ import annotations`` here: the annotations are
evaluated as the class is made, so their metadata can be read at run time.
"""

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypedDict, TypeVar, Union

from ..wire import auth
from .detector import DEFAULT_MIN_STD_MS, DEFAULT_THRESHOLD
from ..._runtime.settings import Declaration, Setting
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


_DECLARATION = Declaration(
    Settings, "Settings (keyword-only; times in milliseconds, as in Tomcat's ``server.xml``):")
SETTINGS: dict[str, Setting] = _DECLARATION.specs


def default(name: str) -> Any:
    """The default of the setting ``name`` (KeyError for no setting)."""
    return _DECLARATION.default(name)


def with_defaults(settings: Mapping[str, object]) -> dict[str, Any]:
    """Every setting: those given, the others at their default."""
    return _DECLARATION.with_defaults(settings)


def in_seconds(settings: Mapping[str, object]) -> dict[str, float]:
    """The times among ``settings`` (checked, in ms), in seconds: the one
    place where a setting's milliseconds become the engine's seconds. A time
    left None is left out."""
    return {name: seconds(value) for name, value in settings.items()
            if name in SETTINGS and SETTINGS[name].ms and isinstance(value, (int, float))}


# The default times in seconds (for the table's own defaults).
DEFAULT_SECONDS = in_seconds({name: spec.default for name, spec in SETTINGS.items()})


def settings_doc() -> str:
    """The list of settings for a docstring, with their defaults."""
    return _DECLARATION.settings_doc()


def parameters() -> "list[inspect.Parameter]":
    """The settings as keyword-only parameters with their defaults (and
    their types as text), for ``inspect.signature`` and ``help()``."""
    return _DECLARATION.parameters()


def takes_settings(cls: type[_Class]) -> type[_Class]:
    """Class decorator of a class whose ``__init__`` takes ``**settings``:
    ``help()`` and ``inspect.signature`` then show every setting with its
    default, and its docstring lists them (the declaration above)."""
    return _DECLARATION.takes_settings(cls)


def refuse_unknown(front: str, given: Iterable[str], known: Iterable[str] = ()) -> None:
    """UnknownSetting for the first of ``given`` that is no setting, named
    with ``front`` (the class the user called) and the likeliest setting or
    parameter (``known``) meant."""
    _DECLARATION.refuse_unknown(front, given, known)
