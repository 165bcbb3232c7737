"""Settings shared by the threaded service, the asyncio front and the CLI:
checked once, with Tomcat's defaults, and turned into our own member."""

from __future__ import annotations

import inspect
import ipaddress
import logging
import os
from typing import TYPE_CHECKING, Literal, Sequence, TypedDict, Union, cast

from ..wire import layout as L
from .. import _codec
from ..wire import auth
from ..transport import net
from ..wire.errors import ConfigurationError
from .member import Member, domain_from_text
from .units import seconds
from ..discovery.peers import PeerSet, cloud_unique_id, is_address, packed, parse_peer

if TYPE_CHECKING:
    from types import ModuleType
    from typing import TypeVar

    from typing_extensions import Buffer

    from .._fast import HeartbeatPacket
    from .detector import PhiAccrual
    from ..transport.interfaces import Choice, Interface

    _Front = TypeVar("_Front")

log = logging.getLogger("mcastmember")

DEFAULT_GROUP = "228.0.0.4"          # Tomcat's
DEFAULT_GROUP_IPV6 = "ff05::4"       # site-local, the same number (Tomcat has none)
DEFAULT_PORT = 45564
DEFAULT_FREQUENCY_MS = 500
DEFAULT_DROP_TIME_MS = 3000
DEFAULT_MEMBER_PORT = 4000
DEFAULT_MAX_MEMBERS = 1024
DEFAULT_DNS_INTERVAL_MS = 5000      # Tomcat's cloud membership polls as often
MIN_DNS_INTERVAL_MS = 100
# How long a suspect's probe may take (a TCP connect on a LAN answers in well
# under a millisecond; a crashed member's host answers with a reset at once).
DEFAULT_VERIFY_TIMEOUT_MS = 300


def _bytes_like(value: Buffer, name: str) -> bytes:
    """The bytes of a bytes-like value (bytes, bytearray, memoryview...). An
    int is refused, not taken as a length: bytes(16) is sixteen zero bytes."""
    if isinstance(value, bytes):
        return value
    try:
        with memoryview(value) as view:
            return view.tobytes()
    except TypeError:
        raise ConfigurationError(f"{name} must be bytes or text, not {value!r}") from None


def _as_domain(domain: str | Buffer) -> bytes:
    if isinstance(domain, str):
        try:
            return domain_from_text(domain)
        except ValueError as error:
            raise ConfigurationError(str(error)) from None
    return _bytes_like(domain, "domain")


def _as_payload(payload: str | Buffer) -> bytes:
    if isinstance(payload, str):
        return payload.encode("utf-8")
    return _bytes_like(payload, "payload")


def _flag(value: object, name: str) -> bool:
    """True or False only: bool("no") is True, so a string must not pass."""
    if not isinstance(value, bool):
        raise ConfigurationError(f"{name} must be True or False, not {value!r}")
    return value


def _whole(value: object, name: str, low: int, high: int | None = None) -> int:
    # A float with nothing after the point (500.0, as a config file or a
    # division gives it) is that whole number; 500.5, inf and nan are refused.
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(f"{name} must be a whole number, not {value!r}")
    if value < low or (high is not None and value > high):
        bound = f"{low}-{high}" if high is not None else f"at least {low}"
        raise ConfigurationError(f"{name} {value} is out of range ({bound})")
    return value


Card = Union[str, int]
# The other settings with a type of their own, as Settings has them.
Interfaces = Union[Card, list[Card], tuple[Card, ...], None]
Keys = Union[auth.KeyRing, str, os.PathLike[str], Sequence[tuple[int, bytes]], None]
AuthMode = Literal["off", "permissive", "enforce"]
Detector = Literal["fixed", "phi"]


class Settings(TypedDict, total=False):
    """The settings of ``ServiceConfig`` (and of both fronts) with their
    types, for type checkers and IDEs (``**settings: Unpack[Settings]``).
    Names and defaults are ServiceConfig's signature; a test keeps the two
    the same."""

    interface: Interfaces
    ttl: int | None
    loopback: bool
    frequency: int
    drop_time: int
    host: str | bytes | None
    member_port: int
    secure_port: int
    udp_port: int
    domain: bytes | str
    payload: bytes | str
    max_members: int
    filter_domain: bool
    unique_id: bytes | None
    alive_cap_ms: int | None
    tcp_listener: bool | None
    tomcat: bool
    multicast: bool
    peers: str | Sequence[str]
    dns: str | None
    dns_srv: bool
    dns_interval: int
    dns_servers: str | Sequence[str] | None
    dns_members: bool
    accept_unknown: bool
    verify: bool
    verify_timeout: int
    detector: Detector
    phi_threshold: float | None
    phi_min_std: int | None
    phi_pause: int | None
    keys: Keys
    auth: AuthMode | None
    listen_only: bool


def takes_settings(front: type[_Front]) -> type[_Front]:
    """Class decorator of a front whose ``__init__`` passes ``**settings`` to
    ServiceConfig: ``help()`` and ``inspect.signature`` then show every
    setting with its default, and the docstring lists them (one
    definition: ServiceConfig's)."""
    own = inspect.signature(front.__init__)
    settings = [p for p in inspect.signature(ServiceConfig.__init__).parameters.values()
                if p.kind is inspect.Parameter.KEYWORD_ONLY]
    params = [p for p in own.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    # setattr: __signature__ is no attribute of a function's type, for the checkers.
    setattr(front.__init__, "__signature__", own.replace(parameters=params + settings))
    doc = ServiceConfig.__doc__
    if doc is not None:     # python -OO strips docstrings
        front.__doc__ = (front.__doc__ or "").rstrip() + "\n\n    " + doc[doc.index("Settings"):]
    return front


class ServiceConfig:
    """Every setting of a membership service, checked (ConfigurationError,
    one sentence, for a bad one). Times are in milliseconds, as in Tomcat's
    ``server.xml``; Tomcat's defaults throughout.

    Settings (keyword-only):

    - ``interface``: the card to send and receive on: a name ("eth0"), an
      index, an IPv4 or IPv6 address, or a list of them (heartbeats on each).
      None: the kernel's choice (a multicast route), never all cards.
    - ``ttl``: multicast TTL / hop limit (None: the OS default, 1).
    - ``loopback``: hear members on this host (IP_MULTICAST_LOOP).
    - ``frequency``: heartbeat period (500).
    - ``drop_time``: silence after which a member is removed (3000; longer
      than ``frequency``).
    - ``host``: the address we advertise (text, or 4/16 raw bytes; default:
      the interface's).
    - ``member_port``, ``secure_port``, ``udp_port``: advertised ports
      (4000, -1, -1; -1 is unused).
    - ``domain``, ``payload``: advertised bytes (text: Tomcat's domain form,
      ``{216,123,12,3}`` or ISO-8859-1; a payload str is UTF-8).
    - ``unique_id``: 16 bytes of identity (default: random).
    - ``max_members``: table bound (1024): strangers past it are refused.
    - ``filter_domain``: keep only members of our domain.
    - ``alive_cap_ms``: the alive time we advertise wraps round past it
      (Tomcat copies a member's payload only when its alive time changed);
      None: uncapped, or two heartbeats with the TCP listener.
    - ``tcp_listener``: serve Tribes' TCP channel on the member port,
      answering every message at once, and advertise a negative alive time
      so that every Tomcat sorts us after its own nodes (see tribes_listener.py).
      On by default (off with ``listen_only``): a Tomcat whose channel has
      no TcpFailureDetector lists every member it hears and may ask it for
      sessions. By default a busy member port leaves it off, with a
      warning; True makes that an error.
    - ``tomcat``: join a Tomcat cluster as a listed member: the TCP
      listener, required.
    - ``multicast``: heartbeats on the group (True); False: unicast only.
    - ``peers``: unicast peers, "10.0.0.5", "10.0.0.5:45564",
      "[fd00::5]:45564" or host names (a str: comma-separated).
    - ``dns``: a name whose A/AAAA records are peers (``dns_srv``: SRV
      records, port from each), asked of ``dns_servers`` (default: the
      system's) every ``dns_interval`` (5000, at least 100).
    - ``dns_members``: the DNS answer's addresses are the members, nothing
      sent by UDP (Tomcat's cloud membership; needs ``dns``, no multicast).
    - ``accept_unknown``: let a unicast sender that is not a peer join.
    - ``verify``: a second opinion before an expiry: a member past its drop
      time becomes a suspect and is probed (TCP connects to its member port,
      up to six within ``verify_timeout``, 300); it stays while its port answers.
      Turns the TCP listener on, so that peers can probe us too.
    - ``detector``: "fixed" (drop time) or "phi" (phi-accrual on each
      member's arrival intervals: ``phi_threshold`` 8, ``phi_min_std`` 100,
      ``phi_pause`` two periods).
    - ``keys``: authenticated heartbeats (see auth.py): an ``auth.KeyRing``,
      ``(key id, 32-byte secret)`` pairs (the first signs) or a key file's
      path. ``auth``: "off", "permissive" or "enforce" (the default with
      keys).

    - ``listen_only``: hear the group without joining it (``mcast-demo
      watch``): no heartbeat, no goodbye, no TCP listener, no socket to send
      from. Needs multicast, and neither ``tomcat``, ``verify`` nor
      ``tcp_listener`` (each sends).

    Bytes settings take bytes-like values, never an int; switches take True
    or False only; times and counts take whole numbers (500.0 included).
    """

    def __init__(self, address: str | None = DEFAULT_GROUP, port: int = DEFAULT_PORT, *,
                 interface: Interfaces = None, ttl: int | None = None,
                 loopback: bool = True, frequency: int = DEFAULT_FREQUENCY_MS,
                 drop_time: int = DEFAULT_DROP_TIME_MS,
                 host: str | bytes | None = None, member_port: int = DEFAULT_MEMBER_PORT,
                 secure_port: int = -1, udp_port: int = -1,
                 domain: bytes | str = b"", payload: bytes | str = b"",
                 max_members: int = DEFAULT_MAX_MEMBERS,
                 filter_domain: bool = False, unique_id: bytes | None = None,
                 alive_cap_ms: int | None = None, tcp_listener: bool | None = None,
                 tomcat: bool = False, multicast: bool = True, peers: str | Sequence[str] = (),
                 dns: str | None = None, dns_srv: bool = False,
                 dns_interval: int = DEFAULT_DNS_INTERVAL_MS,
                 dns_servers: str | Sequence[str] | None = None, dns_members: bool = False,
                 accept_unknown: bool = False, verify: bool = False,
                 verify_timeout: int = DEFAULT_VERIFY_TIMEOUT_MS,
                 detector: Detector = "fixed", phi_threshold: float | None = None,
                 phi_min_std: int | None = None, phi_pause: int | None = None,
                 keys: Keys = None, auth: AuthMode | None = None,
                 listen_only: bool = False) -> None:
        self.multicast = _flag(multicast, "multicast")
        self.listen_only = _flag(listen_only, "listen_only")
        if self.multicast and address is None:
            raise ConfigurationError("no multicast group: give the group (e.g. '228.0.0.4'), "
                                     "or multicast=False with peers= or dns=")
        self.address: str | None = net.check_group(address) if self.multicast else None
        self.port = net.check_port(port)
        self._choose_interfaces(interface)
        self.ttl = None if ttl is None else _whole(ttl, "ttl", 0, 255)
        self.loopback = _flag(loopback, "loopback")
        self.frequency = _whole(frequency, "frequency", 1)
        self.drop_time = _whole(drop_time, "drop_time", 1)
        if self.drop_time <= self.frequency:
            raise ConfigurationError(
                f"drop_time ({self.drop_time} ms) must be longer than frequency "
                f"({self.frequency} ms), or every member would be dropped between heartbeats")
        self.member_port = net.check_port(member_port, "member_port", allow_zero=True)
        self.secure_port = net.check_port(secure_port, "secure_port", allow_unused=True)
        self.udp_port = net.check_port(udp_port, "udp_port", allow_unused=True)
        self.max_members = _whole(max_members, "max_members", 1, 1 << 20)
        self.filter_domain = _flag(filter_domain, "filter_domain")
        self.tomcat = _flag(tomcat, "tomcat")
        self.verify = _flag(verify, "verify")
        self.verify_timeout = _whole(verify_timeout, "verify_timeout", 1, 60_000)
        self._detector(detector, phi_threshold, phi_min_std, phi_pause)
        # On by default (README, "Joining a Tomcat cluster"): a Tomcat whose
        # channel has no TcpFailureDetector lists every member it hears and
        # asks one for its sessions, so a member must answer. Under verify our
        # peers probe our member port as we probe theirs: it answers them too.
        # Only a member that sends nothing (listen_only) has none. Asked for
        # (tomcat, verify, tcp_listener=True), a busy port stops the start;
        # by default the member runs on without it (listener_failed).
        self.listener_asked = self.tomcat or self.verify or tcp_listener is True
        self.tcp_listener = (self.listener_asked or not self.listen_only if tcp_listener is None
                             else _flag(tcp_listener, "tcp_listener"))
        # Listed by Tomcat, we must sort after every Tomcat node (see above).
        self.alive_below_zero = self.tcp_listener
        if alive_cap_ms is None and self.alive_below_zero:
            alive_cap_ms = 2 * self.frequency
        if alive_cap_ms is not None:
            alive_cap_ms = _whole(alive_cap_ms, "alive_cap_ms", 2 * self.frequency)
        self.alive_cap_ms = alive_cap_ms
        self.domain = _as_domain(domain)
        self.payload = _as_payload(payload)
        self._discovery(peers, dns, dns_srv, dns_interval, dns_servers, dns_members,
                        accept_unknown)
        if self.listen_only:
            self._check_listen_only()
        if host is None:
            if self.interface is None and not self.multicast:
                raise ConfigurationError(
                    "without multicast, set interface= (or host=): the address to bind "
                    "unicast heartbeats to and advertise, such as the pod's IP")
            # Multicast here (else interface is set): the group is set.
            host = self.interface or net.default_source_address(cast(str, self.address),
                                                                self.port)
        self.host = net.host_bytes(host)
        if unique_id is None and self.dns_members:
            # Tomcat's cloud membership names every member by the MD5 of its
            # address as Java writes it: so must we, for both sides to agree on us.
            unique_id = cloud_unique_id(packed(self.unicast_address))
        unique_id = (_random_unique_id() if unique_id is None
                     else _bytes_like(unique_id, "unique_id"))
        if len(unique_id) != L.UNIQUE_ID_LEN:
            raise ConfigurationError(f"unique_id must be {L.UNIQUE_ID_LEN} bytes")
        self.unique_id = unique_id
        self.key_ring, self.auth = _as_auth(keys, auth)
        self.local_member()   # refuse settings that cannot be encoded, now
        self.encode()

    def listener_failed(self, error: OSError) -> str:
        """The TCP listener could not start (``error``, from its bind):
        raised again if it was asked for; by default the warning to log once
        the rest has started (an error of the sockets is the one to show),
        and the member runs on without it, as before it was on by default."""
        if self.listener_asked:
            raise error
        return (f"{error.strerror or error}: running without the TCP listener, so a Tomcat "
                f"whose channel has no TcpFailureDetector would wait on this member (choose "
                f"a free member port, or turn the listener off)")

    def _check_listen_only(self) -> None:
        sending = [name for name, on in (("tomcat", self.tomcat), ("verify", self.verify),
                                         ("tcp_listener", self.tcp_listener)) if on]
        if sending:
            raise ConfigurationError(f"listen_only sends nothing: it cannot have "
                                     f"{' or '.join(sending)}")
        if not self.multicast or self.unicast:
            raise ConfigurationError("listen_only hears a multicast group only: no peers or "
                                     "dns (unicast peers send only to the members they list)")

    def _choose_interfaces(self, interface: Interfaces) -> None:
        """``interface``: a card's name, index or address, or a list of them.
        ``links`` is what the sockets use (address and index of each card);
        ``interface`` the first card's address, where we bind and what we
        advertise by default."""
        specs = list(interface) if isinstance(interface, (list, tuple)) else (
            [] if interface is None else [interface])
        if isinstance(interface, (list, tuple)) and not specs:
            raise ConfigurationError("interface must name at least one card (or be None)")
        family = net.family_of(cast(str, self.address)) if self.multicast else None  # set then
        choices = [choose_interface(spec, family) for spec in specs]
        names = [choice.interface.name for choice in choices]
        if len(set(names)) < len(names):
            raise ConfigurationError(f"interface lists a card twice: {', '.join(names)}")
        for choice in choices:
            if self.multicast and not (choice.interface.multicast or choice.interface.loopback):
                raise ConfigurationError(f"interface {choice.interface.name} cannot carry "
                                         f"multicast ({choice.interface.describe()})")
            if choice.reason and "given" not in choice.reason:
                log.info("interface %s: %s", choice.interface.name, choice.reason)
        self.links = [net.Link(str(c.address).split("%")[0], c.interface.index) for c in choices]
        self.interface: str | None = self.links[0].address if self.links else None
        self.interface_names = names
        if self.multicast and not self.links and net.link_scoped(cast(str, self.address)):
            raise ConfigurationError(f"the IPv6 group {self.address} exists on one link only: "
                                     f"name the card, e.g. interface=\"eth0\"")

    def _detector(self, detector: Detector, threshold: float | None, min_std: int | None,
                  pause: int | None) -> None:
        if detector not in ("fixed", "phi"):
            raise ConfigurationError(f"detector must be 'fixed' or 'phi', not {detector!r}")
        self.detector = detector
        if detector == "fixed":
            given = [name for name, value in (("phi_threshold", threshold),
                                              ("phi_min_std", min_std), ("phi_pause", pause))
                     if value is not None]
            if given:
                raise ConfigurationError(f"{' and '.join(given)} need"
                                         f"{'s' if len(given) == 1 else ''} detector='phi'")
            self.phi: PhiAccrual | None = None
            return
        from . import detector as phi
        if threshold is None:
            threshold = phi.DEFAULT_THRESHOLD
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) \
                or not 0 < threshold <= 16:
            raise ConfigurationError(f"phi_threshold must be a number in (0, 16], "
                                     f"not {threshold!r}")
        min_std = _whole(phi.DEFAULT_MIN_STD_MS if min_std is None else min_std,
                         "phi_min_std", 1)
        # An acceptable pause of two heartbeats: patient with a lost one or
        # two, and still quicker than the fixed drop time on a clean network.
        pause = _whole(2 * self.frequency if pause is None else pause, "phi_pause", 0)
        self.phi = phi.PhiAccrual(threshold, seconds(min_std), seconds(pause),
                                  first_mean=self.frequency_s)

    def _discovery(self, peers: str | Sequence[str], dns: str | None, dns_srv: bool,
                   dns_interval: int, dns_servers: str | Sequence[str] | None,
                   dns_members: bool, accept_unknown: bool) -> None:
        if isinstance(peers, str):
            peers = [part for part in peers.split(",") if part.strip()]
        try:
            self.peers = tuple(peers)
        except TypeError:
            raise ConfigurationError(f"peers must be a list of addresses, not {peers!r}") from None
        for spec in self.peers:
            parse_peer(spec, self.port)          # refuse a bad one now, by its text
        if len(self.peers) > self.max_members:
            raise ConfigurationError(f"{len(self.peers)} peers listed, more than max_members "
                                     f"({self.max_members})")
        if dns is not None and (not isinstance(dns, str) or not dns.strip()):
            raise ConfigurationError(f"dns must be a host name, not {dns!r}")
        self.dns = dns.strip() if dns is not None else None
        self.dns_srv = _flag(dns_srv, "dns_srv")
        self.dns_interval = _whole(dns_interval, "dns_interval", MIN_DNS_INTERVAL_MS)
        self.dns_members = _flag(dns_members, "dns_members")
        self.accept_unknown = _flag(accept_unknown, "accept_unknown")
        if isinstance(dns_servers, str):
            dns_servers = [part for part in dns_servers.split(",") if part.strip()]
        self.dns_servers = tuple(dns_servers) if dns_servers else None
        for server in self.dns_servers or ():
            host, _ = parse_peer(server, 53)
            if not is_address(host):
                raise ConfigurationError(f"dns_servers: {server!r} is not an address")
        if self.dns_srv and self.dns is None:
            raise ConfigurationError("dns_srv needs dns= (the SRV name to ask)")
        if self.dns_members:
            if self.dns is None:
                raise ConfigurationError("dns_members needs dns= (the name that lists the members)")
            if self.multicast or self.peers:
                raise ConfigurationError(
                    "dns_members takes its members from DNS alone: set multicast=False "
                    "and no peers")
        if self.dns is not None:
            from ..discovery.resolver import require_dnspython
            require_dnspython()
        self.unicast = bool(self.peers) or self.dns is not None
        if not self.multicast and not self.unicast:
            raise ConfigurationError(
                "with multicast=False there is nobody to send to: give peers= or dns=")

    @property
    def heartbeats(self) -> bool:
        """Whether we send and hear heartbeats (not with dns_members)."""
        return not self.dns_members

    @property
    def unicast_address(self) -> str:
        """The address unicast heartbeats are sent from and heard on (and, with
        dns_members, our address in DNS): where the TCP listener binds too."""
        return self.listen_address

    def peer_set(self) -> PeerSet:
        """Where unicast heartbeats go (peers.PeerSet), ourselves left out."""
        return PeerSet(self.peers, port=self.port, own=(packed(self.unicast_address), self.port),
                       interval=seconds(self.dns_interval), dns=self.dns, srv=self.dns_srv,
                       max_peers=self.max_members)

    # The times the engine works with, in seconds (the settings are ms).
    @property
    def frequency_s(self) -> float:
        return seconds(self.frequency)

    @property
    def drop_time_s(self) -> float:
        return seconds(self.drop_time)

    @property
    def verify_timeout_s(self) -> float:
        return seconds(self.verify_timeout)

    def describe(self) -> str:
        """What we join, in words: the group, the peers, or both."""
        parts = [f"{self.address}:{self.port}"] if self.multicast else []
        if self.dns_members:
            parts.append(f"members listed by {self.dns}")
        elif self.unicast:
            sources = list(self.peers) + ([f"dns {self.dns}"] if self.dns else [])
            parts.append(f"peers {', '.join(sources)} on port {self.port}")
        return " and ".join(parts)

    @property
    def auth_mode(self) -> int:
        """``auth`` as the number the table and the index take (layout.AUTH_*)."""
        return L.AUTH_MODES[self.auth]

    def set_keys(self, keys: Keys, auth: AuthMode | None = None) -> None:
        """Other keys (None: none) and mode, checked as at construction."""
        self.key_ring, self.auth = _as_auth(keys, auth)

    def local_member(self, command: bytes = b"") -> Member:
        return Member(self.host, self.member_port, self.unique_id, secure_port=self.secure_port,
                      udp_port=self.udp_port, domain=self.domain, payload=self.payload,
                      command=command)

    def encode(self, command: bytes = b"") -> bytes:
        """Our packet, alive time 0 (the sender stamps it)."""
        try:
            return _codec.encode(*self.local_member(command).fields())
        except ValueError as error:
            raise ConfigurationError(str(error)) from None

    def heartbeat_packet(self, origin_ns: int, command: bytes = b"",
                         codec: ModuleType | None = None) -> HeartbeatPacket:
        """Our packet, ready to be stamped and sent (``origin_ns``: when we
        started), in ``codec``'s implementation (default: the one loaded)."""
        cap = -1 if self.alive_cap_ms is None else self.alive_cap_ms
        packet: HeartbeatPacket = (codec or _codec.impl).HeartbeatPacket(
            self.encode(command), origin_ns, cap, self.alive_below_zero)
        return packet

    @property
    def listen_address(self) -> str:
        """Where the TCP listener binds: the interface, else the address we
        advertise (where Tomcat connects); never every address of the host.
        A link-local IPv6 address carries its card (``fe80::1%2``): the OS
        binds it only so."""
        if not self.interface:
            return str(ipaddress.ip_address(self.host))
        link = self.links[0]
        address = ipaddress.ip_address(link.address)
        if link.index and address.version == 6 and address.is_link_local:
            return f"{link.address}%{link.index}"
        return self.interface

    def set_payload(self, payload: bytes | str) -> None:
        payload = _as_payload(payload)
        old, self.payload = self.payload, payload
        try:
            self.encode()
        except ConfigurationError:
            self.payload = old
            raise

    def set_domain(self, domain: bytes | str) -> None:
        domain = _as_domain(domain)
        old, self.domain = self.domain, domain
        try:
            self.encode()
        except ConfigurationError:
            self.domain = old
            raise


def choose_interface(spec: Card, family: int | None,
                     cards: Sequence[Interface] | None = None) -> Choice:
    """The card ``spec`` names and its address of ``family`` (4 or 6; None:
    IPv4, else IPv6), among ``cards`` (None: this host's)."""
    from ..transport import interfaces
    if family is not None:
        return interfaces.choose(spec, family, cards)
    try:
        return interfaces.choose(spec, 4, cards)
    except ConfigurationError as error:
        if "has no IPv4 address" not in str(error) and "is IPv6" not in str(error):
            raise
        return interfaces.choose(spec, 6, cards)


def _as_auth(keys: Keys, mode: AuthMode | None) -> tuple[auth.KeyRing | None, AuthMode]:
    """(KeyRing or None, mode name) from the ``keys`` and ``auth`` settings."""
    if keys is None:
        ring = None
    elif isinstance(keys, auth.KeyRing):
        ring = keys
    elif isinstance(keys, (str, bytes, os.PathLike)):
        ring = auth.KeyRing.from_file(keys)
    else:
        try:
            ring = auth.KeyRing(keys)
        except ConfigurationError:
            raise
        except (TypeError, ValueError):
            raise ConfigurationError("keys must be a KeyRing, a key file's path or "
                                     "(key id, secret) pairs") from None
    if mode is None:
        mode = "off" if ring is None else "enforce"
    if mode not in L.AUTH_MODES:
        raise ConfigurationError(f"auth must be 'off', 'permissive' or 'enforce', not {mode!r}")
    if mode != "off" and ring is None:
        raise ConfigurationError(f"auth={mode!r} needs keys")
    return ring, mode


def _random_unique_id() -> bytes:
    """16 random bytes with RFC 4122 version-4 bits, as Tomcat makes them."""
    raw = bytearray(os.urandom(L.UNIQUE_ID_LEN))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    return bytes(raw)
