"""mcast-demo: join a group and watch its membership, or decode a packet.

    mcast-demo join GROUP [--interface ADDR] [--ttl N] [--json] [--key-file PATH] ...
    mcast-demo join [GROUP] --peers HOST[:PORT],... --dns NAME --no-multicast ...
    mcast-demo doctor [GROUP] [join's settings] [--pair] [--wait SECONDS] [--json]
    mcast-demo decode HEX [--json]
    mcast-demo keygen [--id N]

Exit status: 0 after a clean leave or decode, 2 for bad arguments or a
malformed packet, 1 when the network refused (cannot join the group); the
doctor: 0 when no check failed, 1 when one did, 2 for bad arguments.
"""

import argparse
import json
import os
import signal
import sys
import threading
import time


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad argument is one clear line and exit status 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def _build_parser():
    parser = _Parser(prog="mcast-demo",
                     description="Tomcat Tribes-compatible multicast membership demo.")
    commands = parser.add_subparsers(dest="command", metavar="{join,doctor,decode,keygen}")
    commands.required = True

    join = commands.add_parser("join", help="heartbeat as a member and show the membership")
    join.prog = "mcast-demo join"
    _add_settings(join)
    join.add_argument("--duration", type=float, metavar="SECONDS",
                      help="leave after this many seconds (default: until Ctrl-C or SIGTERM)")
    join.add_argument("--json", action="store_true",
                      help="one JSON object per event per line on stdout, nothing else")

    doctor = commands.add_parser(
        "doctor", help="check why members don't see each other, and say what to change",
        description="Check this host and network for a membership with join's settings "
                    "(paste your join command line): one line per check, pass, warn or "
                    "fail, with the fix for each warn and fail. Exit 0 when no check "
                    "failed, 1 when one did, 2 for bad arguments.",
        epilog=DOCTOR_EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    doctor.prog = "mcast-demo doctor"
    _add_settings(doctor)
    doctor.add_argument("--wait", type=float, default=5.0, metavar="SECONDS",
                        help="how long to listen for members (and, with --pair, to probe "
                             "the peers) (5)")
    doctor.add_argument("--pair", action="store_true",
                        help="run on every host at once with --peers naming the others: "
                             "probes each by multicast and unicast, reports loss and rtt")
    doctor.add_argument("--json", action="store_true",
                        help="one JSON object on stdout (see README \"When members don't "
                             "see each other\")")

    decode = commands.add_parser("decode", help="show the fields of a packet given in hex")
    decode.prog = "mcast-demo decode"
    decode.add_argument("hex", help="the packet as hexadecimal")
    decode.add_argument("--json", action="store_true", help="print the fields as JSON")

    keygen = commands.add_parser("keygen", help="print a new random key as a key file line")
    keygen.prog = "mcast-demo keygen"
    keygen.add_argument("--id", type=int, default=1, help="the key id, 1-255 (1)")
    return parser


def _add_settings(parser):
    """The member's settings, as join takes them (doctor takes the same, so
    that an operator can paste the command line of a member)."""
    add = parser.add_argument
    add("group", nargs="?",
        help="multicast group, e.g. 228.0.0.4 or ff02::4 (left out only with --no-multicast)")
    add("--port", type=int, default=45564,
        help="membership port, of the group and of unicast peers (45564)")
    add("--interface", metavar="NAME|ADDR[,...]",
        help="card to send and receive on: a name (eth0), an index or an address; several, "
             "comma-separated, to heartbeat on each (default: the kernel's choice for IPv4); "
             "with peers, where unicast binds")
    add("--ttl", type=int, help="multicast TTL (default: the OS default, 1)")
    add("--host", metavar="ADDR", help="address to advertise (default: the interface address)")
    add("--member-port", type=int, default=4000, help="advertised member port (4000)")
    add("--domain", default="", help="domain: ISO-8859-1 text, or {b1,b2,...} as in Tomcat")
    add("--payload", default="", help="payload (UTF-8 text)")
    add("--frequency", type=int, default=500, metavar="MS", help="heartbeat period in ms (500)")
    add("--drop-time", type=int, default=3000, metavar="MS",
        help="silence in ms after which a member is dropped (3000)")
    add("--max-members", type=int, default=1024, help="member table bound (1024)")
    unicast = parser.add_argument_group("without multicast (see README)").add_argument
    unicast("--peers", metavar="HOST[:PORT],...", action="append", default=[],
            help="peers to send heartbeats to by unicast (repeatable)")
    unicast("--dns", metavar="NAME",
            help="a name whose A/AAAA records are peers, asked every --dns-interval")
    unicast("--dns-srv", action="store_true",
            help="read SRV records of --dns instead (each peer's port from them)")
    unicast("--dns-interval", type=int, default=5000, metavar="MS",
            help="how often to ask DNS again (5000)")
    unicast("--dns-server", metavar="ADDR[:PORT]", action="append",
            help="DNS server to ask (default: the system's; repeatable)")
    unicast("--dns-members", action="store_true",
            help="members are the DNS answer, as Tomcat's cloud membership has them")
    unicast("--no-multicast", action="store_true",
            help="send and hear heartbeats by unicast only")
    unicast("--accept-unknown", action="store_true",
            help="let members join by unicast from addresses that are not peers")
    add("--verify", action="store_true",
        help="probe a member's port before removing it at its drop time (a second opinion "
             "on lossy networks; turns the TCP listener on)")
    add("--detector", choices=("fixed", "phi"), default="fixed",
        help="expire members at the drop time (fixed), or by phi accrual on each member's "
             "own heartbeat intervals (phi)")
    add("--phi-threshold", type=float, metavar="PHI",
        help="with --detector phi: the phi past which a member is removed (8)")
    add("--tomcat", action="store_true",
        help="join a Tomcat cluster as a listed member: answer Tribes' channel on the member "
             "port and sort after every Tomcat (see README)")
    add("--key-file", metavar="PATH",
        help="authenticate heartbeats with the keys in PATH (one '<id> <64 hex digits>' per "
             "line, the first signs; see README \"Security\")")
    add("--auth", choices=("off", "permissive", "enforce"),
        help="with --key-file: drop what is not authentic (enforce, the default) or accept "
             "and mark it (permissive)")


def _settings(args):
    """(group, port, the keyword settings of ServiceConfig) from join's
    arguments; ConfigurationError for a combination that cannot work."""
    from .errors import ConfigurationError

    multicast = not args.no_multicast
    if multicast and args.group is None:
        raise ConfigurationError("give the multicast GROUP, or --no-multicast with "
                                 "--peers or --dns")
    if not multicast and args.group is not None:
        raise ConfigurationError(f"--no-multicast: leave out the group ({args.group})")
    peers = [spec for specs in args.peers for spec in specs.split(",") if spec.strip()]
    interface = args.interface
    if interface is not None and "," in interface:
        interface = [part.strip() for part in interface.split(",") if part.strip()]
    if args.auth not in (None, "off") and args.key_file is None:
        raise ConfigurationError(f"--auth {args.auth} needs --key-file")
    return args.group, args.port, dict(
        interface=interface, ttl=args.ttl, host=args.host, member_port=args.member_port,
        domain=args.domain, payload=args.payload, frequency=args.frequency,
        drop_time=args.drop_time, max_members=args.max_members, tomcat=args.tomcat,
        multicast=multicast, peers=peers, dns=args.dns, dns_srv=args.dns_srv,
        dns_interval=args.dns_interval, dns_servers=args.dns_server,
        dns_members=args.dns_members, accept_unknown=args.accept_unknown, verify=args.verify,
        detector=args.detector, phi_threshold=args.phi_threshold, keys=args.key_file,
        auth=args.auth)

def main(argv=None):
    args = _build_parser().parse_args(argv)
    try:
        if args.command == "decode":
            return _decode(args)
        if args.command == "keygen":
            return _keygen(args)
        if args.command == "doctor":
            return _doctor(args)
        return _join(args)
    except BrokenPipeError:
        _silence_stdout()
        return 0


def _silence_stdout():
    """The reader of our stdout went away (``| head -1``): send what is left
    to /dev/null, so neither a later write nor the flush at exit fails."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


# -- decode ---------------------------------------------------------------------
def _decode(args):
    from .errors import MalformedPacket
    from .packet import decode

    text = "".join(args.hex.split()).replace(":", "")
    try:
        data = bytes.fromhex(text)
    except ValueError:
        print("mcast-demo decode: error: not hexadecimal", file=sys.stderr)
        return 2
    try:
        member = decode(data)
    except MalformedPacket as error:
        print(f"mcast-demo decode: {error}", file=sys.stderr)
        return 2
    fields = member.to_dict()
    fields.update(secure_port=member.secure_port, udp_port=member.udp_port,
                  command_hex=member.command.hex(), shutdown=member.is_shutdown)
    if args.json:
        print(json.dumps(fields))
        return 0
    print(f"member      {fields['host']}:{member.port}")
    print(f"unique id   {fields['unique_id']}")
    print(f"alive       {member.alive_ms} ms")
    print(f"secure port {member.secure_port}")
    print(f"udp port    {member.udp_port}")
    for name in ("domain", "payload", "command"):
        value = getattr(member, name)
        print(f"{name:<11} {_show_bytes(value)}")
    if member.is_shutdown:
        print("this is a shutdown packet: the member is leaving")
    return 0


def _show_auth(member, prefix=""):
    """yes/no for a member judged by its trailer; "" when we do not authenticate."""
    if member.authenticated is None:
        return ""
    return prefix + ("yes" if member.authenticated else "no")


def _show_bytes(value):
    if not value:
        return "(empty)"
    try:
        text = value.decode("ascii")
        if text.isprintable():
            return f"{text!r} ({len(value)} B)"
    except UnicodeDecodeError:
        pass
    return f"{value.hex()} ({len(value)} B)"


# -- keygen -------------------------------------------------------------------------
def _keygen(args):
    from . import _layout as L
    from .auth import new_key_line

    if args.id not in L.AUTH_KEY_IDS:
        print(f"mcast-demo keygen: error: key id {args.id} is not 1-255", file=sys.stderr)
        return 2
    print(new_key_line(args.id))
    return 0


# -- doctor -------------------------------------------------------------------------
DOCTOR_EXAMPLE = """\
example (one line per check; a fix for each warn and fail):

  $ mcast-demo doctor 228.0.0.4 --interface eth0 --domain shop --drop-time 2500
  PASS interface  eth0 is up, multicast, with 10.0.0.5 (10.0.0.5 is eth0's only IPv4 address)
  ...
  WARN domain     1 member in another domain: 10.0.0.7:4000 in 'shop2'; this host is in
                  'shop'  fix: use one domain on every node: --domain shop2 here, or 'shop' there
  WARN drop_time  drop time 2500 ms is under 3 periods of 10.0.0.7:4000 (1001 ms): members
                  will be dropped and added again  fix: --drop-time 6000 on every node (6 periods)

between hosts, on each at once, naming the others (like omping):

  $ mcast-demo doctor 228.0.0.4 --interface eth0 --pair --peers 10.0.0.6,10.0.0.7
"""


def _doctor(args):
    from . import doctor
    from .errors import ConfigurationError

    try:
        if not args.wait >= 0:
            raise ConfigurationError("--wait must be a positive number of seconds")
        group, port, settings = _settings(args)
        report = doctor.Doctor(group, port, settings, wait=args.wait, pair=args.pair).run()
    except ConfigurationError as error:
        print(f"mcast-demo doctor: error: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.to_dict()))
    else:
        print("\n".join(report.lines()))
    return 0 if report.ok else 1


# -- join -------------------------------------------------------------------------
def _join(args):
    from .errors import ConfigurationError
    from .service import McastService

    try:
        if args.duration is not None and not args.duration >= 0:
            raise ConfigurationError("--duration must be a positive number of seconds")
        group, port, settings = _settings(args)
        service = McastService(group, port, **settings)
    except ConfigurationError as error:
        print(f"mcast-demo join: error: {error}", file=sys.stderr)
        return 2

    view = _JsonView() if args.json else (_TableView(service) if sys.stdout.isatty()
                                          else _LineView())
    leave = threading.Event()

    def on_event(event):    # on the dispatcher thread: a closed pipe ends the demo
        try:
            view.on_event(event)
        except BrokenPipeError:
            _silence_stdout()
            leave.set()

    service.add_listener(on_event)

    def _on_signal(signum, frame):
        leave.set()

    previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            service.start()
        except OSError as error:
            print(f"mcast-demo join: cannot join {service.config.describe()}: {error}",
                  file=sys.stderr)
            return 1
        view.started(service)
        deadline = None if args.duration is None else time.monotonic() + args.duration
        while not leave.is_set():
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                break
            leave.wait(min(remaining, view.refresh) if remaining is not None else view.refresh)
            view.tick(service)
        service.stop()
        view.stopped(service)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if service.running:
            service.stop()
    return 0


class _JsonView:
    """One JSON object per event per line; nothing else on stdout."""
    refresh = 1.0

    def __init__(self):
        self._lock = threading.Lock()

    def on_event(self, event):
        if event.member is None:     # EventsLost: we fell behind
            line = json.dumps({"event": event.kind, "count": event.count})
        else:
            line = json.dumps(event.to_dict())
        with self._lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    def started(self, service):
        pass

    def tick(self, service):
        pass

    def stopped(self, service):
        pass


class _LineView(_JsonView):
    """A line per event, for logs and pipes."""

    def _say(self, text):
        with self._lock:
            sys.stdout.write(time.strftime("%H:%M:%S ") + text + "\n")
            sys.stdout.flush()

    def on_event(self, event):
        m = event.member
        if m is None:
            self._say(f"{event.count} events lost: the listener fell behind")
            return
        reason = f" ({event.reason})" if event.reason else ""
        self._say(f"{event.kind}{reason}: {m.address}:{m.port} id={m.unique_id.hex()} "
                  f"domain={_show_bytes(m.domain)} payload={_show_bytes(m.payload)}"
                  f"{_show_auth(m, ' authenticated=')}")

    def started(self, service):
        me = service.local_member
        cfg = service.config
        self._say(f"joined {cfg.describe()} as {me.address}:{me.port} "
                  f"id={me.unique_id.hex()} ({service.stats()['implementation']} codec, "
                  f"auth {cfg.auth})")

    def stopped(self, service):
        self._say("left the group (shutdown packet sent)")


class _TableView(_LineView):
    """A table that redraws on a terminal."""

    def __init__(self, service):
        super().__init__()
        self.refresh = min(1.0, service.config.frequency / 1000.0)
        self._last = "(nothing yet)"

    def on_event(self, event):
        m = event.member
        if m is None:
            self._last = f"{time.strftime('%H:%M:%S')} {event.count} events lost"
            return
        reason = f" ({event.reason})" if event.reason else ""
        self._last = f"{time.strftime('%H:%M:%S')} {event.kind}{reason} {m.address}:{m.port}"

    def started(self, service):
        self.tick(service)

    def tick(self, service):
        cfg = service.config
        me = service.local_member
        members = service.members()
        stats = service.stats()
        lines = [f"mcast-demo  {cfg.describe()}  me {me.address}:{me.port} "
                 f"id {me.unique_id.hex()[:12]}  ({stats['implementation']} codec, auth {cfg.auth})",
                 f"{len(members)} other member(s); Ctrl-C leaves", "",
                 f"{'host:port':<24} {'unique id':<14} {'alive':>10} {'auth':<4}  "
                 "domain / payload"]
        for m in members:
            lines.append(f"{m.address + ':' + str(m.port):<24} {m.unique_id.hex()[:12]:<14} "
                         f"{m.alive_ms / 1000:>9.1f}s {_show_auth(m) or '-':<4}  "
                         f"{_show_bytes(m.domain)} / {_show_bytes(m.payload)}")
        lines += ["", f"last change: {self._last}",
                  f"received {stats['received']}  malformed "
                  f"{sum(v for k, v in stats.items() if k.startswith('malformed.'))}  "
                  f"sent {stats['sent']}  not authentic "
                  f"{sum(v for k, v in stats.items() if k.startswith('auth.'))}"]
        with self._lock:
            sys.stdout.write("\x1b[H\x1b[2J" + "\n".join(lines) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
