"""A small LAN of hosts made of network namespaces, for multi-host tests.

Every host is a namespace with one veth link (eth0, 10.250.0.N/24) to a
bridge that lives in its own "switch" namespace, so nothing is added to or
sent on the machine's own network. Needs root and iproute2; ``Lan.available()``
says why not otherwise.

``prefix`` starts every namespace's name (a suite's own keeps it apart
from others running at once). ``Lan(n, ipv6=True)`` also gives each card fd00:250::N/64; IPv6 addresses
(link-local ones too) skip duplicate address detection, so they are usable
at once. ``Lan(n, bridges=[[0, 1], [0],
[1]])`` makes several bridges: host i has one card per bridge listed, named
eth0, eth1... in that order, with 10.(250+b).0.N and fd00:(250+b)::N on
bridge b.

The kernel here has no netem qdisc: ``loss_rules`` and ``Lan.filter`` drop
packets at random with nftables on a host's input hook instead (each
receiving host draws for itself, as on a real lossy LAN).
"""

import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid

from support import wait_until


def _ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


class Lan:
    def __init__(self, hosts=3, ipv6=False, bridges=None, prefix="mcm"):
        self.tag = uuid.uuid4().hex[:6]
        self.switch = f"{prefix}{self.tag}sw"
        self.hosts = [f"{prefix}{self.tag}h{i}" for i in range(1, hosts + 1)]
        self.bridges = [list(b) for b in bridges] if bridges else [[0]] * hosts
        self.ipv6 = ipv6
        self.created = []

    @staticmethod
    def available():
        if os.geteuid() != 0:
            return "multi-host tests need root (network namespaces)"
        if not shutil.which("ip"):
            return "iproute2 (ip) is not installed"
        return None

    def address(self, index, bridge=0):
        """Host ``index``'s IPv4 address on ``bridge``."""
        return f"10.{250 + bridge}.0.{index + 1}"

    def address6(self, index, bridge=0):
        return f"fd00:{250 + bridge}::{index + 1}"

    def card(self, index, bridge=0):
        """The name of host ``index``'s card on ``bridge``."""
        return f"eth{self.bridges[index].index(bridge)}"

    def port_name(self, index, bridge=0):
        return f"sw{index + 1}" if bridge == 0 else f"sw{index + 1}b{bridge}"

    def __enter__(self):
        try:
            _ip("netns", "add", self.switch)
            self.created.append(self.switch)
            for bridge in sorted({b for cards in self.bridges for b in cards}):
                name = f"br{bridge}"
                _ip("-n", self.switch, "link", "add", name, "type", "bridge")
                # Flood multicast to every port (no IGMP/MLD snooping on this switch).
                _ip("-n", self.switch, "link", "set", name, "type", "bridge", "mcast_snooping",
                    "0")
                _ip("-n", self.switch, "link", "set", name, "up")
            for i, host in enumerate(self.hosts):
                _ip("netns", "add", host)
                self.created.append(host)
                _ip("-n", host, "link", "set", "lo", "up")
                # IPv6 addresses usable at once, link-local ones included
                # (no duplicate address detection on a LAN we made).
                self.sysctl(i, "net.ipv6.conf.default.accept_dad=0")
                for bridge in self.bridges[i]:
                    self._plug_card(i, bridge)
        except BaseException:
            self.__exit__()
            raise
        return self

    def _plug_card(self, i, bridge):
        host, card, port = self.hosts[i], self.card(i, bridge), self.port_name(i, bridge)
        temporary = f"h{i + 1}b{bridge}"
        _ip("-n", self.switch, "link", "add", temporary, "type", "veth", "peer", "name", port)
        _ip("-n", self.switch, "link", "set", temporary, "netns", host)
        _ip("-n", host, "link", "set", temporary, "name", card)
        _ip("-n", host, "addr", "add", f"{self.address(i, bridge)}/24", "dev", card)
        if self.ipv6:
            _ip("-n", host, "addr", "add", f"{self.address6(i, bridge)}/64", "dev", card)
        _ip("-n", host, "link", "set", card, "up")
        _ip("-n", self.switch, "link", "set", port, "master", f"br{bridge}")
        _ip("-n", self.switch, "link", "set", port, "up")

    def __exit__(self, *exc):
        for ns in reversed(self.created):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
        self.created = []

    def sysctl(self, index, setting):
        subprocess.run(["ip", "netns", "exec", self.hosts[index], "sysctl", "-qw", setting],
                       check=True, capture_output=True, timeout=30)

    def unplug(self, index, state="down"):
        """Pull host ``index``'s cables out at the switch."""
        for bridge in self.bridges[index]:
            _ip("-n", self.switch, "link", "set", self.port_name(index, bridge), state)

    def plug(self, index):
        self.unplug(index, "up")

    def link(self, index, state):
        """Take host ``index``'s own interface down or up."""
        _ip("-n", self.hosts[index], "link", "set", "eth0", state)

    def run(self, index, argv, **kw):
        return subprocess.Popen(["ip", "netns", "exec", self.hosts[index], *argv], **kw)

    def block_multicast(self, index, blocked=True):
        """Host ``index`` as on a network where multicast does not pass (most
        clouds, Kubernetes): no multicast route in its tables (the kernel's
        ff00::/8 deleted; IPv4 has none here) and its switch ports flood no
        multicast to it. The switch is what really stops it: a socket with
        IP_MULTICAST_IF sends without any route. ``blocked=False`` lets it
        through again, with a 224.0.0.0/4 and an ff00::/8 route on its first card."""
        host, card = self.hosts[index], self.card(index, self.bridges[index][0])
        for bridge in self.bridges[index]:
            _ip("-n", self.switch, "link", "set", "dev", self.port_name(index, bridge),
                "type", "bridge_slave", "mcast_flood", "off" if blocked else "on")
        if blocked:
            for route in self.multicast_routes(index):
                family, *words = route.split()
                _ip("-n", host, family, "route", "del", *words)
        else:
            _ip("-n", host, "route", "replace", "224.0.0.0/4", "dev", card)
            _ip("-n", host, "-6", "route", "replace", "multicast", "ff00::/8", "dev", card,
                "table", "local")

    def multicast_routes(self, index):
        """Host ``index``'s routes to multicast destinations, IPv4 and IPv6,
        every table (``ip route show`` lines, each with its table)."""
        import ipaddress
        found = []
        for family, space in (("-4", "224.0.0.0/4"), ("-6", "ff00::/8")):
            out = subprocess.run(["ip", "-n", self.hosts[index], family, "route", "show",
                                  "table", "all"], check=True, capture_output=True, text=True,
                                 timeout=30).stdout
            for line in out.splitlines():
                words = line.split()
                kind = words[0] if words[0] in ("unicast", "local", "broadcast", "multicast",
                                                "anycast") else None
                destination = words[1] if kind else words[0]
                if destination == "default":
                    destination = "::/0" if family == "-6" else "0.0.0.0/0"
                network = ipaddress.ip_network(destination, strict=False)
                if network.overlaps(ipaddress.ip_network(space)):
                    if "table" not in words:
                        line += " table main"
                    found.append(f"{family} {line}")
        return found

    def filter(self, index, rules):
        """Host ``index``'s input filter becomes ``rules`` (nftables rule
        lines, see ``loss_rules``), in place of any it had."""
        host = self.hosts[index]
        subprocess.run(["ip", "netns", "exec", host, "nft", "delete", "table", "inet",
                        NFT_TABLE], capture_output=True, timeout=30)
        text = (f"table inet {NFT_TABLE} {{\n  chain input {{\n"
                "    type filter hook input priority 0; policy accept;\n"
                + "".join(f"    {rule}\n" for rule in rules) + "  }\n}\n")
        done = subprocess.run(["ip", "netns", "exec", host, "nft", "-f", "-"], input=text,
                              text=True, capture_output=True, timeout=30)
        if done.returncode != 0:
            raise RuntimeError(f"nft refused the rules for {host}: {done.stderr.strip()}")

    def counters(self, index):
        """The packets each of host ``index``'s filter rules counted, in
        their order (rules without a counter are left out)."""
        out = subprocess.run(["ip", "netns", "exec", self.hosts[index], "nft", "-j", "list",
                              "table", "inet", NFT_TABLE], check=True, capture_output=True,
                             text=True, timeout=30).stdout
        counts = []
        for item in json.loads(out)["nftables"]:
            for expression in item.get("rule", {}).get("expr", []):
                if "counter" in expression:
                    counts.append(expression["counter"]["packets"])
        return counts


NFT_TABLE = "mcmlossy"


def nft_available():
    """None when nftables can filter in our namespaces, else why not."""
    if shutil.which("nft") is None:
        return "nftables (nft) is not installed (apt-get install nftables)"
    return None


def loss_rules(percent, udp=(), tcp=(), source=None):
    """Rules that drop ``percent`` % of what arrives for the UDP ports
    ``udp`` (heartbeats) and of the TCP segments to or from the ports
    ``tcp`` (both ways of a probe's handshake), each packet drawn at
    random; only from address ``source`` when given. The first rule counts
    every such packet, the others what they drop: ``Lan.counters`` reads
    (seen, dropped UDP[, dropped TCP in, dropped TCP out])."""
    def ports(values):
        return "{ " + ", ".join(str(p) for p in values) + " }"
    origin = f"ip saddr {source} " if source else ""
    # numgen gives 0-99: "< 100" is out of its range, so all is no draw at all.
    draw = "" if percent >= 100 else f"numgen random mod 100 < {int(percent)} "
    rules = [f"{origin}udp dport {ports(udp)} counter"] if udp else []
    if udp:
        rules.append(f"{origin}udp dport {ports(udp)} {draw}counter drop")
    if tcp:
        rules.append(f"{origin}tcp dport {ports(tcp)} {draw}counter drop")
        rules.append(f"{origin}tcp sport {ports(tcp)} {draw}counter drop")
    return rules


class JsonProcess:
    """A process in a host that prints one JSON object per line; the lines are
    collected with the time they arrived."""

    def __init__(self, lan, index, argv):
        self.index = index
        self.proc = lan.run(index, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
        self.lines = []
        self.stderr = ""
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                item = (time.monotonic(), json.loads(line))
            except ValueError:
                continue
            self.lines.append(item)

    def _read_err(self):
        for line in self.proc.stderr:      # line by line: readable while it runs
            self.stderr += line

    def wait_for(self, predicate, timeout=5.0):
        """(when it was read, item) of the first line ``predicate`` accepts, once there is one."""
        return wait_until(lambda: next(((seen, item) for seen, item in list(self.lines) if predicate(item)), None),
                          timeout, interval=0.02,
                          message=lambda: (f"host {self.index}: a matching line; got "
                                           f"{[i for _, i in self.lines]}; stderr {self.stderr}"))

    def stats(self, timeout=5.0):
        """The ``stats()`` of a ``service_command`` process, now (it prints
        them on SIGUSR1)."""
        import signal
        self.wait_for(lambda i: i["event"] == "ready", timeout)
        earlier = {id(item) for _, item in self.lines if item["event"] == "stats"}
        self.proc.send_signal(signal.SIGUSR1)
        _, item = self.wait_for(lambda i: i["event"] == "stats" and id(i) not in earlier,
                                timeout)
        return item["stats"]

    def stop(self, sig=None):
        import signal
        if self.proc.poll() is None:
            self.proc.send_signal(sig or signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def demo_command():
    """How to run ``mcast-demo`` (the installed script, else the module)."""
    demo = shutil.which("mcast-demo")
    return [demo] if demo else [sys.executable, "-m", "mcastmember"]


SERVICE_SCRIPT = r"""
import json, signal, sys, threading
lock, asked, leave = threading.Lock(), threading.Event(), threading.Event()
def out(item):
    with lock:
        sys.stdout.write(json.dumps(item) + "\n")
        sys.stdout.flush()
signal.signal(signal.SIGUSR1, lambda *_: asked.set())
signal.signal(signal.SIGTERM, lambda *_: leave.set())
out({"event": "ready"})      # SIGUSR1 is safe from now on (its default action ends us)
from mcastmember import McastService
service = McastService(**json.loads(sys.argv[1]))
service.add_listener(lambda e: out(e.to_dict() if e.member is not None
                                   else {"event": e.kind, "count": e.count}))
with service:
    while not leave.is_set():
        if asked.wait(0.02):
            asked.clear()
            out({"event": "stats", "stats": service.stats()})
"""


def service_command(settings):
    """Run ``McastService(**settings)`` as a process: its events as
    ``mcast-demo join --json`` prints them, its stats on SIGUSR1 (see
    JsonProcess.stats), a goodbye on SIGTERM. Isolated (-I), so that the
    installed mcastmember runs, not the source tree in the current directory
    (which has no compiled extension)."""
    return [sys.executable, "-I", "-c", SERVICE_SCRIPT, json.dumps(settings)]


def event(kind, host, reason=None):
    """A predicate for JsonProcess.wait_for: that event about member ``host``."""
    def match(item):
        return (item["event"] == kind and item["member"]["host"] == host
                and (reason is None or item["reason"] == reason))
    return match


def added(proc, host):
    return [i for _, i in proc.lines if i["event"] == "added" and i["member"]["host"] == host]


def wait_added(proc, host, times, timeout=5.0):
    """Until ``proc`` saw member ``host`` added ``times`` times (back after a restart)."""
    wait_until(lambda: len(added(proc, host)) >= times, timeout, interval=0.02,
               message=lambda: f"host {proc.index} to add {host} {times} times: {proc.lines}")


def wait_all_see_all(lan, procs, timeout=5.0, address=None):
    """Every process saw every other added; ``address(index)`` is what host
    ``index`` advertises (default: its IPv4 address)."""
    address = address or lan.address
    for proc in procs:
        for other in procs:
            if other is not proc:
                proc.wait_for(event("added", address(other.index)), timeout)


def assert_alternating(lan, procs):
    """For every observer and member: added, removed, added... never two of a kind."""
    for proc in procs:
        by_host = {}
        for _, item in proc.lines:
            if item["event"] in ("added", "removed"):
                member = item["member"]
                by_host.setdefault((member["host"], member["port"]), []).append(item["event"])
        for host, kinds in by_host.items():
            assert kinds[0] == "added", (proc.index, host, kinds)
            assert all(a != b for a, b in zip(kinds, kinds[1:])), (proc.index, host, kinds)


def check_partition_heals(lan, procs, address=None):
    """Unplug host 0 of three that see each other: it and the others expire
    each other (the two others keep each other), then plug it back: all are
    in each other's tables again, with nothing lost or doubled."""
    address = address or lan.address
    lan.unplug(0)
    for other in (1, 2):
        procs[0].wait_for(event("removed", address(other), "expired"), timeout=3)
        procs[other].wait_for(event("removed", address(0), "expired"), timeout=3)
    time.sleep(0.3)          # time for a wrong removal between the two others to show: none may come
    assert not [item for _, item in procs[1].lines
                if item["member"]["host"] == address(2) and item["event"] == "removed"]
    lan.plug(0)
    for observer, host in [(0, 1), (0, 2), (1, 0), (2, 0)]:   # healed: back in each other's tables
        wait_added(procs[observer], address(host), 2, timeout=3)
    assert_alternating(lan, procs)


def count_datagrams(group, port, card, seconds, ready=None):
    """Listen to ``group:port`` on ``card`` of this namespace (call it through
    run_in_netns) for ``seconds``: {source address: datagrams}. A plain
    socket, nothing of mcastmember, to count what really arrives there.
    ``ready`` (a threading.Event), if given, is set once it listens."""
    six = ":" in group
    sock = socket.socket(socket.AF_INET6 if six else socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        index = socket.if_nametoindex(card)
        if six:
            sock.bind(("::", port))
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_JOIN_GROUP,
                            socket.inet_pton(socket.AF_INET6, group) + struct.pack("@I", index))
        else:
            sock.bind(("0.0.0.0", port))
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
                            socket.inet_aton(group) + bytes(4) + struct.pack("@i", index))
        sock.settimeout(0.05)
        sources = {}
        if ready is not None:
            ready.set()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                _, source = sock.recvfrom(65535)
            except socket.timeout:
                continue
            sources[source[0]] = sources.get(source[0], 0) + 1
        return sources
    finally:
        sock.close()


_CLONE_NEWNET = 0x40000000


def run_in_netns(name, function, *args, timeout=30.0):
    """Call ``function(*args)`` on a thread that entered namespace ``name``
    (setns acts per thread) and return its result or raise its exception."""
    import ctypes
    result = {}

    def body():
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            path = f"/run/netns/{name}"
            fd = os.open(path, os.O_RDONLY)
            try:
                if libc.setns(fd, _CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), f"setns into {name} failed")
            finally:
                os.close(fd)
            if os.stat("/proc/thread-self/ns/net").st_ino != os.stat(path).st_ino:
                raise OSError(f"thread did not enter {name}")
            result["value"] = function(*args)
        except BaseException as error:     # handed to the caller
            result["error"] = error

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise TimeoutError(f"{function.__name__} did not return within {timeout} s")
    if "error" in result:
        raise result["error"]
    return result["value"]
