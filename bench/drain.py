#!/usr/bin/env python3
"""Whole-process CPU per received heartbeat: the library against a bare C drain.

    python bench/drain.py [--rate 20000] [--members 1000] [--seconds 5] [--rounds 3]
                          [--json out.json]

A sender process multicasts the heartbeats of ``members`` simulated members,
``rate`` per second in all, on interface 127.0.0.1 with TTL 0 (nothing leaves
this host). Two receivers hear the same group at the same time, each on its
own socket:

- the library: a compiled ``McastService`` (threads, table, sweeps, its own
  heartbeats, everything a real process runs);
- a small C program, compiled here with gcc at run time, that joins the group
  the same way (same receive buffer, same 50 ms SO_RCVTIMEO, 32 x 64 KiB
  recvmmsg batches) and only counts what it reads.

Each reports its whole-process CPU time (getrusage, user + system) and the
datagrams it received over the same window, after a warm-up in which every
member has been heard. The figure is the ratio of CPU per datagram, library
over C, per round and the median of the rounds. Timings are noisy on small
shared machines: the ratio is taken within each round, both receivers side
by side on the same traffic.
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from heartbeat import GROUP, SENDER_SCRIPT, build_c, free_udp_port  # noqa: E402
from mcastmember.tribes.wire import layout as L  # noqa: E402
from mcastmember._runtime import net  # noqa: E402

INTERFACE = "127.0.0.1"
RCVBUF = 4 << 20            # as net.open_receiver
RCVTIMEO_US = 50_000        # as the service's sweep interval

DRAIN_C = r"""
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

#define BATCH 32
#define SLOT 65536

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double cpu(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6
         + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

int main(int argc, char **argv) {
    if (argc != 8) return 2;
    const char *group = argv[1], *iface = argv[3];
    int port = atoi(argv[2]), rcvbuf = atoi(argv[6]), timeout_us = atoi(argv[7]);
    double warmup = atof(argv[4]), seconds = atof(argv[5]);
    int fd = socket(AF_INET, SOCK_DGRAM, 0), one = 1, zero = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf) != 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    struct sockaddr_in addr = {0};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    inet_pton(AF_INET, group, &addr.sin_addr);
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0) { perror("bind"); return 1; }
    struct ip_mreq mreq;
    inet_pton(AF_INET, group, &mreq.imr_multiaddr);
    inet_pton(AF_INET, iface, &mreq.imr_interface);
    if (setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mreq, sizeof mreq) != 0) {
        perror("IP_ADD_MEMBERSHIP"); return 1;
    }
    setsockopt(fd, IPPROTO_IP, IP_MULTICAST_ALL, &zero, sizeof zero);
    struct timeval tv = {timeout_us / 1000000, timeout_us % 1000000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);

    unsigned char *mem = malloc((size_t)BATCH * SLOT);
    struct mmsghdr msgs[BATCH];
    struct iovec iov[BATCH];
    memset(msgs, 0, sizeof msgs);
    for (int i = 0; i < BATCH; i++) {
        iov[i].iov_base = mem + (size_t)i * SLOT;
        iov[i].iov_len = SLOT;
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    printf("ready\n");
    fflush(stdout);
    double start = now(), t0 = start + warmup, t1 = t0 + seconds, cpu0 = 0, cpu1 = 0;
    long long counted = 0;
    int measuring = 0;
    for (;;) {
        int got = recvmmsg(fd, msgs, BATCH, MSG_WAITFORONE, NULL);
        double t = now();
        if (!measuring && t >= t0) { measuring = 1; cpu0 = cpu(); }
        else if (measuring && got > 0) counted += got;
        if (t >= t1) { cpu1 = cpu(); break; }
    }
    printf("{\"received\": %lld, \"cpu_s\": %.6f}\n", counted, cpu1 - cpu0);
    return 0;
}
"""

LIBRARY_SCRIPT = r"""
import json, resource, sys, time
from mcastmember import implementation
from mcastmember.tribes.fronts.service import McastService

def cpu():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime

group, port, iface, warmup, seconds, members = sys.argv[1:7]
service = McastService(group, int(port), interface=iface, ttl=0, member_port=3999,
                       max_members=int(members) + 10)
with service:
    print("ready", flush=True)
    time.sleep(float(warmup))
    cpu0, received0 = cpu(), service.stats()["received"]
    time.sleep(float(seconds))
    cpu1, stats = cpu(), service.stats()
print(json.dumps({"received": stats["received"] - received0, "cpu_s": cpu1 - cpu0,
                  "members": stats["members"], "implementation": implementation()}))
"""


def build_drain(workdir):
    return build_c(DRAIN_C, workdir, "drain")


def _on(cpus):
    """preexec_fn pinning a child to ``cpus`` (None: leave it where it is)."""
    if not cpus:
        return None
    return lambda: os.sched_setaffinity(0, cpus)


def one_round(drain, rate, members, seconds, warmup=1.5, pin=False):
    port = free_udp_port()
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    # With --pin and 2+ CPUs: the sender on one, both receivers on another, so
    # that they wake under the same conditions (one CPU, taking turns).
    send_cpus, recv_cpus = ({cpus[0]}, {cpus[1]}) if pin and len(cpus) >= 2 else (None, None)
    args = [GROUP, str(port), INTERFACE, str(warmup), str(seconds)]
    env = dict(os.environ)
    env.pop("MCASTMEMBER_NO_EXTENSIONS", None)
    # The traffic first, so that both receivers' warm-up and window see it
    # whatever the sender's start-up costs on a loaded machine.
    sender = subprocess.Popen([sys.executable, "-c", SENDER_SCRIPT, str(port), str(members),
                               str(rate), str(warmup + seconds + 3.0)],
                              stdout=subprocess.PIPE, text=True, cwd="/",
                              preexec_fn=_on(send_cpus))
    with net.open_receiver(GROUP, port, INTERFACE, 10.0) as probe:
        probe.recv(L.RECV_BUFFER_LEN)        # the sender is sending (or 10 s: an error)
    library = subprocess.Popen([sys.executable, "-c", LIBRARY_SCRIPT, *args, str(members)],
                               stdout=subprocess.PIPE, text=True, env=env, cwd="/",
                               preexec_fn=_on(recv_cpus))
    c_drain = subprocess.Popen([drain, *args, str(RCVBUF), str(RCVTIMEO_US)],
                               stdout=subprocess.PIPE, text=True, preexec_fn=_on(recv_cpus))
    for proc in (library, c_drain):
        if proc.stdout.readline().strip() != "ready":
            raise SystemExit("a receiver did not start")
    results = {}
    for name, proc in (("library", library), ("c", c_drain)):
        out, _ = proc.communicate(timeout=warmup + seconds + 30)
        results[name] = json.loads(out.strip().splitlines()[-1])
    sent = int(sender.communicate(timeout=30)[0].strip())
    lib, c = results["library"], results["c"]
    if lib["implementation"] != "compiled":
        raise SystemExit("the library ran without its compiled extension")
    lib_ns = 1e9 * lib["cpu_s"] / max(1, lib["received"])
    c_ns = 1e9 * c["cpu_s"] / max(1, c["received"])
    return {"sent": sent, "library": lib, "c": c, "library_ns_per_datagram": lib_ns,
            "c_ns_per_datagram": c_ns, "ratio": lib_ns / c_ns}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=20000)
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pin", action="store_true",
                        help="sender on one CPU, both receivers on another")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as workdir:
        drain = build_drain(workdir)
        rounds = []
        for i in range(args.rounds):
            r = one_round(drain, args.rate, args.members, args.seconds, pin=args.pin)
            rounds.append(r)
            print(f"round {i + 1}: library {r['library_ns_per_datagram']:,.0f} ns/datagram "
                  f"({r['library']['received']:,} received, {r['library']['members']} members), "
                  f"C drain {r['c_ns_per_datagram']:,.0f} ns/datagram "
                  f"({r['c']['received']:,} received): {r['ratio']:.2f}x")
    summary = {"rate": args.rate, "members": args.members, "seconds": args.seconds,
               "pinned": args.pin,
               "median_ratio": statistics.median(r["ratio"] for r in rounds),
               "median_library_ns": statistics.median(r["library_ns_per_datagram"]
                                                      for r in rounds),
               "median_c_ns": statistics.median(r["c_ns_per_datagram"] for r in rounds),
               "rounds": rounds}
    print(f"median: library {summary['median_library_ns']:,.0f} ns, C drain "
          f"{summary['median_c_ns']:,.0f} ns per received heartbeat (whole-process CPU): "
          f"{summary['median_ratio']:.2f}x")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
