"""``mcast-demo gossip``: be a member of a Serf (memberlist) cluster and show
its membership; its flags, as Serf's agent spells them, are the doctor's too
(``mcast-demo doctor --gossip``).

    mcast-demo gossip [--bind ADDR[:PORT]] [--advertise ADDR[:PORT]] [--node NAME]
                      [--tag KEY=VALUE... | --tags-file FILE]
                      [--join ADDR[:PORT][,...]] [--replay]
                      [--retry-join ADDR[:PORT]]... [--retry-interval D] [--retry-max N]
                      [--snapshot FILE [--rejoin]]
                      [--encrypt BASE64KEY | --keyring-file FILE] [--label TEXT]
                      [--profile lan|wan|local] [--protocol N] [--reconnect-interval D]
                      [--reconnect-timeout D] [--tombstone-timeout D] [--json] [--duration S]
                      [--metrics-port PORT [--metrics-address ADDR] [--metrics-prefix NAME]]
                      [--rpc-addr ADDR:PORT] [--rpc-auth TOKEN]
                      [--event-handler [FILTER=]SCRIPT]... [--handler-timeout D]
                      [--handler-concurrency N] [--handler-queue N]

Durations (D) are written as Serf's agent takes them, in Go's syntax: "30s",
"24h", "1m30s".

Exit status: 0 after a clean leave (Ctrl-C, SIGTERM, ``--duration``, or a
closed stdout), 2 for bad arguments, 1 when the network refused (the address
cannot be bound, no seed could be joined, the first --retry-join attempt and
--retry-max more joined nobody, or the cluster gave our name to another
node).
"""

from __future__ import annotations

import argparse
import ipaddress
import socket
import sys
import threading

from .._runtime.errors import ConfigurationError
from .metrics_flags import add_metrics_flags, check_metrics_flags, serve_metrics
from .view import host_port

# typing.TYPE_CHECKING without importing typing (as cli.py: decode and keygen
# never load it): both checkers take this name for it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Protocol

    from .._runtime.events import EventsLost
    from ..gossip.fronts.service import SerfService
    from ..gossip.fronts.settings import SerfServiceSettings
    from ..gossip.serf.node import JoinDone, LeaveDone, SerfNodeEvent

    class Stopper(Protocol):
        """What ends the demo (the CLI's SIGINT/SIGTERM/closed-stdout waiter)."""

        def wait(self, timeout: float | None) -> bool: ...

        def set(self) -> None: ...

        def until(self, duration: float | None, refresh: float, tick: Callable[[], object]) -> None: ...

# SerfService's positional defaults (gossip/fronts/settings.py), written
# here so that building mcast-demo's parser loads no gossip code (the tests
# keep them equal): Serf's port, for --bind and each --join without one, and
# where a node binds without --bind: loopback, never every card of the host.
DEFAULT_PORT = 7946
DEFAULT_BIND = "127.0.0.1"
#: the flag that gives each of SerfService's keyword settings (the others
#: keep their declared defaults); --node, --bind and --join give the rest
FLAGS = {"tags": "--tag", "tags_file": "--tags-file", "keys": "--encrypt", "keyring_file": "--keyring-file",
         "label": "--label", "profile": "--profile", "protocol_version": "--protocol",
         "reconnect_interval": "--reconnect-interval", "reconnect_timeout": "--reconnect-timeout",
         "tombstone_timeout": "--tombstone-timeout", "replay_on_join": "--replay", "advertise": "--advertise", "retry_join": "--retry-join",
         "retry_interval": "--retry-interval", "retry_max": "--retry-max"}
FLAGS.update({"snapshot_path": "--snapshot", "rejoin": "--rejoin"})
FLAGS.update({"event_handlers": "--event-handler", "handler_timeout": "--handler-timeout",
              "handler_concurrency": "--handler-concurrency", "handler_queue": "--handler-queue"})
FLAGS.update({"rpc_addr": "--rpc-addr", "rpc_auth": "--rpc-auth"})
#: where the demo's agent RPC listens without --rpc-addr: the agent's own default, loopback only
DEFAULT_RPC = ("127.0.0.1", 7373)
#: the flags that take a Serf (Go) duration, by the setting each gives (seconds)
DURATIONS = {"reconnect_interval": "--reconnect-interval", "reconnect_timeout": "--reconnect-timeout",
             "tombstone_timeout": "--tombstone-timeout"}
#: memberlist's timing profiles, as Serf's -profile names them (gossip/memberlist/profiles.py)
PROFILES = ("lan", "wan", "local")
#: the Serf protocols a member speaks (gossip/serf/layout.py), the newest by default
PROTOCOLS = range(2, 6)

# mcast-demo gossip's help, in groups, each by its title
_GROUPS = {
    "member": "this member",
    "join": "joining the cluster",
    "security": "the cluster's key and label",
    "handlers": "event handlers (scripts run for the member's events, as Serf agent's)",
    "rpc": "the agent's RPC (serf members, serf monitor... -rpc-addr=ADDR:PORT)",
    "timing": "timing and protocol (Serf's agent's defaults unless given; durations D as it "
              "writes them: 30s, 24h, 1m30s)",
    "output": "output",
}


def add_arguments(parser: argparse.ArgumentParser, doctor: bool = False) -> None:
    """The gossip member's flags (the doctor takes them too, to check them):
    in groups for mcast-demo gossip's help, in one for the doctor's."""
    if doctor:
        one = parser.add_argument_group("gossip (a Serf cluster's member; see the docs: docs/gossip.md "
                                        "in the source)")
        group = dict.fromkeys(_GROUPS, one)
    else:
        group = {key: parser.add_argument_group(title) for key, title in _GROUPS.items()}
    member, join, security, timing = group["member"], group["join"], group["security"], group["timing"]
    member.add_argument("--bind", metavar="ADDR[:PORT]",
                        help=f"address to bind and advertise, and its port (default {DEFAULT_BIND}:"
                             f"{DEFAULT_PORT}: loopback; give this host's address on the cluster's network)")
    member.add_argument("--advertise", metavar="ADDR[:PORT]",
                        help="the address (and port) the others list and reach this member at, when it is "
                             "not --bind's (behind NAT, in a container, or with --bind 0.0.0.0)")
    member.add_argument("--node", metavar="NAME", help="our node name, unique in the cluster (the host name)")
    member.add_argument("--tag", metavar="KEY=VALUE", action="append", default=[],
                        help="a tag (repeatable), as serf members shows it")
    member.add_argument("--tags-file", metavar="FILE",
                        help="the tags from a JSON object file (Serf's), written again when they "
                             "change; a missing file is created then (not with --tag)")
    join.add_argument("--join", metavar="ADDR[:PORT][,...]", action="append", default=[],
                      help=f"a running member (seed) to join, port {DEFAULT_PORT} by default (repeatable)")
    join.add_argument("--retry-join", metavar="ADDR[:PORT]", action="append", default=[],
                      help="a seed joined in the background, tried again every --retry-interval until "
                           "one attempt joins another member: the member does not exit while the seeds "
                           "are not up (repeatable)")
    join.add_argument("--retry-interval", metavar="D",
                      help="the wait between two --retry-join attempts (default 30s; seconds or a "
                           "duration: 0.5, 500ms)")
    join.add_argument("--retry-max", metavar="N",
                      help="exit 1 when the first --retry-join attempt and N more joined nobody "
                           "(default 0: retry for ever)")
    join.add_argument("--snapshot", metavar="FILE",
                      help="Serf's snapshot file: members and clocks appended as they change; at start "
                           "the clocks are restored (old user events are not replayed) and its members "
                           "rejoined, those last seen alive then those that failed (an agent's file works)")
    # default None, not False: a flag not given is the setting not given
    join.add_argument("--rejoin", action="store_true", default=None,
                      help="with --snapshot, rejoin its members even after this member left gracefully")
    join.add_argument("--replay", action="store_true", default=None,
                      help="when joining (--join, --retry-join), deliver the user events the cluster "
                           "still holds from before (by default a joiner ignores them)")
    security.add_argument("--encrypt", metavar="BASE64KEY",
                          help="the cluster's encryption key (serf keygen makes one)")
    security.add_argument("--keyring-file", metavar="FILE",
                          help="the keys from a keyring file (Serf's: a JSON list of base64 keys, the "
                               "primary first), written again when serf keys changes them")
    security.add_argument("--label", metavar="TEXT",
                          help="the cluster's label (memberlist >= 0.3's Label; no Serf agent sets one): "
                               "every packet and stream carries it")
    handlers = group["handlers"]
    handlers.add_argument("--event-handler", metavar="[FILTER=]SCRIPT", action="append", default=[],
                          help="run SCRIPT with /bin/sh -c for the events FILTER names (member-join, "
                               "member-leave, member-failed, member-update, member-reap, user, user:NAME, "
                               "query, query:NAME, *; comma-separated; none: every event), with Serf's "
                               "SERF_* variables and stdin; a query's script answers it with its output "
                               "(repeatable)")
    handlers.add_argument("--handler-timeout", metavar="D",
                          help="kill a handler still running after D (default 60s; seconds or a duration)")
    handlers.add_argument("--handler-concurrency", metavar="N",
                          help="handler runs at once (default 1: one after another, in order)")
    handlers.add_argument("--handler-queue", metavar="N",
                          help="handler runs waiting for those; past them a run is dropped (default 1024)")
    rpc = group["rpc"]
    rpc.add_argument("--rpc-addr", metavar="ADDR:PORT",
                     help=f"where Serf's RPC listens, for the serf CLI and Serf's RPC clients (default "
                          f"{DEFAULT_RPC[0]}:{DEFAULT_RPC[1]}, as the agent's: loopback; when another agent "
                          "or demo has it, none)")
    rpc.add_argument("--rpc-auth", metavar="TOKEN",
                     help="the token RPC clients must give (serf ... -rpc-auth=TOKEN)")
    timing.add_argument("--profile", metavar="lan|wan|local",
                        help="memberlist's timings for a LAN (the default), a WAN, or members on one host")
    timing.add_argument("--protocol", metavar="N",
                        help=f"Serf's protocol, {PROTOCOLS[0]}-{PROTOCOLS[-1]} (default {PROTOCOLS[-1]}; "
                             "lower only while older agents remain)")
    timing.add_argument("--reconnect-interval", metavar="D",
                        help="how often a failed member is tried again (default 30s)")
    timing.add_argument("--reconnect-timeout", metavar="D",
                        help="how long a failed member is tried before it is forgotten (default 24h)")
    timing.add_argument("--tombstone-timeout", metavar="D",
                        help="how long a member that left is remembered (default 24h)")
    if not doctor:
        output = group["output"]
        output.add_argument("--duration", type=float, metavar="SECONDS",
                            help="leave after this many seconds (default: at Ctrl-C or SIGTERM)")
        output.add_argument("--json", action="store_true",
                            help="one JSON object per event per line on stdout, nothing else")
        add_metrics_flags(output, "127.0.0.1, loopback", prefix=True)


class Options:
    """The member the flags describe (``options()`` checks them)."""

    def __init__(self, node: str) -> None:
        self.node = node
        self.bind, self.port = DEFAULT_BIND, DEFAULT_PORT
        self.seeds: list[tuple[str, int]] = []
        self.tags: dict[str, str] = {}
        self.keys: tuple[bytes, ...] = ()
        self.keyring_file: str | None = None
        self.label = b""
        #: the settings given by flags that are not the key's or the tags' (profile, timings, protocol)
        self.given: SerfServiceSettings = {}
        #: the address and port the others list and reach us at (--advertise, or --bind's)
        self.advertise: tuple[str, int] = (DEFAULT_BIND, DEFAULT_PORT)

    def settings(self) -> SerfServiceSettings:
        """SerfService's keyword settings the flags give (FLAGS): only those
        given, so the others keep their declared defaults; the keys are the
        keyring file's when one is named (SerfService reads it)."""
        settings: SerfServiceSettings = {}
        if self.tags:
            settings["tags"] = self.tags
        if self.label:
            settings["label"] = self.label
        if self.keyring_file is not None:
            settings["keyring_file"] = self.keyring_file
        elif self.keys:
            settings["keys"] = self.keys
        settings.update(self.given)
        return settings


def _address(flag: str, spec: str) -> tuple[str, int]:
    from ..tribes.discovery.peers import parse_peer

    try:
        return parse_peer(spec, DEFAULT_PORT)
    except ConfigurationError as error:
        raise ConfigurationError(str(error).replace(f"peer {spec.strip()!r}", f"{flag} {spec.strip()}", 1)) \
            from None


def options(args: argparse.Namespace, read_keyring: bool = True) -> Options:
    """The flags, checked (ConfigurationError: one sentence naming the flag);
    the keyring file read unless ``read_keyring`` is false (SerfService
    reads it itself)."""
    from ..gossip.fronts.keyring_file import decode_key, load_keyring

    if getattr(args, "duration", None) is not None and not args.duration >= 0:
        raise ConfigurationError("--duration must be a positive number of seconds")
    if args.encrypt is not None and args.keyring_file is not None:
        raise ConfigurationError("--encrypt and --keyring-file cannot be given together: put the key in "
                                 "the keyring file")
    opts = Options(node=args.node or socket.gethostname())
    if args.bind is not None:
        opts.bind, opts.port = _address("--bind", args.bind)
    try:
        bind = ipaddress.ip_address(opts.bind)
    except ValueError:
        raise ConfigurationError(f"--bind {args.bind} is not an IP address") from None
    for spec in (s for specs in args.join for s in specs.split(",") if s.strip()):
        host, port = _address("--join", spec)
        opts.seeds.append((resolve(host, bind.version), port))
    retry_seeds = _retry_flags(args, opts, bind.version)
    advertised = ipaddress.ip_address(opts.advertise[0])
    for host, port in opts.seeds + retry_seeds:
        if advertised.is_loopback and not ipaddress.ip_address(host).is_loopback:
            flag = "--advertise" if args.advertise else "--bind"
            raise ConfigurationError(f"{flag} {args.advertise or opts.bind} is loopback, so "
                                     f"{host_port(host, port)} cannot reach this node: give {flag} this "
                                     "host's address on that network")
    for tag in args.tag:
        key, equals, value = tag.partition("=")
        if not equals or not key:
            raise ConfigurationError(f"--tag {tag}: give KEY=VALUE")
        opts.tags[key] = value
    if args.encrypt is not None:
        try:
            opts.keys = (decode_key(args.encrypt),)
        except ValueError as error:
            raise ConfigurationError(f"--encrypt: the key {error}") from None
    if args.keyring_file is not None:
        opts.keyring_file = args.keyring_file
        if read_keyring:
            opts.keys = load_keyring(args.keyring_file)
    if args.label is not None:
        opts.label = args.label.encode("utf-8")
    _agent_flags(args, opts)
    _snapshot_flags(args, opts)
    _handler_flags(args, opts)
    _rpc_flags(args, opts)
    return opts


def _rpc_flags(args: argparse.Namespace, opts: Options) -> None:
    """--rpc-addr (ADDR:PORT, checked as the setting is) and --rpc-auth."""
    from ..gossip.fronts.addresses import parse_address

    if args.rpc_addr is not None:
        host, port = parse_address(args.rpc_addr, DEFAULT_RPC[1], "--rpc-addr")
        opts.given["rpc_addr"] = host_port(host, port)
    if args.rpc_auth is not None:
        opts.given["rpc_auth"] = args.rpc_auth


def default_rpc(opts: Options) -> str | None:
    """The demo's RPC address without --rpc-addr: the agent's, if no one
    listens there, else None (another agent or demo on this host has it:
    the demo runs without, as it ran before it had an RPC; --rpc-addr
    asks for one, and a taken one is then an error)."""
    if "rpc_addr" in opts.given:
        return None
    with socket.socket() as probe:
        try:
            probe.bind(DEFAULT_RPC)
        except OSError:
            return None
    return host_port(*DEFAULT_RPC)


def _seconds(flag: str, text: str) -> float:
    """A flag's time: seconds, or a duration as the agent takes it (30s, 500ms), more than zero."""
    from .._runtime.units import go_duration

    try:
        value = float(text)
    except ValueError:
        try:
            value = go_duration(text)
        except ValueError as error:
            raise ConfigurationError(f"{flag}: {error}") from None
    if not 0 < value < float("inf"):
        raise ConfigurationError(f"{flag} {text}: give a duration longer than zero (30s, 0.5)")
    return value


def _handler_flags(args: argparse.Namespace, opts: Options) -> None:
    """--event-handler (each parsed as Serf's agent parses it) and the handlers' bounds, checked."""
    from ..gossip.agent.handlers import parse_handler

    for spec in args.event_handler:
        try:
            parse_handler(spec)
        except ConfigurationError as error:
            raise ConfigurationError(str(error).replace("event handler ", "--event-handler ", 1)) from None
    if args.event_handler:
        opts.given["event_handlers"] = tuple(args.event_handler)
    if args.handler_timeout is not None:
        opts.given["handler_timeout"] = _seconds("--handler-timeout", args.handler_timeout)
    for setting, flag, least in (("handler_concurrency", "--handler-concurrency", 1),
                                 ("handler_queue", "--handler-queue", 0)):
        text = getattr(args, setting)
        if text is None:
            continue
        if not (text.strip().isascii() and text.strip().isdigit() and int(text) >= least):
            raise ConfigurationError(f"{flag} {text}: give a whole number, {least} or more")
        opts.given[setting] = int(text)     # type: ignore[literal-required]


def _snapshot_flags(args: argparse.Namespace, opts: Options) -> None:
    """--snapshot and --rejoin (Serf's agent takes -rejoin alone and ignores
    it; here it is refused, as it would do nothing)."""
    if args.snapshot is not None:
        opts.given["snapshot_path"] = args.snapshot
    if args.rejoin:
        if args.snapshot is None:
            raise ConfigurationError("--rejoin needs --snapshot: the members to rejoin are the snapshot's")
        opts.given["rejoin"] = True


def _agent_flags(args: argparse.Namespace, opts: Options) -> None:
    """The tags file, the profile, the timings, the protocol and --replay, checked."""
    from .._runtime.units import go_duration

    if args.tags_file is not None:
        if args.tag:
            raise ConfigurationError("--tag and --tags-file cannot be given together: put the tags in "
                                     "the tags file")
        opts.given["tags_file"] = args.tags_file
    if args.profile is not None:
        if args.profile not in PROFILES:
            raise ConfigurationError(f"--profile {args.profile}: give lan, wan or local")
        opts.given["profile"] = args.profile
    if args.protocol is not None:
        protocol = args.protocol.strip()
        if not (protocol.isascii() and protocol.isdigit() and int(protocol) in PROTOCOLS):
            raise ConfigurationError(f"--protocol {args.protocol}: Serf's protocol is a number from "
                                     f"{PROTOCOLS[0]} to {PROTOCOLS[-1]}")
        opts.given["protocol_version"] = int(protocol)
    for setting, flag in DURATIONS.items():
        text = getattr(args, setting)
        if text is None:
            continue
        try:
            value = go_duration(text)
        except ValueError as error:
            raise ConfigurationError(f"{flag}: {error}") from None
        if not value > 0:
            raise ConfigurationError(f"{flag} {text}: give a duration longer than zero (30s, 1h)")
        opts.given[setting] = value      # type: ignore[literal-required]
    if args.replay:
        opts.given["replay_on_join"] = True


def _retry_flags(args: argparse.Namespace, opts: Options, version: int) -> list[tuple[str, int]]:
    """--advertise (opts.advertise: what the others reach, chosen as the
    service chooses it) and the retry-join flags, checked; the retry seeds."""
    from ..gossip.fronts.addresses import choose_advertise

    try:
        opts.advertise = choose_advertise(opts.bind, opts.port, args.advertise)
    except ConfigurationError as error:
        raise ConfigurationError(f"--{error}" if args.advertise else f"--bind {args.bind}: {error}") from None
    if args.advertise is not None:
        opts.given["advertise"] = args.advertise
    seeds = []
    for spec in (s for specs in args.retry_join for s in specs.split(",") if s.strip()):
        host, port = _address("--retry-join", spec)
        seeds.append((resolve(host, version), port))
    if seeds:
        opts.given["retry_join"] = tuple(host_port(host, port) for host, port in seeds)
    if args.retry_interval is not None:
        opts.given["retry_interval"] = _seconds("--retry-interval", args.retry_interval)
    if args.retry_max is not None:
        text = args.retry_max.strip()
        if not (text.isascii() and text.isdigit()):
            raise ConfigurationError(f"--retry-max {args.retry_max}: give 0 (retry for ever) or more")
        opts.given["retry_max"] = int(text)
    return seeds


def resolve(host: str, version: int) -> str:
    """An address for ``host`` (a literal, or a name) in the bind address's family."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    family = socket.AF_INET6 if version == 6 else socket.AF_INET
    try:
        return str(socket.getaddrinfo(host, None, family, socket.SOCK_STREAM)[0][4][0])
    except (OSError, UnicodeError) as error:
        raise ConfigurationError(f"--join {host}: cannot resolve it "
                                 f"({getattr(error, 'strerror', None) or error})") from None


def run(args: argparse.Namespace, stop: Stopper, silence: Callable[[], None]) -> int:
    """mcast-demo gossip: start, join, show, and leave when asked."""
    from ..gossip.fronts.service import SerfService
    from ..gossip.serf.node import ConflictResolved, LeaveDone
    from ..gossip.serf.retry_join import RetryJoinFailed
    from .gossip_view import choose_view

    prog = "mcast-demo gossip"
    try:
        opts = options(args, read_keyring=False)
        check_metrics_flags(args)
        settings = opts.settings()
        rpc = default_rpc(opts)
        if rpc is not None:
            settings["rpc_addr"] = rpc
        service = SerfService(opts.node, opts.bind, opts.port, **settings)
        # bound before the member starts: a taken port stops us before we gossip
        metrics = serve_metrics(service, args, "127.0.0.1") if args.metrics_port is not None else None
    except ConfigurationError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 2
    view = choose_view(args.json, sys.stdout)
    outcome: list[str] = []

    left: list[LeaveDone] = []

    def on_event(event: SerfNodeEvent | EventsLost) -> None:     # on the dispatcher thread
        if isinstance(event, LeaveDone):      # ours, or one asked by RPC (serf leave), which stops the member
            left.append(event)
            stop.set()
        if isinstance(event, ConflictResolved) and not event.majority:
            outcome.append(f"the cluster gave the name {opts.node!r} to another node: choose another --node")
            stop.set()
        if isinstance(event, RetryJoinFailed) and event.gave_up:
            outcome.append(f"--retry-join: {event.attempt} attempts joined nobody "
                           f"({'; '.join(event.errors) or 'only this member answered'}), the last allowed by "
                           "--retry-max (mcast-demo doctor --gossip with these flags tells why)")
            stop.set()
        try:
            view.on_event(event)
        except BrokenPipeError:
            silence()
            stop.set()

    service.add_listener(on_event)
    try:
        service.start()
    except OSError as error:
        print(f"{prog}: cannot bind {host_port(opts.bind, opts.port)}: {error.strerror or error}",
              file=sys.stderr)
        if metrics is not None:
            metrics.close()
        return 1
    try:
        if metrics is not None:
            print(f"{prog}: metrics on {metrics.url}", file=sys.stderr)
        view.started(service)
        if opts.seeds:
            done = _join(service, opts.seeds, stop)
            if done is not None and done.joined == 0:
                print(f"{prog}: cannot join {'; '.join(done.errors) or 'any seed'} (mcast-demo doctor "
                      "--gossip with these flags tells why)", file=sys.stderr)
                return 1
            for reason in done.errors if done is not None else ():
                print(f"{prog}: warning: cannot join {reason}", file=sys.stderr)
        stop.until(args.duration, view.refresh, lambda: view.tick(service))
        if outcome:
            print(f"{prog}: {outcome[0]}", file=sys.stderr)
            return 1
        if not left:
            try:
                service.leave()
            except (TimeoutError, RuntimeError) as error:
                print(f"{prog}: warning: the leave did not finish: {error}", file=sys.stderr)
        service.stop()          # every event shown first: the dispatcher ends once it has none
        view.stopped(service)
        return 0
    finally:
        service.stop()
        if metrics is not None:
            metrics.close()
        view.close()


def _join(service: SerfService, seeds: list[tuple[str, int]], stop: Stopper) -> JoinDone | None:
    """Join on another thread, so that a Ctrl-C meanwhile is heard at once
    (with the user events from before it if --replay set replay_on_join);
    None when asked to stop first."""
    result: list[JoinDone | BaseException] = []

    def join() -> None:
        try:
            result.append(service.join(seeds, timeout=service.node.engine.settings.tcp_timeout + 5))
        except (TimeoutError, RuntimeError) as error:
            result.append(error)
        stop_wake.set()

    stop_wake = threading.Event()
    threading.Thread(target=join, name="gossip-join", daemon=True).start()
    while not stop_wake.is_set():
        if stop.wait(0.05):
            return None
    outcome = result[0]
    if isinstance(outcome, BaseException):
        from ..gossip.serf.node import JoinDone
        return JoinDone(0, (str(outcome),))
    return outcome


__all__ = ["DEFAULT_BIND", "DEFAULT_PORT", "FLAGS", "Options", "add_arguments", "options", "run"]
