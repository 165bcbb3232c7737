#!/usr/bin/env python3
"""Per-message cost of the gossip engine's hot messages, side by side, in one run.

    python bench/gossip_hot.py [--json out.json] [--quick] [--no-go]

What a member receives most in a steady cluster, each through
``GossipEngine.receive`` and ``outgoing`` as a front calls
them, with the packets Go's memberlist writes (a CRC header for a protocol-5
receiver, as rawSendMsgPacket adds one):

- a ping addressed to us, answered with an ack (empty, and carrying a Serf
  member's network coordinate, as a SerfNode's acks do);
- an ack for a pending probe (the probe's bookkeeping included);
- an alive of a known member at the incarnation we hold (the common no-op:
  each broadcast arrives retransmit-limit times), alone and eight in a
  compound (per message);
- eight alives in a compound LZW-compressed, as Go sends a compound that
  compression shrinks (the general and pure-Python rows read LZW in Python,
  the compiled row with the compiled reader; the hot rows open the compress
  message in the matcher's ``unwrap``, the general one by its msgpack decode);
- a suspect and a dead of a known member at an older incarnation (the same
  no-op for accusations already refuted), and a suspect repeated by the
  same accuser at the current incarnation (the suspicion timer takes it and
  changes nothing).

Rows: the engine's general path (msgpack decode into message objects), and
the hot path (a byte-level matcher; compiled and pure-Python) where this
build has one; msgpack's own ``unpackb`` of the same body as a reference;
Go's memberlist 0.2.2 on the same bytes (a ``go test -bench`` run inside a
copy of Debian's memberlist source, when golang-go and
golang-github-hashicorp-memberlist-dev are installed).

CPU: this thread's CPU time, the best of 5 timed loops, less the empty loop. Bytes: the most Python
heap one call holds beyond what was there (tracemalloc peak), as
bench/heartbeat.py measures it. Nothing touches the network (the engine is
sans-IO). Timings are noisy on small machines: compare figures within one run.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import msgpack  # noqa: E402

from heartbeat import allocation  # noqa: E402  (bench/heartbeat.py)
from mcastmember.gossip.memberlist import framing  # noqa: E402
from mcastmember.gossip.memberlist import messages  # noqa: E402
from mcastmember.gossip.memberlist.core import Probe  # noqa: E402
from mcastmember.gossip.memberlist.engine import GossipEngine  # noqa: E402
from mcastmember.gossip.memberlist.settings import GossipSettings  # noqa: E402
from mcastmember.gossip.serf.messages import Coordinate, encode_ack_payload  # noqa: E402

try:
    from mcastmember.gossip.memberlist import matcher as hot
    from mcastmember.gossip.memberlist import lzw
except ImportError:          # a build without the hot path (the "before")
    hot = lzw = None

ME = ("127.0.0.1", 7946)
PEER = ("127.0.0.2", 7946)
VSN = bytes((1, 5, 2, 2, 5, 4))      # what Serf 0.9.4 announces
PEER_INC = 5
COMPOUND_ALIVES = 8
#: a Serf member's ack payload: its network coordinate after some probes
COORDINATE_PAYLOAD = encode_ack_payload(Coordinate(
    vec=[0.00031, -0.00012, 0.00047, 0.00011, -0.00006, 0.00009, -0.00021, 0.00024], error=0.0796,
    adjustment=0.00028, height=6.3e-05))


def per_call_ns(fn, rounds, repeats=5):
    """CPU time per call of ``fn`` (this thread's, so that other processes on
    a busy machine do not count), the best of ``repeats`` loops of
    ``rounds`` calls, less the empty loop."""
    def loop(body):
        best = float("inf")
        for _ in range(repeats):
            t0 = time.thread_time_ns()
            for _ in range(rounds):
                body()
            best = min(best, time.thread_time_ns() - t0)
        return best
    gc.disable()
    try:
        return max(0.0, (loop(fn) - loop(_nothing)) / rounds)
    finally:
        gc.enable()


def _nothing():
    return None


def paths():
    """(name, engine keyword arguments) of every path this build has."""
    if hot is None:
        return [("general", {})]
    out = [("general", {"hot": None})]
    for name, module in hot.IMPLEMENTATIONS.items():
        if module is not None:
            out.append((f"hot ({name})", {"hot": module}))
    return out


def peer_alive(name="serf-1", addr=PEER, inc=PEER_INC):
    return messages.Alive(incarnation=inc, node=name, addr=bytes(map(int, addr[0].split("."))),
                          port=addr[1], meta=b"\xff\x80", vsn=VSN)


def engine(kwargs, members=8, suspected=False):
    """Our node, started, knowing ``members`` peers alive at PEER_INC (with
    ``suspected``, serf-1 suspected by serf-2), with its broadcast queue
    drained (steady state: nothing left to piggyback)."""
    e = GossipEngine(GossipSettings(name="py-1", advertise_addr=ME[0], advertise_port=ME[1]), seed=1,
                     **kwargs)
    e.start(0.0)
    for i in range(members):
        addr = (f"127.0.0.{i + 2}", 7946)
        e.receive(messages.encode(peer_alive(f"serf-{i + 1}", addr)), addr, 0.0)
    if suspected:
        e.receive(SUSPECT_REPEAT, PEER, 0.0)
    now = 0.0
    while len(e.broadcasts) or len(e.user_broadcasts):
        now += 0.2
        e.on_timer(now)
        e.outgoing(now)
        e.streams_to_open(now)
    e.events()
    return e, now


SUSPECT_REPEAT = messages.encode(messages.Suspect(incarnation=PEER_INC, node="serf-1", from_="serf-2"))


PING_COORDINATE = "ping -> ack with a coordinate"


def crc(msg):
    return framing.add_crc(msg)


def packets():
    ping = messages.encode(messages.Ping(seq_no=200, node="py-1", source_addr=bytes((127, 0, 0, 2)),
                                         source_port=7946, source_node="serf-1"))
    alive = messages.encode(peer_alive())
    suspect = messages.encode(messages.Suspect(incarnation=PEER_INC - 1, node="serf-1", from_="serf-2"))
    dead = messages.encode(messages.Dead(incarnation=PEER_INC - 1, node="serf-1", from_="serf-2"))
    alives = [messages.encode(peer_alive(f"serf-{i + 1}", (f"127.0.0.{i + 2}", 7946)))
              for i in range(COMPOUND_ALIVES)]
    return {"ping -> ack": (crc(ping), 1, False), PING_COORDINATE: (crc(ping), 1, False),
            "alive (no-op)": (crc(alive), 1, False),
            f"{COMPOUND_ALIVES} alives in a compound (per message)": (crc(framing.make_compound(alives)),
                                                                      COMPOUND_ALIVES, False),
            "suspect (old incarnation)": (crc(suspect), 1, False), "dead (old incarnation)": (crc(dead), 1, False),
            "suspect (same incarnation, same accuser again)": (crc(SUSPECT_REPEAT), 1, True),
            f"{COMPOUND_ALIVES} alives, LZW-compressed compound (per message)": (
                crc(framing.compress_message(framing.make_compound(alives))), COMPOUND_ALIVES, False)}


def receive(e, data, now):
    def call():
        e.receive(data, PEER, now)
        e.outgoing(now)
    return call


def ack_call(e, now, count):
    """Calls that each receive the ack of the next of ``count`` pending probes."""
    node = e.table.get("serf-1")
    acks = []
    for seq in range(1_000_000, 1_000_000 + count):
        e.shared.acks[seq] = Probe(node, seq, now, now + 1e9, now + 1e9)
        acks.append(crc(messages.encode(messages.Ack(seq_no=seq))))
    it = iter(acks)

    def call():
        e.receive(next(it), PEER, now)
        e.outgoing(now)
    return call


def check_steady(e, now, data):
    """The call does what the row says: one ack out for a ping, nothing for a no-op."""
    before = e.stats()
    e.receive(data, PEER, now)
    sent = e.outgoing(now)
    after = e.stats()
    changed = {k: after[k] - before[k] for k in after if after[k] != before[k]}
    return len(sent), changed


def engine_rows(rounds):
    rows = []
    for path, kwargs in paths():
        # the general and pure-Python paths read LZW in Python, as before the compiled reader
        if lzw is not None:
            lzw._COMPILED = hot.COMPILED_LZW if path == "hot (compiled)" else None
        for label, (data, per, suspected) in packets().items():
            e, now = engine(kwargs, suspected=suspected)
            if label == PING_COORDINATE:
                e.ack_payload = COORDINATE_PAYLOAD
            sent, changed = check_steady(e, now, data)
            assert sent == (1 if label.startswith("ping") else 0), (label, sent)
            assert set(changed) <= {"packets_received", "messages_received", "packets_sent"}, (label, changed)
            call = receive(e, data, now)
            ns = per_call_ns(call, rounds)
            nbytes, _blocks = allocation(call, rounds=rounds // 4)
            rows.append(dict(path=path, message=label, ns=ns / per, bytes=nbytes / per))
        e, now = engine(kwargs)
        call = ack_call(e, now, 5 * rounds + 10_000 + 2 * rounds // 4 + 4000)
        ns = per_call_ns(call, rounds)
        nbytes, _blocks = allocation(call, rounds=rounds // 4)
        rows.append(dict(path=path, message="ack (pending probe)", ns=ns, bytes=nbytes))
        rows.append(send_row(path, rounds))
    return rows


SEND_COMPOUND = f"send: {COMPOUND_ALIVES} alives in a compound, tried compressed (per datagram)"


def send_row(path, rounds):
    """The packet a gossip round sends (``encode_packet`` as the engine calls
    it for a compound of broadcasts): memberlist tries every datagram
    LZW-compressed and keeps the shorter. The general and pure-Python paths
    write LZW in Python, the compiled path with the compiled writer."""
    if lzw is not None and hasattr(lzw, "_COMPILED_WRITER"):
        lzw._COMPILED_WRITER = hot.COMPILED_LZW_WRITER if path == "hot (compiled)" else None
    compound = framing.make_compound([messages.encode(peer_alive(f"serf-{i + 1}", (f"127.0.0.{i + 2}", 7946)))
                                      for i in range(COMPOUND_ALIVES)])

    def call():
        return framing.encode_packet(compound, compress=True, crc=True)
    ns = per_call_ns(call, rounds)
    nbytes, _blocks = allocation(call, rounds=rounds // 4)
    return dict(path=path, message=SEND_COMPOUND, ns=ns, bytes=nbytes)


def msgpack_rows(rounds):
    rows = []
    bodies = {"ping -> ack": messages.encode(messages.Ping(seq_no=200, node="py-1",
                                                           source_addr=bytes((127, 0, 0, 2)), source_port=7946,
                                                           source_node="serf-1"))[1:],
              "ack (pending probe)": messages.encode(messages.Ack(seq_no=1_000_000))[1:],
              "alive (no-op)": messages.encode(peer_alive())[1:],
              "suspect (old incarnation)": messages.encode(
                  messages.Suspect(incarnation=PEER_INC - 1, node="serf-1", from_="serf-2"))[1:]}
    for label, body in bodies.items():
        def call(body=body):
            return msgpack.unpackb(body, raw=True)
        ns = per_call_ns(call, rounds)
        nbytes, _blocks = allocation(call, rounds=rounds // 4)
        rows.append(dict(path="msgpack.unpackb (body only)", message=label, ns=ns, bytes=nbytes))
    return rows


# -- Go's memberlist, on the same bytes ----------------------------------------------------
GO_BENCH = r'''package memberlist

import (
	"net"
	"testing"
	"time"
	"io/ioutil"
	"hash/crc32"
	"log"
)

// A transport that sends nothing: the benchmark measures memberlist's work, not the socket.
type nullTransport struct{ packets chan *Packet; streams chan net.Conn }

func (t *nullTransport) FinalAdvertiseAddr(string, int) (net.IP, int, error) { return net.IPv4(127, 0, 0, 1), 7946, nil }
func (t *nullTransport) WriteTo(b []byte, addr string) (time.Time, error) { return time.Now(), nil }
func (t *nullTransport) PacketCh() <-chan *Packet { return t.packets }
func (t *nullTransport) DialTimeout(string, time.Duration) (net.Conn, error) { return nil, net.UnknownNetworkError("none") }
func (t *nullTransport) StreamCh() <-chan net.Conn { return t.streams }
func (t *nullTransport) Shutdown() error { return nil }

func hotMember(b *testing.B) *Memberlist {
	c := DefaultLANConfig()
	c.Name = "py-1"
	c.Transport = &nullTransport{make(chan *Packet), make(chan net.Conn)}
	c.Logger = log.New(ioutil.Discard, "", 0)
	c.ProbeInterval = time.Hour
	c.GossipInterval = 0
	c.PushPullInterval = 0
	m, err := Create(c)
	if err != nil { b.Fatal(err) }
	for i := 0; i < 8; i++ {
		a := alive{Incarnation: 5, Node: "serf-" + string(rune('1'+i)), Addr: net.IPv4(127, 0, 0, byte(i+2)).To4(),
			Port: 7946, Meta: []byte{0xff, 0x80}, Vsn: []byte{1, 5, 2, 2, 5, 4}}
		m.aliveNode(&a, nil, false)
	}
	for m.broadcasts.NumQueued() > 0 { m.getBroadcasts(2, 1400) }
	return m
}

var from = &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2), Port: 7946}

func crcPacket(t messageType, v interface{}) []byte {
	buf, _ := encode(t, v)
	return append([]byte{byte(hasCrcMsg), 0, 0, 0, 0}, buf.Bytes()...)
}

func fixCrc(p []byte) []byte {
	crc := crc32.ChecksumIEEE(p[5:])
	p[1], p[2], p[3], p[4] = byte(crc>>24), byte(crc>>16), byte(crc>>8), byte(crc)
	return p
}

func BenchmarkHotPing(b *testing.B) {
	m := hotMember(b)
	p := fixCrc(crcPacket(pingMsg, &ping{SeqNo: 200, Node: "py-1", SourceAddr: net.IPv4(127, 0, 0, 2).To4(), SourcePort: 7946, SourceNode: "serf-1"}))
	b.ReportAllocs(); b.ResetTimer()
	for i := 0; i < b.N; i++ { m.ingestPacket(p, from, time.Now()) }
}

func BenchmarkHotAck(b *testing.B) {
	m := hotMember(b)
	ps := make([][]byte, b.N)
	for i := range ps {
		ps[i] = fixCrc(crcPacket(ackRespMsg, &ackResp{SeqNo: uint32(i + 1000000)}))
		m.setAckHandler(uint32(i+1000000), func([]byte, time.Time) {}, time.Hour)
	}
	b.ReportAllocs(); b.ResetTimer()
	for i := 0; i < b.N; i++ { m.ingestPacket(ps[i], from, time.Now()) }
}

// alive, suspect and dead go to a handoff queue in ingestPacket; its handler does what follows.
func BenchmarkHotAlive(b *testing.B) {
	m := hotMember(b)
	buf, _ := encode(aliveMsg, &alive{Incarnation: 5, Node: "serf-1", Addr: net.IPv4(127, 0, 0, 2).To4(), Port: 7946, Meta: []byte{0xff, 0x80}, Vsn: []byte{1, 5, 2, 2, 5, 4}})
	p := buf.Bytes()
	b.ReportAllocs(); b.ResetTimer()
	for i := 0; i < b.N; i++ { m.handleAlive(p[1:], from) }
}

func BenchmarkHotSuspect(b *testing.B) {
	m := hotMember(b)
	buf, _ := encode(suspectMsg, &suspect{Incarnation: 4, Node: "serf-1", From: "serf-2"})
	p := buf.Bytes()
	b.ReportAllocs(); b.ResetTimer()
	for i := 0; i < b.N; i++ { m.handleSuspect(p[1:], from) }
}
'''

GO_ROWS = {"BenchmarkHotPing": "ping -> ack", "BenchmarkHotAck": "ack (pending probe)",
           "BenchmarkHotAlive": "alive (no-op)", "BenchmarkHotSuspect": "suspect (old incarnation)"}


def go_rows(notes):
    src = pathlib.Path("/usr/share/gocode/src/github.com/hashicorp/memberlist")
    if not shutil.which("go") or not src.is_dir():
        notes.append("Go row skipped: needs golang-go and golang-github-hashicorp-memberlist-dev")
        return []
    with tempfile.TemporaryDirectory() as work:
        pkg = pathlib.Path(work, "src/github.com/hashicorp/memberlist")
        pkg.mkdir(parents=True)
        for f in src.glob("*.go"):
            if not f.name.endswith("_test.go"):
                shutil.copy(f, pkg)
        if (src / "vendor").is_dir():
            shutil.copytree(src / "vendor", pkg / "vendor")
        (pkg / "zz_hot_bench_test.go").write_text(GO_BENCH)
        env = dict(os.environ, GO111MODULE="off", GOFLAGS="", GOPATH=f"{work}:/usr/share/gocode",
                   GOCACHE=f"{work}/cache")
        result = subprocess.run(["go", "test", "-run", "^$", "-bench", "Hot", "-benchmem", "."], cwd=pkg,
                                env=env, capture_output=True, text=True)
    if result.returncode != 0:
        notes.append("Go row failed: " + (result.stderr or result.stdout).strip().splitlines()[-1])
        return []
    rows = []
    for line in result.stdout.splitlines():
        fields = line.split()
        name = fields[0].split("-")[0] if fields else ""
        if name in GO_ROWS and "ns/op" in fields:
            rows.append(dict(path="memberlist 0.2.2 (Go)", message=GO_ROWS[name],
                             ns=float(fields[fields.index("ns/op") - 1]),
                             bytes=float(fields[fields.index("B/op") - 1])))
    notes.append("Go: ping and ack through ingestPacket (the ack's send to a null transport); "
                 "alive and suspect through handleAlive/handleSuspect (the handoff queue's handler)")
    return rows


def table_text(rows):
    messages_ = list(dict.fromkeys(r["message"] for r in rows))
    path_names = list(dict.fromkeys(r["path"] for r in rows))
    by = {(r["path"], r["message"]): r for r in rows}
    lines = ["| message | " + " | ".join(f"{p}: ns | {p}: B" for p in path_names) + " |",
             "|---|" + "---:|---:|" * len(path_names)]
    for m in messages_:
        cells = []
        for p in path_names:
            r = by.get((p, m))
            cells += [f"{r['ns']:.0f}", f"{r['bytes']:.0f}"] if r else ["", ""]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def ratio_text(rows):
    by = {(r["path"], r["message"]): r for r in rows}
    out = []
    for (path, message), r in by.items():
        base = by.get(("general", message))
        if path.startswith("hot") and base and r["ns"]:
            out.append(f"{message}, {path}: {base['ns'] / r['ns']:.1f}x less CPU than the general path, "
                       f"{base['bytes']:.0f} -> {r['bytes']:.0f} B")
    return "\n".join(out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON")
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a smoke run)")
    parser.add_argument("--no-go", action="store_true", help="skip the Go benchmark")
    args = parser.parse_args(argv)
    rounds = 4000 if args.quick else 40000
    notes = []
    print(f"gossip hot messages (Python {sys.version.split()[0]}, {os.cpu_count()} CPUs)\n", flush=True)
    rows = engine_rows(rounds) + msgpack_rows(rounds)
    if not args.no_go:
        rows += go_rows(notes)
    print(table_text(rows) + "\n")
    ratios = ratio_text(rows)
    if ratios:
        print(ratios + "\n")
    for note in notes:
        print("note:", note)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"rows": rows, "notes": notes}, indent=2) + "\n")
        print(f"results written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
