"""Settings shared by the threaded service, the asyncio front and the CLI,
in two steps: ``CheckedSettings`` checks them (with Tomcat's defaults, from
``settings.py``, their one declaration) and does no I/O; its ``resolve()``
(or ``ServiceConfig(...)``, both steps at once) finds what depends on this
host: the cards, the address we advertise, the key file, our member and its
packet. The doctor checks first, and resolves after its own checks of the
host."""

from __future__ import annotations

import ipaddress
import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Union, cast

from ..wire import layout as L
from ..kernel import codec as _codec
from ..wire import auth
from ..._runtime import net
from ..._runtime.errors import ConfigurationError, UnknownSetting
from .member import Member, domain_from_text
from .settings import DEFAULT_GROUP, DEFAULT_GROUP_IPV6, DEFAULT_PORT, SETTINGS, AuthMode, Card, \
    Detector, Interfaces, Keys, Settings, in_seconds, takes_settings, with_defaults
from ..discovery.peers import PeerSet, cloud_unique_id, is_address, packed, parse_peer

if TYPE_CHECKING:
    from types import ModuleType

    from typing_extensions import Buffer, Unpack

    from ..kernel._fast import HeartbeatPacket
    from .detector import PhiAccrual
    from ..net.interfaces import Choice, Interface

# Re-exported: where the fronts, the CLI and the doctor have always found them.
__all__ = ["DEFAULT_GROUP", "DEFAULT_GROUP_IPV6", "DEFAULT_PORT", "AuthMode", "CheckedSettings",
           "Detector", "Interfaces", "Keys", "ServiceConfig", "Settings", "check_auth",
           "choose_interface", "encode", "keys_and_mode", "load_keys", "takes_settings",
           "with_domain", "with_payload"]

log = logging.getLogger("mcastmember")

MIN_DNS_INTERVAL_MS = 100


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


@takes_settings
class CheckedSettings:
    """Every setting of a membership service, checked (ConfigurationError,
    one sentence, for a bad one), with no I/O: no socket opened, no file
    read, no card looked up. ``resolve()`` then finds what depends on this
    host (the cards, the source address, the key file, our member and its
    packet): the :class:`ServiceConfig` a service runs with. Times are in
    milliseconds, as in Tomcat's ``server.xml``; Tomcat's defaults throughout.

    Bytes settings take bytes-like values, never an int; switches take True
    or False only; times and counts take whole numbers (500.0 included).
    """

    def __init__(self, address: str | None = DEFAULT_GROUP, port: int = DEFAULT_PORT,
                 **settings: Unpack[Settings]) -> None:
        unknown = [name for name in settings if name not in SETTINGS]
        if unknown:
            raise UnknownSetting(f"{type(self).__name__}() got an unexpected keyword "
                                 f"argument {unknown[0]!r}")
        given = with_defaults(settings)
        self.multicast = _flag(given["multicast"], "multicast")
        self.listen_only = _flag(given["listen_only"], "listen_only")
        if self.multicast and address is None:
            raise ConfigurationError(f"no multicast group: give the group (e.g. "
                                     f"'{DEFAULT_GROUP}'), or multicast=False with peers= "
                                     f"or dns=")
        self.address: str | None = net.check_group(address) if self.multicast else None
        self.port = net.check_port(port)
        self.interface_specs = _interface_specs(given["interface"])
        if self.multicast and not self.interface_specs \
                and net.link_scoped(cast(str, self.address)):
            raise ConfigurationError(f"the IPv6 group {self.address} exists on one link only: "
                                     f"name the card, e.g. interface=\"eth0\"")
        ttl = given["ttl"]
        self.ttl = None if ttl is None else _whole(ttl, "ttl", 0, 255)
        self.loopback = _flag(given["loopback"], "loopback")
        self.frequency = _whole(given["frequency"], "frequency", 1)
        self.drop_time = _whole(given["drop_time"], "drop_time", 1)
        if self.drop_time <= self.frequency:
            raise ConfigurationError(
                f"drop_time ({self.drop_time} ms) must be longer than frequency "
                f"({self.frequency} ms), or every member would be dropped between heartbeats")
        self.member_port = net.check_port(given["member_port"], "member_port", allow_zero=True)
        self.secure_port = net.check_port(given["secure_port"], "secure_port",
                                          allow_unused=True)
        self.udp_port = net.check_port(given["udp_port"], "udp_port", allow_unused=True)
        self.max_members = _whole(given["max_members"], "max_members", 1, 1 << 20)
        self.filter_domain = _flag(given["filter_domain"], "filter_domain")
        self.tomcat = _flag(given["tomcat"], "tomcat")
        self.verify = _flag(given["verify"], "verify")
        self.verify_timeout = _whole(given["verify_timeout"], "verify_timeout", 1, 60_000)
        self._detector(given["detector"], given["phi_threshold"], given["phi_min_std"],
                       given["phi_pause"])
        # On by default (README, "Joining a Tomcat cluster"): a Tomcat whose
        # channel has no TcpFailureDetector lists every member it hears and
        # asks one for its sessions, so a member must answer. Under verify our
        # peers probe our member port as we probe theirs: it answers them too.
        # Only a member that sends nothing (listen_only) has none. Asked for
        # (tomcat, verify, tcp_listener=True), a busy port stops the start;
        # by default the member runs on without it (listener_failed).
        tcp_listener = given["tcp_listener"]
        self.listener_asked = self.tomcat or self.verify or tcp_listener is True
        self.tcp_listener = (self.listener_asked or not self.listen_only if tcp_listener is None
                             else _flag(tcp_listener, "tcp_listener"))
        # Listed by Tomcat, we must sort after every Tomcat node (see above).
        self.alive_below_zero = self.tcp_listener
        alive_cap_ms = given["alive_cap_ms"]
        if alive_cap_ms is None and self.alive_below_zero:
            alive_cap_ms = 2 * self.frequency
        if alive_cap_ms is not None:
            alive_cap_ms = _whole(alive_cap_ms, "alive_cap_ms", 2 * self.frequency)
        self.alive_cap_ms: int | None = alive_cap_ms
        self.domain = _as_domain(given["domain"])
        self.payload = _as_payload(given["payload"])
        self._discovery(given["peers"], given["dns"], given["dns_srv"], given["dns_interval"],
                        given["dns_servers"], given["dns_members"], given["accept_unknown"])
        if self.listen_only:
            self._check_listen_only()
        host = given["host"]
        if host is None and not self.interface_specs and not self.multicast:
            raise ConfigurationError(
                "without multicast, set interface= (or host=): the address to bind "
                "unicast heartbeats to and advertise, such as the pod's IP")
        self.host_given = None if host is None else net.host_bytes(host)
        unique_id = given["unique_id"]
        if unique_id is not None:
            unique_id = _bytes_like(unique_id, "unique_id")
            if len(unique_id) != L.UNIQUE_ID_LEN:
                raise ConfigurationError(f"unique_id must be {L.UNIQUE_ID_LEN} bytes")
        self.unique_id_given: bytes | None = unique_id
        keys, mode = check_auth(given["keys"], given["auth"])
        self.keys: _KeysGiven = keys      # a key file is read by resolve()
        self.auth: AuthMode = mode
        # The one conversion of the times to seconds (the engine's unit).
        self.seconds = in_seconds({name: getattr(self, name) for name in SETTINGS
                                   if hasattr(self, name)})
        self.phi: PhiAccrual | None = None
        if self.phi_threshold is not None:      # detector="phi"
            from .detector import PhiAccrual
            self.phi = PhiAccrual(self.phi_threshold, self.seconds["phi_min_std"],
                                  self.seconds["phi_pause"], first_mean=self.frequency_s)

    def resolve(self) -> ServiceConfig:
        """These settings on this host (the I/O: the cards, the source
        address, the key file, our member and its packet); ConfigurationError
        for what this host cannot do."""
        return ServiceConfig._resolved(self)

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
            self.phi_threshold: float | None = None
            self.phi_min_std: int | None = None
            self.phi_pause: int | None = None
            return
        from . import detector as phi
        if threshold is None:
            threshold = phi.DEFAULT_THRESHOLD
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) \
                or not 0 < threshold <= 16:
            raise ConfigurationError(f"phi_threshold must be a number in (0, 16], "
                                     f"not {threshold!r}")
        self.phi_threshold = float(threshold)
        self.phi_min_std = _whole(phi.DEFAULT_MIN_STD_MS if min_std is None else min_std,
                                  "phi_min_std", 1)
        # An acceptable pause of two heartbeats: patient with a lost one or
        # two, and still quicker than the fixed drop time on a clean network.
        self.phi_pause = _whole(2 * self.frequency if pause is None else pause, "phi_pause", 0)

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

    # The times the engine works with, in seconds (the settings are ms).
    @property
    def frequency_s(self) -> float:
        return self.seconds["frequency"]

    @property
    def drop_time_s(self) -> float:
        return self.seconds["drop_time"]

    @property
    def verify_timeout_s(self) -> float:
        return self.seconds["verify_timeout"]

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


@takes_settings
class ServiceConfig(CheckedSettings):
    """Every setting of a membership service, checked (``CheckedSettings``),
    and resolved on this host: the cards, the address we advertise (the
    source address the kernel would send the group's traffic from, unless
    given), the keys of a key file, our member and its packet. Never changed
    once made: the engine keeps what changes (payload, domain, the member
    port a listener got, the keys)."""

    def __init__(self, address: str | None = DEFAULT_GROUP, port: int = DEFAULT_PORT,
                 **settings: Unpack[Settings]) -> None:
        super().__init__(address, port, **settings)
        self._resolve()

    @classmethod
    def _resolved(cls, checked: CheckedSettings) -> ServiceConfig:
        config = cls.__new__(cls)
        vars(config).update(vars(checked))
        config._resolve()
        return config

    def _resolve(self) -> None:
        self._choose_interfaces()
        host = self.host_given
        if host is None:
            # Multicast here (else the check wants an interface): the group is set.
            host = net.host_bytes(self.interface or net.default_source_address(
                cast(str, self.address), self.port))
        self.host = host
        unique_id = self.unique_id_given
        if unique_id is None and self.dns_members:
            # Tomcat's cloud membership names every member by the MD5 of its
            # address as Java writes it: so must we, for both sides to agree on us.
            unique_id = cloud_unique_id(packed(self.unicast_address))
        self.unique_id = _random_unique_id() if unique_id is None else unique_id
        self.key_ring = load_keys(self.keys)
        self.encode()   # refuse settings that cannot be encoded, now

    def _choose_interfaces(self) -> None:
        """The cards ``interface`` names: ``links`` is what the sockets use
        (address and index of each card); ``interface`` the first card's
        address, where we bind and what we advertise by default."""
        family = net.family_of(cast(str, self.address)) if self.multicast else None  # set then
        choices = [choose_interface(spec, family) for spec in self.interface_specs]
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

    @property
    def unicast_address(self) -> str:
        """The address unicast heartbeats are sent from and heard on (and, with
        dns_members, our address in DNS): where the TCP listener binds too."""
        return self.listen_address

    def peer_set(self) -> PeerSet:
        """Where unicast heartbeats go (peers.PeerSet), ourselves left out."""
        return PeerSet(self.peers, port=self.port, own=(packed(self.unicast_address), self.port),
                       interval=self.seconds["dns_interval"], dns=self.dns, srv=self.dns_srv,
                       max_peers=self.max_members)

    def local_member(self, command: bytes = b"") -> Member:
        """Our member as the settings have it."""
        return Member(self.host, self.member_port, self.unique_id, secure_port=self.secure_port,
                      udp_port=self.udp_port, domain=self.domain, payload=self.payload,
                      command=command)

    def encode(self, command: bytes = b"") -> bytes:
        """Our packet, alive time 0 (the sender stamps it)."""
        return encode(self.local_member(command))

    def heartbeat_packet(self, member: Member, origin_ns: int,
                         codec: ModuleType | None = None) -> HeartbeatPacket:
        """``member``'s packet (ours, as the engine has it now), ready to be
        stamped and sent (``origin_ns``: when we started), in ``codec``'s
        implementation (default: the one loaded)."""
        cap = -1 if self.alive_cap_ms is None else self.alive_cap_ms
        packet: HeartbeatPacket = (codec or _codec.impl).HeartbeatPacket(
            encode(member), origin_ns, cap, self.alive_below_zero)
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


def encode(member: Member) -> bytes:
    """``member``'s packet, alive time 0; ConfigurationError when it cannot
    be encoded (a payload too long)."""
    try:
        return _codec.encode(*member.fields())
    except ValueError as error:
        raise ConfigurationError(str(error)) from None


def with_payload(member: Member, payload: bytes | str) -> Member:
    """``member`` advertising ``payload`` (str: UTF-8), checked as at
    construction (ConfigurationError; ``member`` is unchanged)."""
    changed = member.replace(payload=_as_payload(payload))
    encode(changed)
    return changed


def with_domain(member: Member, domain: bytes | str) -> Member:
    """``member`` in ``domain`` (bytes, or Tomcat's text form), checked as
    ``with_payload``."""
    changed = member.replace(domain=_as_domain(domain))
    encode(changed)
    return changed


def _interface_specs(interface: Interfaces) -> list[Card]:
    """``interface``: a card's name, index or address, or a list of them."""
    specs = list(interface) if isinstance(interface, (list, tuple)) else (
        [] if interface is None else [interface])
    if isinstance(interface, (list, tuple)) and not specs:
        raise ConfigurationError("interface must name at least one card (or be None)")
    return specs


def choose_interface(spec: Card, family: int | None,
                     cards: Sequence[Interface] | None = None) -> Choice:
    """The card ``spec`` names and its address of ``family`` (4 or 6; None:
    IPv4, else IPv6), among ``cards`` (None: this host's)."""
    from ..net import interfaces
    if family is not None:
        return interfaces.choose(spec, family, cards)
    try:
        return interfaces.choose(spec, 4, cards)
    except ConfigurationError as error:
        if "has no IPv4 address" not in str(error) and "is IPv6" not in str(error):
            raise
        return interfaces.choose(spec, 6, cards)


# What ``keys`` may be before it is loaded: a ring, pairs made a ring, or a
# key file's path (read by ``load_keys``).
_KeysGiven = Union[auth.HeartbeatKeys, str, os.PathLike[str], None]


def check_auth(keys: Keys, mode: AuthMode | None) -> tuple[_KeysGiven, AuthMode]:
    """The ``keys`` and ``auth`` settings checked, without reading a key
    file: (a HeartbeatKeys, a key file's path or None; the mode's name)."""
    given: _KeysGiven
    if keys is None or isinstance(keys, (auth.HeartbeatKeys, str, bytes, os.PathLike)):
        given = keys
    else:
        try:
            given = auth.HeartbeatKeys(keys)
        except ConfigurationError:
            raise
        except (TypeError, ValueError):
            raise ConfigurationError("keys must be a HeartbeatKeys, a key file's path or "
                                     "(key id, secret) pairs") from None
    if mode is None:
        mode = "off" if given is None else "enforce"
    if mode not in L.AUTH_MODES:
        raise ConfigurationError(f"auth must be 'off', 'permissive' or 'enforce', not {mode!r}")
    if mode != "off" and given is None:
        raise ConfigurationError(f"auth={mode!r} needs keys")
    return given, mode


def load_keys(keys: _KeysGiven) -> auth.HeartbeatKeys | None:
    """The HeartbeatKeys of checked ``keys``: a key file's is read now."""
    if keys is None or isinstance(keys, auth.HeartbeatKeys):
        return keys
    return auth.HeartbeatKeys.from_file(keys)


def keys_and_mode(keys: Keys, mode: AuthMode | None) -> tuple[auth.HeartbeatKeys | None, AuthMode]:
    """(HeartbeatKeys or None, mode name) from the ``keys`` and ``auth`` settings,
    a key file read (ConfigurationError for bad ones)."""
    given, mode = check_auth(keys, mode)
    return load_keys(given), mode


def _random_unique_id() -> bytes:
    """16 random bytes with RFC 4122 version-4 bits, as Tomcat makes them."""
    raw = bytearray(os.urandom(L.UNIQUE_ID_LEN))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    return bytes(raw)
