"""A real DNS server for discovery tests: Debian's dnsmasq, started inside a
network namespace the test made, serving records from files the test
rewrites. A and AAAA records live in a hosts file (re-read on SIGHUP, as an
operator's change would be); SRV records are options of dnsmasq's own, read
at start, so changing them restarts it. Nothing is mocked at the DNS layer."""

import contextlib
import os
import pathlib
import shutil
import signal
import socket
import subprocess

from support import wait_until


def available():
    if os.geteuid() != 0:
        return "DNS tests need root (network namespaces)"
    if not shutil.which("dnsmasq"):
        return "dnsmasq is not installed (apt-get install dnsmasq-base)"
    return None


class DnsServer:
    """dnsmasq in namespace ``netns`` on ``address``:53. ``records`` maps a
    name to its addresses; ``srv`` maps a name to ``[(target, port), ...]``.
    ``authoritative`` (the default): it answers every name itself; without,
    it has no upstream either, and refuses what its files do not answer (an
    AAAA query for a name with only an IPv4 address, as dnsmasq 2.90 does)."""

    def __init__(self, netns, address, folder, authoritative=True):
        self.netns, self.address = netns, address
        self.authoritative = authoritative
        self.folder = pathlib.Path(folder)
        self.hosts = self.folder / "hosts"
        self.conf = self.folder / "dnsmasq.conf"
        self.records, self.srv = {}, {}
        self.proc = None

    def _write(self):
        lines = [f"{address} {name}" for name, addresses in self.records.items()
                 for address in addresses]
        tmp = self.hosts.with_suffix(".tmp")
        tmp.write_text("\n".join(lines) + "\n")
        tmp.replace(self.hosts)          # never a half-written file for dnsmasq to read
        options = [f"srv-host={name},{target},{port}" for name, targets in self.srv.items()
                   for target, port in targets]
        self.conf.write_text("\n".join(options) + "\n")

    def start(self):
        self._write()
        argv = ["ip", "netns", "exec", self.netns, "dnsmasq", "--keep-in-foreground",
                "--no-resolv", "--no-hosts", "--no-poll",
                *(["--local=/#/"] if self.authoritative else []),   # answer everything itself
                f"--addn-hosts={self.hosts}",
                f"--conf-file={self.conf}", f"--listen-address={self.address}",
                "--bind-interfaces", "--port=53", "--cache-size=0", "--local-ttl=0",
                "--user=root", "--pid-file=", "--log-facility=-"]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self._wait_listening()
        return self

    def _wait_listening(self, timeout=15.0):
        """Until dnsmasq takes a TCP connection on its port: a loaded machine
        can take longer to start it than any fixed sleep allows."""
        from netlab import run_in_netns

        def connects():
            with contextlib.suppress(OSError), socket.create_connection((self.address, 53), timeout=0.2):
                return True
            return False

        def listening():
            if self.proc.poll() is not None:
                raise RuntimeError(f"dnsmasq did not start: {self.proc.stderr.read().decode()}")
            return run_in_netns(self.netns, connects)
        wait_until(listening, timeout, interval=0.05, message=f"dnsmasq to listen on {self.address}:53")

    def _answers(self):
        """Whether dnsmasq answers every name with its addresses now (call it
        in the namespace): a reload has taken effect."""
        import ipaddress
        import dns.exception
        import dns.resolver
        resolver = dns.resolver.Resolver(configure=False)
        resolver.nameservers, resolver.lifetime = [self.address], 0.5
        for name, addresses in self.records.items():
            wanted = {ipaddress.ip_address(address) for address in addresses}
            for rdtype, version in (("A", 4), ("AAAA", 6)):
                expected = {address for address in wanted if address.version == version}
                if not expected:
                    continue
                try:
                    got = {ipaddress.ip_address(r.address) for r in resolver.resolve(name, rdtype)}
                except dns.exception.DNSException:
                    return False
                if got != expected:
                    return False
        return True

    def set(self, records=None, srv=None):
        """Replace the records; A/AAAA changes are picked up at once (SIGHUP),
        SRV changes by a restart."""
        srv_changed = srv is not None and srv != self.srv
        if records is not None:
            self.records = {name: list(addresses) for name, addresses in records.items()}
        if srv is not None:
            self.srv = {name: list(targets) for name, targets in srv.items()}
        if srv_changed:
            self.stop()
            self.start()
            return
        self._write()
        self.proc.send_signal(signal.SIGHUP)
        from netlab import run_in_netns
        wait_until(lambda: run_in_netns(self.netns, self._answers), interval=0.05,
                   message=lambda: f"dnsmasq to answer {self.records}")

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None


@contextlib.contextmanager
def system_resolver(netns, server, own_address):
    """Point the system resolver of processes run by ``ip netns exec NETNS``
    at ``server`` (a JVM has no setting for its DNS server: it asks through
    the C library, which reads /etc/resolv.conf). ip netns exec mounts
    /etc/netns/NETNS/resolv.conf and hosts over /etc's in a mount namespace
    of the process's own, so the machine's files are never touched. The hosts
    file names this machine's host name with ``own_address``, as a Kubernetes
    pod's /etc/hosts names the pod with its IP: Tomcat's cloud membership
    finds itself in the DNS answer by InetAddress.getLocalHost()."""
    folder = pathlib.Path("/etc/netns") / netns
    folder.mkdir(parents=True)
    try:
        (folder / "resolv.conf").write_text(f"nameserver {server}\noptions timeout:1\n")
        (folder / "hosts").write_text(f"127.0.0.1 localhost\n::1 localhost\n"
                                      f"{own_address} {socket.gethostname()}\n")
        yield
    finally:
        shutil.rmtree(folder, ignore_errors=True)
