"""``mcast-demo doctor --gossip``: why a gossip member does not join its seeds.

Checks, in order (names stable, as the other checks'):

- ``gossip_bind``: the address is this host's, and its port free for UDP
  and TCP (taken: a member already runs here, a warning);
- with ``--advertise``, ``advertise``: the address the others will dial
  leads here (advertise.py);
- per seed (``--join``, then ``--retry-join``): ``seed_tcp`` (a push/pull
  answered by TCP, as a join starts; refused, silent or unroutable, with what
  the member does about it: reach.py), ``label`` (the label each side uses:
  labels.py when the answer does not say), ``key`` (encryption on both sides
  or neither, and a key in common), ``protocol`` (every node's memberlist and
  Serf versions within what all understand, memberlist's verifyProtocol),
  ``name`` (no other node has our name), then ``seed_udp`` (a ping acked by
  UDP, which memberlist probes with; a refused port told apart from
  silence).

A seed that cannot be reached is a warning, not a failure, when another seed
passes every check: a join goes through any one seed.

The push/pull the doctor sends carries no node and no Serf state, with the
join flag off, and its ping names no node: the seed learns nothing of us, so
nothing is added to the cluster (no member to fail later, nothing to reap).
"""

from __future__ import annotations

import errno
import shlex
import socket
import time
from typing import TYPE_CHECKING

from ...gossip.memberlist import framing
from ...gossip.memberlist import messages
from ...gossip.memberlist.crypto import Keyring
from ...gossip.memberlist.streams import protocol_mismatch
from ...gossip.memberlist.errors import GossipWireError
from ...gossip.memberlist.layout import MessageType, NodeState
from ...gossip.memberlist.label import expected_in, split_label
from ...gossip.memberlist.limits import Limits
from ...gossip.serf.node import SerfNode
from ...gossip.memberlist.settings import GossipSettings
from ...gossip.memberlist.state import ip_text
from . import advertise, labels, reach
from .report import FAIL, PASS, WARN, Report, count, hostport

if TYPE_CHECKING:
    from ..gossip_cli import Options
    from .report import CheckName, Status

    Verdict = tuple[CheckName, Status, str, "str | None"]

PINGS = 3           # pings by UDP before the seed is said not to answer
LIMITS = Limits()


def run_gossip(opts: Options, wait: float) -> Report:
    """Every check, for the member ``opts`` describes, each network step
    given up after ``wait`` seconds."""
    report = Report()
    if not bind(report, opts):
        return report
    advertise.check(report, opts, wait)
    vsn = SerfNode(GossipSettings(name=opts.node, advertise_addr=opts.bind,
                                  advertise_port=opts.port)).engine.settings.vsn()
    per_seed: list[tuple[tuple[str, int], list[Verdict]]] = []
    for seed in reach.seeds(opts):
        verdicts = tcp(opts, seed, wait, vsn)
        if all(status != FAIL for name, status, _, _ in verdicts if name in ("label", "key")):
            verdicts.append(ping(opts, seed, wait, tcp_ok=verdicts[0][1] == PASS))
        per_seed.append((seed, verdicts))
    for verdict in _through_another(per_seed):
        report.add(*verdict)
    return report


def _through_another(per_seed: list[tuple[tuple[str, int], list[Verdict]]]) -> list[Verdict]:
    """Every seed's verdicts, those of a seed that cannot be reached made
    warnings when another seed passes every check: a join (and a retry-join
    attempt) succeeds when one seed answers, as the agent's does."""
    good = next((seed for seed, verdicts in per_seed if all(v[1] == PASS for v in verdicts)), None)
    through = "" if good is None else f" (the join goes through {hostport(*good)})"
    out: list[Verdict] = []
    for _, verdicts in per_seed:
        down = bool(through) and [name for name, _, _, _ in verdicts] == ["seed_tcp", "seed_udp"] \
            and verdicts[0][1] == FAIL
        for name, status, detail, fix in verdicts:
            if down:
                status, detail = WARN, detail + through
            out.append((name, status, detail, fix))
    return out


def bind(report: Report, opts: Options) -> bool:
    """gossip_bind; False when the address is not this host's (nothing else can run)."""
    where = hostport(opts.bind, opts.port)
    family = socket.AF_INET6 if ":" in opts.bind else socket.AF_INET
    for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
        with socket.socket(family, kind) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((opts.bind, opts.port))
            except OSError as error:
                if error.errno == errno.EADDRNOTAVAIL:
                    report.add("gossip_bind", FAIL, f"{opts.bind} is not an address of this host",
                               "--bind one of this host's addresses (ip -brief address lists them)")
                    return False
                report.add("gossip_bind", WARN, f"{where} is taken ({error.strerror}): a member running "
                           "here? mcast-demo gossip cannot bind it while it is",
                           f"stop what holds it, or --bind {opts.bind}:ANOTHER_PORT")
                return True
    report.add("gossip_bind", PASS, f"{where} is free for UDP and TCP")
    return True


def tcp(opts: Options, seed: tuple[str, int], wait: float, vsn: bytes) -> list[Verdict]:
    """seed_tcp, then label, key, protocol and name as far as the answer tells."""
    where = hostport(*seed)

    def ask(request: bytes) -> bytes:
        return exchange(opts.bind, seed, request, wait)

    try:
        reply = ask(labels.request(opts, opts.label))
    except OSError as error:
        return [reach.tcp_unreachable(opts, seed, error, wait)]
    if not reply:
        return [("seed_tcp", PASS, f"{where} takes TCP connections", None), labels.closed(opts, seed, ask)]
    try:
        header, _ = split_label(reply)
    except GossipWireError:
        header = b""
    # memberlist >= 0.3 answers without a label header (only the side that dials writes one): an
    # answer without one is under the label we sent; an older mcastmember's header is read too
    got = header or opts.label
    label = _label(where, got, opts.label)
    encrypted = reply[_label_size(reply):][:1] == bytes((MessageType.ENCRYPT,))
    key = _key(where, encrypted, bool(opts.keys))
    try:
        (kind, msg), _ = framing.decode_stream(reply, LIMITS, keys=opts.keys, label=got, verify_incoming=False,
                                              reply=True)
    except GossipWireError as error:
        answered: Verdict = ("seed_tcp", PASS, f"{where} answered", None)
        if label[1] == FAIL:
            return [answered, label]
        if error.reason in ("no_key", "bad_encryption"):
            # memberlist 0.2 with a key answers a labelled stream with an error sealed without our label
            refused_label = labels.seed_has_none(opts, seed, ask) if not header else None
            if refused_label is not None:
                return [answered, refused_label]
            if key[1] == PASS:
                key = ("key", FAIL, f"none of this node's keys decrypts {where}'s answer",
                       "--encrypt with the cluster's primary key (serf keys -list on a member lists them)")
            return [answered, label, key]
        return [("seed_tcp", FAIL, f"{where} answered something not memberlist's: {error}",
                 "--join the address and port a Serf agent binds (its -bind; 7946 by default)")]
    if isinstance(msg, messages.Err):
        expected = expected_in(msg.error)
        if expected is not None and expected != opts.label:     # an mcastmember seed names the label it takes
            return [("seed_tcp", PASS, f"{where} answered with an error", None), _label(where, expected, opts.label)]
        refused_label = labels.seed_has_none(opts, seed, ask) if not header else None
        if refused_label is not None:
            return [("seed_tcp", PASS, f"{where} answered with an error", None), refused_label]
        text = msg.error.lower()
        if label[1] == PASS and "label" in text:
            label = ("label", FAIL, f"{where} refused our label: {msg.error}",
                     "--label with the cluster's label (none for Serf 0.9.4's agent)")
        elif key[1] == PASS and "encrypt" in text:
            key = ("key", FAIL, f"{where} refused: {msg.error}", "one encryption setting for the whole cluster")
        answered = ("seed_tcp", PASS, f"{where} answered with an error", None)
        if label[1] == FAIL:
            return [answered, label]
        if key[1] == FAIL:
            return [answered, label, key]
        return [("seed_tcp", FAIL, f"{where} refused the push/pull: {msg.error}", None)]
    if not isinstance(msg, messages.PushPull):
        return [("seed_tcp", FAIL, f"{where} answered a push/pull with message type {kind}", None)]
    nodes = msg.nodes
    alive = sum(n.state == NodeState.ALIVE for n in nodes)
    detail = f"{where} answered a push/pull: {count(len(nodes), 'node')}, " + \
        ("all alive" if alive == len(nodes) else f"{alive} alive")
    return [("seed_tcp", PASS, detail, None), label, key, _protocol(opts, nodes, vsn), _name(opts, nodes)]


def exchange(source: str, seed: tuple[str, int], request: bytes, wait: float) -> bytes:
    """Send ``request`` from ``source`` and read the answer until the seed
    closes (as memberlist does after a push/pull) or ``wait`` passes."""
    deadline = time.monotonic() + wait
    with socket.create_connection(seed, timeout=wait, source_address=(source, 0)) as conn:
        conn.sendall(request)
        reply = bytearray()
        while len(reply) <= LIMITS.max_stream:
            conn.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                chunk = conn.recv(65536)
            except socket.timeout:
                break
            if not chunk:
                break
            reply += chunk
        return bytes(reply)


def _label_size(reply: bytes) -> int:
    try:
        return split_label(reply)[1]
    except GossipWireError:
        return 0


def _label(where: str, got: bytes, ours: bytes) -> Verdict:
    if got == ours:
        return ("label", PASS, f"both label their traffic {got.decode(errors='replace')!r}" if got
                else "neither side labels its traffic", None)
    theirs = got.decode(errors="replace")
    mine = ours.decode(errors="replace")
    if not got:
        return ("label", FAIL, f"{where} has no label; this node labels its traffic {mine!r}",
                "leave out --label (the cluster has none; Serf 0.9.4's memberlist knows no labels)")
    return ("label", FAIL, f"{where} labels its traffic {theirs!r}; this node " +
            (f"{mine!r}" if ours else "has no label"),
            f"--label {shlex.quote(theirs)} on this node (one label for the whole cluster)")


def _key(where: str, encrypted: bool, ours: bool) -> Verdict:
    if encrypted and not ours:
        return ("key", FAIL, f"{where} encrypts its traffic; this node does not",
                "--encrypt with the cluster's key, or --keyring-file (serf keys -list on a member "
                "lists the keys)")
    if ours and not encrypted:
        return ("key", FAIL, f"this node encrypts its traffic; {where} does not",
                "leave out --encrypt, or turn encryption on across the cluster (serf agent -encrypt)")
    return ("key", PASS, "both encrypt, with a key in common" if ours else "neither side encrypts", None)


def _protocol(opts: Options, nodes: list[messages.PushNodeState], vsn: bytes) -> Verdict:
    ranges = [vsn] + [n.vsn for n in nodes if n.state == NodeState.ALIVE and n.vsn]
    error = protocol_mismatch(ranges, [(opts.node, vsn)] + [(n.name, n.vsn) for n in nodes])
    if error:
        return ("protocol", FAIL, f"{error}: the seed's cluster is not a Serf cluster, or a Serf too old or "
                "too new for this one", "join a member of a Serf cluster (serf agent 0.8 or newer)")
    return ("protocol", PASS, "every node's versions are within what all understand", None)


def _name(opts: Options, nodes: list[messages.PushNodeState]) -> Verdict:
    for n in nodes:
        if n.name != opts.node or n.state == NodeState.LEFT:
            continue
        addr = hostport(ip_text(n.addr), n.port)
        if (ip_text(n.addr), n.port) == (opts.bind, opts.port):
            return ("name", PASS, f"{opts.node!r} is a member at this address already (this node, running)",
                    None)
        state = "failed" if n.state == NodeState.DEAD else NodeState(n.state).name.lower()
        return ("name", FAIL, f"the cluster has a node named {opts.node!r} at {addr} ({state})",
                "--node with a name no other member has")
    return ("name", PASS, f"no other node is named {opts.node!r}", None)


def ping(opts: Options, seed: tuple[str, int], wait: float, tcp_ok: bool) -> Verdict:
    """seed_udp: up to PINGS pings, each given ``wait / PINGS`` seconds, from
    a socket connected to the seed, so that the kernel tells when the seed's
    host refuses the port (an ICMP port unreachable)."""
    where = hostport(*seed)
    keyring = Keyring(opts.keys) if opts.keys else None
    family = socket.AF_INET6 if ":" in opts.bind else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as udp:
        udp.bind((opts.bind, 0))
        udp.connect(seed)
        for seq in range(1, PINGS + 1):
            packet = framing.encode_packet(messages.encode(messages.Ping(seq_no=seq)), keyring=keyring,
                                           label=opts.label)
            try:
                udp.send(packet)
                if _acked(opts, udp, seq, time.monotonic() + wait / PINGS):
                    return ("seed_udp", PASS, f"{where} acked a ping by UDP", None)
            except ConnectionRefusedError:
                return reach.udp_unanswered(seed, PINGS, refused=True, tcp_ok=tcp_ok)
            except OSError:
                pass
    return reach.udp_unanswered(seed, PINGS, refused=False, tcp_ok=tcp_ok)


def _acked(opts: Options, udp: socket.socket, seq: int, deadline: float) -> bool:
    """True once the ack of ``seq`` arrives; ConnectionRefusedError when the
    seed's host refuses the port."""
    while (left := deadline - time.monotonic()) > 0:
        udp.settimeout(left)
        try:
            data = udp.recv(65536)
        except ConnectionRefusedError:
            raise
        except OSError:         # the timeout
            continue
        try:
            body = framing.open_packet(data, LIMITS, keys=opts.keys, label=opts.label)
            parts, _ = framing.split_messages(body, LIMITS)
        except GossipWireError:
            continue
        for part in parts:
            if part[:1] == bytes((MessageType.ACK,)):
                try:
                    ack = messages.decode(part, LIMITS)
                except GossipWireError:
                    continue
                if isinstance(ack, messages.Ack) and ack.seq_no == seq:
                    return True
    return False


seeds = reach.seeds

__all__ = ["run_gossip", "seeds"]
