"""Settings shared by the threaded service, the asyncio front and the CLI:
checked once, with Tomcat's defaults, and turned into our own member."""

import os

from . import _layout as L
from . import _codec
from . import auth
from . import net
from .errors import ConfigurationError
from .member import Member, domain_from_text

DEFAULT_GROUP = "228.0.0.4"
DEFAULT_PORT = 45564
DEFAULT_FREQUENCY_MS = 500
DEFAULT_DROP_TIME_MS = 3000
DEFAULT_MEMBER_PORT = 4000
DEFAULT_MAX_MEMBERS = 1024


def _bytes_like(value, name):
    """The bytes of a bytes-like value (bytes, bytearray, memoryview...). An
    int is refused, not taken as a length: bytes(16) is sixteen zero bytes."""
    if isinstance(value, bytes):
        return value
    try:
        with memoryview(value) as view:
            return view.tobytes()
    except TypeError:
        raise ConfigurationError(f"{name} must be bytes or text, not {value!r}") from None


def _as_domain(domain):
    if isinstance(domain, str):
        try:
            return domain_from_text(domain)
        except ValueError as error:
            raise ConfigurationError(str(error)) from None
    return _bytes_like(domain, "domain")


def _as_payload(payload):
    if isinstance(payload, str):
        return payload.encode("utf-8")
    return _bytes_like(payload, "payload")


def _flag(value, name):
    """True or False only: bool("no") is True, so a string must not pass."""
    if not isinstance(value, bool):
        raise ConfigurationError(f"{name} must be True or False, not {value!r}")
    return value


def _whole(value, name, low, high=None):
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


class ServiceConfig:
    """Every setting of a membership service, checked.

    Times are in milliseconds, as in Tomcat's ``server.xml``. ``interface`` is
    the IPv4 address to send and receive on (None: the kernel's default
    route); ``host`` the address we advertise (default: the interface).
    ``alive_cap_ms`` keeps the alive time we advertise at or below it (past
    it the value wraps round to 0, so that it still changes with every
    heartbeat: Tomcat copies a member's payload only when its alive time
    changed); None leaves it uncapped. ``tcp_listener`` serves Tribes' TCP
    channel on the member port, so that Tomcat lists us and every message it
    sends us is answered at once (see probe.py, channel.py); with it the
    alive time is advertised below zero (-1 to -alive_cap_ms-1, default cap
    two heartbeats), so that every Tomcat sorts us after every Tomcat node
    and never asks us first for its sessions. ``tomcat=True`` is the short
    way to join a Tomcat cluster: it turns the TCP listener on.

    Bytes settings (``domain``, ``payload``, ``unique_id``) take bytes-like
    values (``domain`` and ``payload`` text too), never an int; switches
    (``loopback``, ``filter_domain``, ``tcp_listener``, ``tomcat``) take True or
    False only; times and counts take whole numbers, a float such as 500.0
    included when it has no fractional part.

    ``keys`` turns on authenticated heartbeats (see auth.py and README
    "Security"): an ``auth.KeyRing``, a list of ``(key id, 32-byte secret)``
    pairs (the first signs), or the path of a key file. ``auth`` is "off",
    "permissive" or "enforce" (the default once keys are set; "off" without).
    """

    def __init__(self, address=DEFAULT_GROUP, port=DEFAULT_PORT, *, interface=None, ttl=None,
                 loopback=True, frequency=DEFAULT_FREQUENCY_MS, drop_time=DEFAULT_DROP_TIME_MS,
                 host=None, member_port=DEFAULT_MEMBER_PORT, secure_port=-1, udp_port=-1,
                 domain=b"", payload=b"", max_members=DEFAULT_MAX_MEMBERS,
                 filter_domain=False, unique_id=None, alive_cap_ms=None, tcp_listener=None,
                 tomcat=False, keys=None, auth=None):
        self.address = net.check_group(address)
        self.port = net.check_port(port)
        self.interface = None if interface is None else net.check_interface(interface)
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
        self.tcp_listener = (self.tomcat if tcp_listener is None
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
        if host is None:
            host = self.interface or net.default_source_address(self.address, self.port)
        self.host = net.host_bytes(host)
        unique_id = (_random_unique_id() if unique_id is None
                     else _bytes_like(unique_id, "unique_id"))
        if len(unique_id) != L.UNIQUE_ID_LEN:
            raise ConfigurationError(f"unique_id must be {L.UNIQUE_ID_LEN} bytes")
        self.unique_id = unique_id
        self.key_ring, self.auth = _as_auth(keys, auth)
        self.local_member()   # refuse settings that cannot be encoded, now
        self.encode()

    @property
    def auth_mode(self):
        """``auth`` as the number the table and the index take (_layout.AUTH_*)."""
        return L.AUTH_MODES[self.auth]

    def set_keys(self, keys, auth=None):
        """Other keys (None: none) and mode, checked as at construction."""
        self.key_ring, self.auth = _as_auth(keys, auth)

    def local_member(self, command=b""):
        return Member(self.host, self.member_port, self.unique_id, secure_port=self.secure_port,
                      udp_port=self.udp_port, domain=self.domain, payload=self.payload,
                      command=command)

    def encode(self, command=b""):
        """Our packet, alive time 0 (the sender stamps it)."""
        try:
            return _codec.encode(*self.local_member(command).fields())
        except ValueError as error:
            raise ConfigurationError(str(error)) from None

    def heartbeat_packet(self, origin_ns, command=b"", codec=None):
        """Our packet, ready to be stamped and sent (``origin_ns``: when we
        started), in ``codec``'s implementation (default: the one loaded)."""
        cap = -1 if self.alive_cap_ms is None else self.alive_cap_ms
        return (codec or _codec.impl).HeartbeatPacket(self.encode(command), origin_ns, cap,
                                                      self.alive_below_zero)

    @property
    def listen_address(self):
        """Where the TCP listener binds: the interface, else the address we
        advertise (where Tomcat connects); never every address of the host."""
        return self.interface or self.local_member().address

    def set_payload(self, payload):
        payload = _as_payload(payload)
        old, self.payload = self.payload, payload
        try:
            self.encode()
        except ConfigurationError:
            self.payload = old
            raise

    def set_domain(self, domain):
        domain = _as_domain(domain)
        old, self.domain = self.domain, domain
        try:
            self.encode()
        except ConfigurationError:
            self.domain = old
            raise


def _as_auth(keys, mode):
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


def _random_unique_id():
    """16 random bytes with RFC 4122 version-4 bits, as Tomcat makes them."""
    raw = bytearray(os.urandom(L.UNIQUE_ID_LEN))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    return bytes(raw)
