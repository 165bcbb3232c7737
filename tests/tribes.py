"""Runs tests/interop/TribesNode.java, a Tomcat Tribes node made of Tomcat's
own jars (Debian's libtomcat10-java), and reads the events it reports."""

import os
import pathlib
import queue
import shutil
import subprocess
import threading
import time

from support import wait_until

HARNESS = [pathlib.Path(__file__).parent / "interop" / name
           for name in ("TribesNode.java", "TribesVectors.java")]
JAR_DIRS = [pathlib.Path("/usr/share/java")]
# Tribes itself, and the cluster classes whose messages a member must answer.
JARS = ("tomcat10-tribes.jar", "tomcat10-juli.jar", "tomcat10-catalina-ha.jar",
        "tomcat10-catalina.jar", "tomcat10-servlet-api.jar", "tomcat10-util.jar")


def find_jars():
    """Paths of the Tribes and JULI jars, or None with the reason they are missing."""
    extra = os.environ.get("MCASTMEMBER_TOMCAT_JARS")
    dirs = [pathlib.Path(extra)] if extra else JAR_DIRS
    for folder in dirs:
        paths = [folder / name for name in JARS]
        if all(p.exists() for p in paths):
            return paths, None
    return None, ("Tomcat's Tribes jars not found (apt-get install libtomcat10-java, "
                  "or set MCASTMEMBER_TOMCAT_JARS)")


def build_harness(out_dir):
    """Compile the harness; return (classpath, None) or (None, reason to skip)."""
    if not shutil.which("javac") or not shutil.which("java"):
        return None, "Java (javac and java) is not installed"
    jars, missing = find_jars()
    if missing:
        return None, missing
    classpath = os.pathsep.join(str(p) for p in jars)
    subprocess.run(["javac", "-nowarn", "-d", str(out_dir), "-cp", classpath,
                    *map(str, HARNESS)], check=True, capture_output=True, timeout=120)
    return classpath + os.pathsep + str(out_dir), None


class Member:
    """One member as the Tomcat node reported it."""

    def __init__(self, kind, fields):
        self.kind = kind
        host, port, uid, domain, payload, command = fields

        def unhex(value):
            return b"" if value == "-" else bytes.fromhex(value)

        self.host, self.port, self.unique_id = host, int(port), unhex(uid)
        self.domain, self.payload, self.command = unhex(domain), unhex(payload), unhex(command)

    def __repr__(self):
        return (f"<{self.kind} {self.host}:{self.port} payload={self.payload!r} "
                f"cmd={self.command!r}>")


class TribesNode:
    """A running Tomcat membership node ("plain" McastService or the "stack":
    GroupChannel + NioReceiver + TcpFailureDetector), on loopback, TTL 0, unless
    given a ``bind`` address (IPv6 too), ``ttl`` and the namespace to run in.
    ``bind_socket=False``: ``bind`` is only the host we advertise, not the
    McastService's bind address (the JDK chooses the card).

    ``cloud_dns=NAME`` runs Tomcat's cloud membership instead of multicast
    (modes "cloud" and "cloud-fd", see TribesNode.java): CloudMembershipService
    with DNSMembershipProvider, which reads NAME from the environment variable
    DNS_MEMBERSHIP_SERVICE_NAME (it reads no system property) and asks the
    JVM's resolver, that is the namespace's /etc/resolv.conf, every
    ``frequency`` ms; ``drop_time`` is its expirationTime. The JVM caches no
    answer (sun.net.inetaddr.ttl=0; its default keeps one for 30 s), so each
    poll reaches the DNS server."""

    def __init__(self, classpath, mode, group, port, member_port, *, domain="-", payload=b"",
                 frequency=500, drop_time=3000, bind="127.0.0.1", ttl=0, netns=None,
                 bind_socket=True, cloud_dns=None):
        self.member_port = member_port
        # IPv4 on loopback; an IPv6 bind address needs Java's IPv6 stack.
        ipv4_stack = "true" if ":" not in bind else "false"
        inside = ["ip", "netns", "exec", netns] if netns else []
        options, env = [], None
        if cloud_dns is not None:
            options = ["-Dsun.net.inetaddr.ttl=0"]
            env = dict(os.environ, DNS_MEMBERSHIP_SERVICE_NAME=cloud_dns)
        self.proc = subprocess.Popen(
            [*inside, "java", f"-Djava.net.preferIPv4Stack={ipv4_stack}", *options,
             "-cp", classpath, "TribesNode", mode, group, str(port), bind, str(member_port),
             domain, payload.hex() or "-", str(frequency), str(drop_time), str(ttl),
             "bound" if bind_socket else "unbound"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=env)
        self.lines = queue.Queue()
        self.events = []
        self.stderr = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr), daemon=True).start()
        ready = self.expect("READY", timeout=30)
        self.unique_id = bytes.fromhex(ready.split()[1])

    def _read(self):
        for line in self.proc.stdout:
            line = line.strip()
            if line.startswith(("ADDED ", "GONE ")):
                kind, *fields = line.split()
                self.events.append((time.monotonic(), Member(kind, fields)))
            self.lines.put(line)

    def expect(self, prefix, timeout=10.0):
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"Tomcat node said no {prefix!r} in {timeout}s; "
                                     f"stderr: {''.join(self.stderr)[-2000:]}")
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            if line.startswith(prefix):
                return line

    def wait_event(self, kind, port, timeout=10.0, host=None, after=None):
        """The first ADDED/GONE event about member ``port`` (and ``host``, if
        given), seen after monotonic time ``after``: (time seen, Member)."""
        def found():
            return next(((seen, member) for seen, member in list(self.events)
                         if member.kind == kind and member.port == port
                         and (host is None or member.host == host)
                         and (after is None or seen > after)), None)
        return wait_until(found, timeout, message=lambda: f"{kind} for port {port}; events: {self.events}")

    def command(self, text, reply="OK"):
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()
        return self.expect(reply)

    def members(self):
        self.proc.stdin.write("members\n")
        self.proc.stdin.flush()
        found = []
        while True:
            line = self.expect(("MEMBER", "END"))
            if line == "END":
                return found
            found.append(Member("MEMBER", line.split()[1:]))

    def stop(self):
        """Graceful stop: Tomcat sends its shutdown packet."""
        if self.proc.poll() is None:
            self.proc.stdin.write("stop\n")
            self.proc.stdin.flush()
            self.proc.wait(30)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
