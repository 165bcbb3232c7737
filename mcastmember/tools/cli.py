"""mcast-demo: join a group and watch its membership, watch one without
joining it, or decode packets.

    mcast-demo join GROUP [--interface ADDR] [--ttl N] [--json] [--key-file PATH] ...
    mcast-demo join [GROUP] --peers HOST[:PORT],... --dns NAME --no-multicast ...
    mcast-demo watch GROUP [--interface ADDR] [--json] ...
    mcast-demo doctor [GROUP] [join's settings] [--pair] [--wait SECONDS] [--json]
    mcast-demo gossip [--bind ADDR[:PORT]] [--join ADDR[:PORT],...] [--node NAME] ...
    mcast-demo doctor --gossip [gossip's settings] [--wait SECONDS] [--json]
    mcast-demo decode HEX|FILE|- [--json]
    mcast-demo keygen [--id N]

Exit status: 0 after a clean leave or decode, 2 for bad arguments or a
malformed packet, 1 when the network refused (cannot join the group); the
doctor: 0 when no check failed, 1 when one did, 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import select
import signal
import socket
import sys
import time

from . import gossip_cli, metrics_flags
from .view import choose_view, colour_wanted, member_address, show_bytes

# typing.TYPE_CHECKING without importing typing (decode and keygen never
# load it): both checkers take this name for it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from types import FrameType
    from typing import Any
    from typing import NoReturn

    from typing_extensions import Self

    from ..tribes.engine.config import Settings
    from .._runtime.events import EventsLost
    from ..tribes.engine.events import MemberEvent
    from ..metrics import MetricsServer
    from ..tribes.fronts.service import McastService
    from . import doctor


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad argument is one clear line and exit status 2."""

    commands: dict[str, _Parser]        # the top parser's: each command's, by name

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


class _Version(argparse.Action):
    """--version: the release, and which codec this install loads (compiled
    or python), looked up only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0,
                         help="show the version and the codec (compiled or python), and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        from .. import __version__
        from ..tribes.engine.packet import implementation

        print(f"{parser.prog} {__version__} ({implementation()} codec)")
        parser.exit(0)


def _build_parser() -> _Parser:
    parser = _Parser(prog="mcast-demo",
                     description="Tomcat Tribes-compatible multicast membership demo.",
                     epilog="'mcast-demo COMMAND --help' shows a command's arguments.")
    parser.add_argument("-V", "--version", action=_Version)
    # Not required: without a command, main() shows this usage (an error
    # naming {join,...} alone would not say what each does).
    commands = parser.add_subparsers(dest="command", title="commands", metavar="COMMAND")

    join = commands.add_parser("join", help="heartbeat as a member and show the membership")
    join.prog = "mcast-demo join"
    _add_member_settings(join)
    _add_output(join)
    _add_metrics(join)

    doctor = commands.add_parser(
        "doctor", help="check why members don't see each other, and what to change",
        description="Check this host and network for a membership with join's settings "
                    "(paste your join command line): one line per check, pass, warn or "
                    "fail, with the fix for each warn and fail. Exit 0 when no check "
                    "failed, 1 when one did, 2 for bad arguments.",
        epilog=DOCTOR_EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    doctor.prog = "mcast-demo doctor"
    _add_member_settings(doctor)
    doctor.add_argument("--wait", type=float, default=5.0, metavar="SECONDS",
                        help="how long to listen for members (and, with --pair, to probe "
                             "the peers) (5)")
    doctor.add_argument("--pair", action="store_true",
                        help="run on every host at once with --peers naming the others: "
                             "probes each by multicast and unicast, reports loss and rtt")
    doctor.add_argument("--json", action="store_true",
                        help=f"one JSON object on stdout ({_see('doctor')})")

    watch = commands.add_parser("watch", help="show a group's membership without joining it "
                                              "(nothing sent)")
    watch.prog = "mcast-demo watch"
    watch.add_argument("group", help="multicast group, e.g. 228.0.0.4 or ff02::4")
    _add_listening(watch)
    watch.add_argument("--ttl", type=int, dest="unused_ttl",
                       help="taken as join takes it, so that join's flags work here too; "
                            "watch sends nothing, so it has no effect")
    _add_table(watch)
    _add_output(watch)
    _add_detector(watch)
    _add_auth(watch, verb="check")
    _add_metrics(watch)

    decode = commands.add_parser("decode", help="show the fields of packets given in hex")
    decode.prog = "mcast-demo decode"
    decode.add_argument("hex", metavar="HEX|FILE|-",
                        help="a packet as hexadecimal, or a capture file (- for stdin) of "
                             "one hex packet per line, blank lines and # comments skipped")
    decode.add_argument("--json", action="store_true", help="print the fields as JSON")

    gossip = commands.add_parser(
        "gossip", help="be a member of a Serf (memberlist) cluster and show it",
        description="Join a Serf cluster (HashiCorp's memberlist gossip) as a member, show "
                    "its membership until Ctrl-C, SIGTERM or --duration, then leave. Flags as "
                    f"Serf's agent spells them ({_see('gossip')}).")
    gossip.prog = "mcast-demo gossip"
    gossip_cli.add_arguments(gossip)
    doctor.add_argument("--gossip", action="store_true",
                        help="check why a gossip member does not join its seeds (--join), with "
                             "gossip's settings below")
    gossip_cli.add_arguments(doctor, doctor=True)

    keygen = commands.add_parser("keygen", help="print a new random key as a key file line")
    keygen.prog = "mcast-demo keygen"
    keygen.add_argument("--id", type=int, default=1, help="the key id, 1-255 (1)")
    parser.commands = {"join": join, "doctor": doctor, "watch": watch, "decode": decode,
                       "keygen": keygen, "gossip": gossip}
    return parser


def _add_member_settings(parser: argparse.ArgumentParser) -> None:
    """A member's settings, as join takes them (doctor takes the same, so
    that an operator can paste the command line of a member)."""
    parser.add_argument("group", nargs="?",
                      help="multicast group, e.g. 228.0.0.4 or ff02::4 (left out only with --no-multicast)")
    _add_listening(parser)
    parser.add_argument("--ttl", type=int, help=f"multicast TTL {_default('ttl')}")
    parser.add_argument("--host", metavar="ADDR",
                        help=f"address to advertise {_default('host')}")
    parser.add_argument("--member-port", type=int,
                        help=f"advertised member port {_default('member_port')}")
    parser.add_argument("--domain",
                      help="domain: ISO-8859-1 text, or {b1,b2,...} as in Tomcat")
    parser.add_argument("--payload", help="payload (UTF-8 text)")
    parser.add_argument("--frequency", type=int, metavar="MS",
                        help=f"heartbeat period in ms {_default('frequency')}")
    _add_table(parser)
    unicast = parser.add_argument_group(f"without multicast ({_see('unicast')})")
    unicast.add_argument("--peers", metavar="HOST[:PORT],...", action="append", default=[],
                         help="peers to send heartbeats to by unicast (repeatable)")
    unicast.add_argument("--dns", metavar="NAME",
                         help="a name whose A/AAAA records are peers, asked every --dns-interval")
    unicast.add_argument("--dns-srv", action="store_true",
                         help="read SRV records of --dns instead (each peer's port from them)")
    unicast.add_argument("--dns-interval", type=int, metavar="MS",
                         help=f"how often to ask DNS again {_default('dns_interval')}")
    unicast.add_argument("--dns-server", metavar="ADDR[:PORT]", action="append",
                         help="DNS server to ask (default: the system's; repeatable)")
    unicast.add_argument("--dns-members", action="store_true",
                         help="members are the DNS answer, as Tomcat's cloud membership has them")
    unicast.add_argument("--no-multicast", action="store_true",
                         help="send and hear heartbeats by unicast only")
    unicast.add_argument("--accept-unknown", action="store_true",
                         help="let members join by unicast from addresses that are not peers")
    parser.add_argument("--verify", action="store_true",
                      help="probe a member's port before removing it at its drop time "
                           "(a second opinion on lossy networks; turns the TCP listener on)")
    parser.add_argument("--verify-timeout", type=int, metavar="MS",
                        help=f"with --verify: how long a probe may take "
                             f"{_default('verify_timeout')}")
    _add_detector(parser)
    parser.add_argument("--tomcat", action="store_true",
                      help="join a Tomcat cluster as a listed member: answer Tribes' channel "
                           f"on the member port and sort after every Tomcat ({_see('tomcat')})")
    parser.add_argument("--no-tcp-listener", action="store_true",
                        help="no TCP listener on the member port (it is on by default, so "
                             f"that a Tomcat listing us gets answers; {_see('tomcat')})")
    _add_auth(parser)


def _default(name: str) -> str:
    """The library's default of setting ``name``, for a flag's help: the
    flag itself has none (a flag not given is a setting not given)."""
    from ..tribes.engine.settings import SETTINGS

    return f"({SETTINGS[name].shown()})"


def _see(page: str) -> str:
    """Where a help text's reader finds more: the docs are a site built from
    the source (no address online), so the page is named by its file."""
    return f"see the docs: docs/{page}.md in the source"


def _add_listening(command: argparse.ArgumentParser) -> None:
    from ..tribes.engine.settings import DEFAULT_PORT

    command.add_argument("--port", type=int, default=DEFAULT_PORT,
                         help=f"membership port, of the group and of unicast peers "
                              f"({DEFAULT_PORT})")
    command.add_argument("--interface", metavar="NAME|ADDR[,...]",
                         help="card to send and receive on: a name (eth0), an index or an "
                              "address; several, comma-separated, to heartbeat on each "
                              "(default: the kernel's choice for IPv4); with peers, where "
                              "unicast binds")


def _add_table(command: argparse.ArgumentParser) -> None:
    command.add_argument("--drop-time", type=int, metavar="MS",
                         help=f"silence in ms after which a member is dropped "
                              f"{_default('drop_time')}")
    command.add_argument("--max-members", type=int,
                         help=f"member table bound {_default('max_members')}")


def _add_output(command: argparse.ArgumentParser) -> None:
    command.add_argument("--duration", type=float, metavar="SECONDS",
                         help="stop after this many seconds (default: until Ctrl-C or SIGTERM)")
    command.add_argument("--json", action="store_true",
                         help="one JSON object per event per line on stdout, nothing else")


def _add_detector(command: argparse.ArgumentParser) -> None:
    command.add_argument("--detector", choices=("fixed", "phi"),
                         help="expire members at the drop time (fixed), or by phi accrual on "
                              "each member's own heartbeat intervals (phi)")
    command.add_argument("--phi-threshold", type=float, metavar="PHI",
                         help=f"with --detector phi: the phi past which a member is removed "
                              f"{_default('phi_threshold')}")


def _add_auth(command: argparse.ArgumentParser, verb: str = "authenticate") -> None:
    command.add_argument("--key-file", metavar="PATH",
                         help=f"{verb} heartbeats with the keys in PATH (one '<id> <64 hex "
                              f"digits>' per line, the first signs; {_see('security')})")
    command.add_argument("--auth", choices=("off", "permissive", "enforce"),
                         help="with --key-file: drop what is not authentic (enforce, the "
                              "default) or accept and mark it (permissive)")


def _add_metrics(command: argparse.ArgumentParser) -> None:
    metrics_flags.add_metrics_flags(command, "the interface address, else 127.0.0.1")


def main(argv: Sequence[str] | None = None) -> int:
    parser = _build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        return _unrecognized(parser.commands.get(args.command, parser), unknown[0])
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        if args.command == "decode":
            return _decode(args)
        if args.command == "keygen":
            return _keygen(args)
        with _LibraryOutput(f"mcast-demo {args.command}"):
            if args.command == "doctor":
                return _doctor(args)
            if args.command == "gossip":
                with _Stop() as stop:
                    return gossip_cli.run(args, stop, _silence_stdout)
            return _run(args)
    except BrokenPipeError:
        _silence_stdout()
        return 0


def _unrecognized(parser: _Parser, argument: str) -> int:
    """An argument the command does not take: named with the command, with
    the flag it likely meant, and the command's usage in short."""
    import difflib

    options = [o for action in parser._actions for o in action.option_strings]
    line = f"{parser.prog}: error: unrecognized argument {argument}"
    if argument.startswith("-"):
        close = difflib.get_close_matches(argument.split("=", 1)[0], options, n=1, cutoff=0.8)
        if close:
            line += f": did you mean {close[0]}?"
    words = [action.metavar or action.dest if action.nargs != "?"
             else f"[{action.metavar or action.dest}]"
             for action in parser._actions if not action.option_strings]
    usage = " ".join([parser.prog, *map(str, words), "[options]"])
    print(f"{line}\nusage: {usage} (see {parser.prog} --help)", file=sys.stderr)
    return 2


class _LibraryOutput:
    """While join, watch or the doctor runs: the library's log lines on
    stderr as ours are (``mcast-demo join: warning: ...``), and no warning
    at import that pure Python runs: the demo says so itself (a note)."""

    def __init__(self, prog: str) -> None:
        self._prog = prog

    def __enter__(self) -> None:
        import logging
        import warnings

        prog = self._prog

        class Lines(logging.Formatter):
            def format(self, record: logging.LogRecord) -> str:
                return f"{prog}: {record.levelname.lower()}: {record.getMessage()}"

        self._warnings = warnings.catch_warnings()
        self._warnings.__enter__()
        warnings.filterwarnings("ignore", "mcastmember: the pure-Python implementation runs",
                                RuntimeWarning)
        self._handler = logging.StreamHandler(sys.stderr)
        self._handler.setFormatter(Lines())
        self._logger = logging.getLogger("mcastmember")
        self._logger.addHandler(self._handler)

    def __exit__(self, *exc: object) -> None:
        self._logger.removeHandler(self._handler)
        self._warnings.__exit__(None, None, None)


def _silence_stdout() -> None:
    """The reader of our stdout went away (``| head -1``): send what is left
    to /dev/null, so neither a later write nor the flush at exit fails."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


# -- decode ---------------------------------------------------------------------
def _decode(args: argparse.Namespace) -> int:
    source = args.hex
    packet = _hex_bytes(source)
    if packet is not None:
        return 0 if _show_packet(packet, args.json) else 2
    if source == "-":
        lines, name = sys.stdin, "stdin"
    else:
        try:
            lines, name = open(source, encoding="utf-8", errors="replace"), source
        except OSError as error:
            print(f"mcast-demo decode: error: {source!r} is not hexadecimal, and not a file "
                  f"we can read ({error.strerror or error})", file=sys.stderr)
            return 2
    with lines:
        return _decode_capture(lines, name, args.json)


def _hex_bytes(text: str) -> bytes | None:
    """The bytes of ``text`` as hexadecimal (spaces and colons between
    digits allowed), or None when it is not."""
    try:
        return bytes.fromhex("".join(text.split()).replace(":", ""))
    except ValueError:
        return None


def _decode_capture(lines: Iterable[str], name: str, json_lines: bool) -> int:
    """A capture: one hex packet per line, blank lines and # comments
    skipped. Each packet is shown; each bad line is named on stderr, and
    makes the exit status 2."""
    shown = bad = 0
    for number, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        packet = _hex_bytes(text)
        if not json_lines:
            if shown + bad:
                print()
            print(f"-- {name} line {number}")
        if packet is None:
            print(f"mcast-demo decode: {name} line {number}: not hexadecimal", file=sys.stderr)
            bad += 1
            continue
        if _show_packet(packet, json_lines, f"{name} line {number}: ", {"line": number}):
            shown += 1
        else:
            bad += 1
    if shown + bad == 0:
        print(f"mcast-demo decode: error: no packet in {name}", file=sys.stderr)
        return 2
    return 2 if bad else 0


def _show_packet(data: bytes, json_lines: bool, where: str = "",
                 extra: dict[str, object] | None = None) -> bool:
    """Print a packet's fields; False (and why, on stderr) when it is malformed."""
    from ..tribes.wire.errors import MalformedPacket
    from ..tribes.engine.packet import decode

    try:
        member = decode(data)
    except MalformedPacket as error:
        print(f"mcast-demo decode: {where}{error}", file=sys.stderr)
        return False
    fields = dict(extra or {})
    fields.update(member.to_dict())
    fields.update(secure_port=member.secure_port, udp_port=member.udp_port,
                  command_hex=member.command.hex(), shutdown=member.is_shutdown)
    if json_lines:
        print(json.dumps(fields))
        return True
    print(f"member      {member_address(member)}")
    print(f"unique id   {fields['unique_id']}")
    print(f"alive       {member.alive_ms} ms")
    print(f"secure port {member.secure_port}")
    print(f"udp port    {member.udp_port}")
    for name in ("domain", "payload", "command"):
        value = getattr(member, name)
        print(f"{name:<11} {show_bytes(value)}")
    if member.is_shutdown:
        print("this is a shutdown packet: the member is leaving")
    return True


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


def _doctor(args: argparse.Namespace) -> int:
    from . import doctor
    from .._runtime.errors import ConfigurationError

    try:
        if not 0 <= args.wait < float("inf"):
            raise ConfigurationError("--wait must be a positive number of seconds")
        if args.gossip:
            report = _doctor_gossip(args)
        else:
            given = [flag for flag in _GOSSIP_FLAGS if getattr(args, flag[2:].replace("-", "_"))]
            if given:
                raise ConfigurationError(f"{given[0]} is a gossip member's: add --gossip")
            settings = _settings(args)
            report = doctor.Doctor(args.group, args.port, settings, wait=args.wait,
                                   pair=args.pair).run()
    except ConfigurationError as error:
        print(f"mcast-demo doctor: error: {_flag_names(str(error))}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.to_dict()))
    else:
        print("\n".join(report.lines(colour_wanted(sys.stdout))))
    return 0 if report.ok else 1


# every flag of a gossip member's (the heartbeat doctor refuses them without --gossip)
_GOSSIP_FLAGS = ("--bind", "--join", "--node", *gossip_cli.FLAGS.values())


def _doctor_gossip(args: argparse.Namespace) -> doctor.Report:
    """doctor --gossip: the checks of a gossip member (ConfigurationError)."""
    from .doctor import gossip
    from .._runtime.errors import ConfigurationError

    if args.group is not None or args.pair:
        raise ConfigurationError("--gossip checks a gossip member: leave out the heartbeat "
                                 f"{'group' if args.group is not None else '--pair'}")
    opts = gossip_cli.options(args)
    if not gossip.seeds(opts):
        raise ConfigurationError("--gossip checks joining: name the seeds with --join or --retry-join")
    return gossip.run_gossip(opts, args.wait)


# -- keygen -------------------------------------------------------------------------
def _keygen(args: argparse.Namespace) -> int:
    from ..tribes.wire import layout as L
    from ..tribes.wire.auth import new_key_line

    if args.id not in L.AUTH_KEY_IDS:
        print(f"mcast-demo keygen: error: key id {args.id} is not 1-255", file=sys.stderr)
        return 2
    print(new_key_line(args.id))
    return 0


# -- join and watch -------------------------------------------------------------------
def _settings(args: argparse.Namespace) -> Settings:
    """McastService's settings from join's, watch's or doctor's arguments
    (ConfigurationError for a combination that cannot work)."""
    from .._runtime.errors import ConfigurationError

    if getattr(args, "duration", None) is not None and not args.duration >= 0:
        raise ConfigurationError("--duration must be a positive number of seconds")
    if args.auth not in (None, "off") and args.key_file is None:
        raise ConfigurationError(f"--auth {args.auth} needs --key-file")
    metrics_flags.check_metrics_flags(args)
    if args.command != "watch":
        multicast = not args.no_multicast
        if multicast and args.group is None:
            raise ConfigurationError("give the multicast GROUP, or --no-multicast with "
                                     "--peers or --dns")
        if not multicast and args.group is not None:
            raise ConfigurationError(f"--no-multicast: leave out the group ({args.group})")
        if args.verify_timeout is not None and not args.verify:
            raise ConfigurationError("--verify-timeout needs --verify")
    # Every setting whose flag this command has; one not given is left to
    # the library's default. Dict displays, not dict(...): the checkers take
    # those for a Settings.
    from typing import cast

    settings: Settings = {}
    given = cast("dict[str, object]", settings)
    for name, dest in _DESTS.items():
        if hasattr(args, dest):
            value = _FROM_FLAG.get(name, _same)(getattr(args, dest))
            if value is not None:
                given[name] = value
    if args.command == "watch":
        settings["listen_only"] = True
    return settings


def _same(value: object) -> object:
    return value


def _interfaces(text: str | None) -> object:
    if text is not None and "," in text:
        # (a list of no card: the text, which names no card either)
        return [part.strip() for part in text.split(",") if part.strip()] or text
    return text


def _peers(specs: list[str]) -> object:
    return [spec for text in specs for spec in text.split(",") if spec.strip()] or None


# How a flag's value becomes its setting's (None: the setting is not given).
_FROM_FLAG: dict[str, Callable[[Any], object]] = {"interface": _interfaces, "peers": _peers,
              "multicast": lambda no: False if no else None,
              "tcp_listener": lambda no: False if no else None,
              "dns_srv": lambda on: on or None, "dns_members": lambda on: on or None,
              "accept_unknown": lambda on: on or None, "verify": lambda on: on or None,
              "tomcat": lambda on: on or None}
# The settings join takes no flag for (the library's defaults serve the demo).
_NOT_FLAGS = frozenset(("loopback", "secure_port", "udp_port", "filter_domain", "unique_id",
                        "alive_cap_ms", "phi_min_std", "phi_pause", "listen_only"))
# Each flag's dest (argparse's name for it): the setting's name but for these.
_OTHER_DEST = {"keys": "key_file", "dns_servers": "dns_server", "multicast": "no_multicast",
               "tcp_listener": "no_tcp_listener"}


def _dests() -> dict[str, str]:
    from ..tribes.engine.settings import SETTINGS

    return {name: _OTHER_DEST.get(name, name) for name in SETTINGS if name not in _NOT_FLAGS}


_DESTS = _dests()


# The settings _settings() passes from flags, and those flags: each is the
# setting's name with dashes, but for these.
# (tcp_listener is named only as a setting: no message of join's names it.)
_FLAGS = {name: "--" + dest.replace("_", "-") for name, dest in _DESTS.items()
          if name != "tcp_listener"}
_FLAGS["port"] = "--port"
# A setting as a ConfigurationError names it: ``name=`` (maybe with a value),
# else the bare name. Longest first, so that dns_srv is not dns.
_SETTING = (r"(?<![\w-])(%s)\b(=(\"[^\"]*\"|'[^']*'|\w+)?)?"
            % "|".join(sorted(_FLAGS, key=len, reverse=True)))
# What follows a bare one-word name, within the sentence, when it names the
# setting ("than frequency (500 ms)"), not a word ("this host", "port 'x'").
# A sentence that opens with one is about that setting ("host '1.2.3' is ...").
_VALUE_NEXT = r" (?:must |\(?-?\d)"


def _flag_names(message: str) -> str:
    """A ConfigurationError's text (it names the library's settings) with
    the flags that set them instead: ``interface=`` is ``--interface``,
    ``dns_interval 10`` is ``--dns-interval 10``, ``multicast=False`` is
    ``--no-multicast``. The library checks; the CLI only words it its way."""
    def flag(match: re.Match[str]) -> str:
        name, assigned, value = match.groups()
        if name == "multicast":             # only its value names the flag
            return _FLAGS[name] if value == "False" else match[0]
        if not (assigned or "_" in name or match.start() == 0
                or re.match(_VALUE_NEXT, message[match.end():])):
            return match[0]
        if value in (None, "True"):
            return _FLAGS[name]
        return _FLAGS[name] + " " + value.strip("'\"")

    return re.sub(_SETTING, flag, message)


def _serve_metrics(service: McastService, args: argparse.Namespace) -> MetricsServer:
    """The metrics server of ``--metrics-port``, bound before we join (so a
    taken port stops us before a heartbeat goes out); ConfigurationError."""
    cfg = service.config
    # never every address of the host unless asked
    return metrics_flags.serve_metrics(service, args, cfg.listen_address if cfg.interface else "127.0.0.1")


def _run(args: argparse.Namespace) -> int:
    from .._runtime.errors import ConfigurationError
    from ..tribes.fronts.service import McastService

    prog = f"mcast-demo {args.command}"
    metrics = None
    try:
        service = McastService(args.group, args.port, **_settings(args))
        if args.metrics_port is not None:
            metrics = _serve_metrics(service, args)
    except ConfigurationError as error:
        print(f"{prog}: error: {_flag_names(str(error))}", file=sys.stderr)
        return 2

    view = choose_view(service, args.json)
    with _Stop() as stop:
        # on the dispatcher thread: a closed pipe ends the demo
        def on_event(event: MemberEvent | EventsLost) -> None:
            try:
                view.on_event(event)
            except BrokenPipeError:
                _silence_stdout()
                stop.set()

        service.add_listener(on_event)
        try:
            try:
                service.start()
            except OSError as error:
                verb = "listen to" if args.command == "watch" else "join"
                print(f"{prog}: cannot {verb} {service.config.describe()}: {error}",
                      file=sys.stderr)
                return 1
            view.started(service, metrics)
            stop.until(args.duration, view.refresh, lambda: view.tick(service))
            service.stop()
            view.stopped(service)
        finally:
            if service.running:
                service.stop()
            if metrics is not None:
                metrics.close()
            view.close()
    return 0


class _Stop:
    """What ends join and watch: SIGINT, SIGTERM, or a closed stdout: seen
    by the dispatcher thread when a write fails, or by the main thread as
    soon as the reader goes (``| head -3`` on a quiet group: no write may
    come for hours). The signal handler takes no lock: it runs in the main
    thread, maybe while that holds one (an Event's, inside its wait()), and
    would wait for itself. The main thread waits on a socket that
    signal.set_wakeup_fd writes to instead, and on stdout's errors."""

    def __init__(self) -> None:
        self._r, self._w = socket.socketpair()
        self._r.setblocking(False)
        self._w.setblocking(False)
        self.requested = False
        self._poll = select.poll() if hasattr(select, "poll") else None
        self._out = _stdout_fd() if self._poll is not None else None
        if self._poll is not None:
            self._poll.register(self._r, select.POLLIN)
            if self._out is not None:
                # No event asked: a pipe whose reader went reports POLLERR,
                # a socket or a terminal that hung up POLLHUP; files nothing.
                self._poll.register(self._out, 0)

    def __enter__(self) -> Self:
        self._handlers = {sig: signal.signal(sig, self._on_signal)
                          for sig in (signal.SIGINT, signal.SIGTERM)}
        self._wakeup = signal.set_wakeup_fd(self._w.fileno())
        return self

    def __exit__(self, *exc: object) -> None:
        signal.set_wakeup_fd(self._wakeup)
        for sig, handler in self._handlers.items():
            signal.signal(sig, handler)
        self._r.close()
        self._w.close()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True

    def set(self) -> None:
        self.requested = True
        try:
            self._w.send(b"\0")
        except OSError:
            pass        # full: a wake-up is pending already

    def until(self, duration: float | None, refresh: float, tick: Callable[[], object]) -> None:
        """Call ``tick`` every ``refresh`` seconds until asked to stop, or
        ``duration`` seconds passed (None: no end)."""
        deadline = None if duration is None else time.monotonic() + duration
        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return
            if self.wait(refresh if remaining is None else min(remaining, refresh)):
                return
            tick()

    def wait(self, timeout: float | None) -> bool:
        """Wait up to ``timeout`` seconds; True once asked to stop."""
        if self.requested:
            return True
        if self._poll is None:
            if select.select([self._r], [], [], timeout)[0]:
                self.requested = True       # a signal's byte, or set()'s
            return self.requested
        for fd, _ in self._poll.poll(None if timeout is None else timeout * 1000):
            if fd == self._out:             # the reader of our stdout went away
                _silence_stdout()
            self.requested = True           # else a signal's byte, or set()'s
        return self.requested


def _stdout_fd() -> int | None:
    """stdout's descriptor, or None (none, or not a file: under pytest's capsys)."""
    try:
        return sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):
        return None
