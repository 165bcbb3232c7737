"""dns_members=True next to Tomcat's own cloud membership.

A Tomcat node made of Tomcat's jars (CloudMembershipService with
DNSMembershipProvider, tests/interop/TribesNode.java "cloud" modes) and
``mcast-demo join --no-multicast --dns NAME --dns-members`` run in two hosts
of a LAN of network namespaces; a third host runs a real DNS server (dnsmasq)
whose A or AAAA records for NAME are the "headless service". Both read NAME
through the system resolver of their host (/etc/netns/HOST/resolv.conf: a
JVM has no setting of its own for the DNS server), as pods do.

What Tomcat does, read in its source and checked here: every address in the
answer but its own (InetAddress.getLocalHost()) is a member, named by the MD5
of the address as Java writes it, on Tomcat's own tcpListenPort; a member is
dropped expirationTime after its record left the answer; nothing is sent to
find members. Both sides must therefore list each other with the same unique
ids, and drop each other when the record goes. With a TcpFailureDetector in
Tomcat's stack (SimpleTcpCluster puts one there by default) Tomcat lists a
member only once a TCP connection to its port succeeds, and keeps it after its
record left DNS for as long as that port answers.

Tomcat polls DNS on its channel's heartbeat (heartbeatSleeptime, 5 s by
default) and expires after expirationTime (5 s): both are lowered here, and the
JVM caches no answer (sun.net.inetaddr.ttl=0), to keep the test short. Run it
with MCASTMEMBER_NO_EXTENSIONS=1 too (the Python node inherits it). Skipped
without root, dnsmasq, dnspython, Java or Tomcat's jars."""

import contextlib
import hashlib
import ipaddress
import time

import pytest

pytest.importorskip("dns.resolver", reason="dnspython is not installed")

from mcastmember.tribes.engine.config import ServiceConfig  # noqa: E402

import dnslab  # noqa: E402
from netlab import JsonProcess, Lan, assert_alternating, demo_command, event, run_in_netns  # noqa: E402
from support import wait_until  # noqa: E402
from tribes import TribesNode  # noqa: E402

pytestmark = pytest.mark.network

NAME = "tomcat-members.cluster.test"
MEMBER_PORT = 4000      # Tomcat's tcpListenPort; ours is the same
POLL_MS = 200           # Tomcat's heartbeatSleeptime, our dns_interval
EXPIRE_MS = 1000        # Tomcat's expirationTime
WAIT = 10.0             # bound for anything that should happen within a few polls
DNS, TOMCAT, PYTHON = 0, 1, 2


class Cloud:
    """The LAN, its DNS server and each host's address in one family."""

    def __init__(self, lan, dns, ipv6):
        self.lan, self.dns, self.ipv6 = lan, dns, ipv6

    def address(self, index):
        return self.lan.address6(index) if self.ipv6 else self.lan.address(index)

    def uid(self, index):
        """Tomcat's name for the member at host ``index``: the MD5 of its
        address as Java writes it."""
        return hashlib.md5(java_text(self.address(index)).encode("ascii")).digest()

    def list(self, *indexes):
        """Make NAME's records the addresses of these hosts."""
        self.dns.set({NAME: [self.address(i) for i in indexes]})


@pytest.fixture(scope="module", params=["ipv4", "ipv6"])
def cloud(request, tmp_path_factory):
    reason = Lan.available() or dnslab.available()
    if reason:
        pytest.skip(reason)
    ipv6 = request.param == "ipv6"
    with Lan(3, ipv6=ipv6) as lan, contextlib.ExitStack() as stack:
        dns = dnslab.DnsServer(lan.hosts[DNS], lan.address(DNS),
                               tmp_path_factory.mktemp("cloud-dns")).start()
        stack.callback(dns.stop)
        result = Cloud(lan, dns, ipv6)
        for index in (TOMCAT, PYTHON):
            stack.enter_context(dnslab.system_resolver(lan.hosts[index], lan.address(DNS),
                                                       result.address(index)))
        yield result


@pytest.fixture
def nodes():
    """Stops whatever the test started, Tomcat's JVM and our process."""
    started = []
    yield started
    for node in reversed(started):
        if isinstance(node, TribesNode):
            node.kill()
        else:
            node.stop()


def tomcat(cloud, classpath, nodes, mode):
    node = TribesNode(classpath, mode, "-", 0, MEMBER_PORT, bind=cloud.address(TOMCAT),
                      netns=cloud.lan.hosts[TOMCAT], frequency=POLL_MS, drop_time=EXPIRE_MS,
                      cloud_dns=NAME)
    nodes.append(node)
    return node


def python(cloud, nodes, *extra):
    proc = JsonProcess(cloud.lan, PYTHON, [
        *demo_command(), "join", "--no-multicast", "--interface", cloud.address(PYTHON),
        "--dns", NAME, "--dns-members", "--dns-interval", str(POLL_MS),
        "--member-port", str(MEMBER_PORT), "--json", *extra])
    nodes.append(proc)
    return proc


def tomcat_sees(node, kind, cloud, after=None):
    """Tomcat's first ``kind`` event about our node (after ``after``)."""
    _, member = node.wait_event(kind, MEMBER_PORT, WAIT, host=java_text(cloud.address(PYTHON)),
                                after=after)
    return member


def java_text(address):
    """``address`` as Java's InetAddress.getHostAddress() writes it: IPv6 in
    all eight groups, without "::" (what Tomcat digests, and what the Tomcat
    harness prints)."""
    parsed = ipaddress.ip_address(address)
    if parsed.version == 4:
        return address
    return ":".join(f"{int(group, 16):x}" for group in parsed.exploded.split(":"))


def wait_line(proc, predicate):
    """The first JSON line of ``proc`` for which ``predicate(time seen, line)``."""
    return wait_until(lambda: next((item for seen, item in list(proc.lines) if predicate(seen, item)), None),
                      WAIT, interval=0.02, message=lambda: f"a matching line: {proc.lines}")


def wait_logged(node, text):
    """Tomcat logged ``text`` (JULI's console log, on stderr)."""
    wait_until(lambda: text in "".join(node.stderr), WAIT, interval=0.02,
               message=lambda: "".join(node.stderr)[-3000:])


def assert_quiet(proc):
    """Our node stopped cleanly and logged no error (SIGTERM: exit 0)."""
    assert proc.proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "ERROR" not in proc.stderr, proc.stderr


def tomcat_members(node):
    return [(m.host, m.port, m.unique_id) for m in node.members()]


def test_tomcat_and_we_list_each_other_by_the_same_ids_and_drop_each_other_unlisted(
        cloud, classpath, nodes):
    cloud.list(TOMCAT, PYTHON)
    node = tomcat(cloud, classpath, nodes, "cloud")
    # Tomcat found itself in the answer and took the MD5 of its address as its id.
    assert node.unique_id == cloud.uid(TOMCAT)
    ours = python(cloud, nodes, "--tomcat")

    _, added = ours.wait_for(event("added", cloud.address(TOMCAT)), WAIT)
    assert added["member"]["unique_id"] == cloud.uid(TOMCAT).hex()   # what Tomcat calls itself
    assert (added["member"]["port"], added["member"]["alive_ms"]) == (MEMBER_PORT, -1)
    seen = tomcat_sees(node, "ADDED", cloud)
    own_id = run_in_netns(cloud.lan.hosts[PYTHON], lambda: ServiceConfig(
        None, interface=cloud.address(PYTHON), multicast=False, dns=NAME, dns_members=True,
        member_port=MEMBER_PORT).unique_id)
    assert seen.unique_id == own_id == cloud.uid(PYTHON)               # what we call ourselves
    assert tomcat_members(node) == [(java_text(cloud.address(PYTHON)), MEMBER_PORT,
                                     cloud.uid(PYTHON))]

    # Our record leaves: Tomcat drops us (after expirationTime); we keep Tomcat.
    at = time.monotonic()
    cloud.list(TOMCAT)
    tomcat_sees(node, "GONE", cloud, after=at)
    assert tomcat_members(node) == []
    at = time.monotonic()
    cloud.list(TOMCAT, PYTHON)
    assert tomcat_sees(node, "ADDED", cloud, after=at).unique_id == cloud.uid(PYTHON)

    # Tomcat's record leaves: we drop it at our next lookup, "unlisted".
    cloud.list(PYTHON)
    ours.wait_for(event("removed", cloud.address(TOMCAT), "unlisted"), WAIT)
    at = time.monotonic()
    cloud.list(TOMCAT, PYTHON)
    back = wait_line(ours, lambda seen, item: seen > at and item["event"] == "added")
    assert back["member"]["unique_id"] == cloud.uid(TOMCAT).hex()

    assert [m.kind for _, m in node.events] == ["ADDED", "GONE", "ADDED"]
    assert_alternating(cloud.lan, [ours])
    assert [(i["event"], i["member"]["host"]) for _, i in ours.lines] == [
        ("added", cloud.address(TOMCAT)), ("removed", cloud.address(TOMCAT)),
        ("added", cloud.address(TOMCAT))]
    ours.stop()
    assert_quiet(ours)


@pytest.mark.parametrize("cloud", ["ipv4"], indirect=True)    # once is enough
def test_tomcat_s_failure_detector_lists_us_only_with_our_listener_and_keeps_us_while_it_answers(
        cloud, classpath, nodes):
    cloud.list(TOMCAT, PYTHON)
    node = tomcat(cloud, classpath, nodes, "cloud-fd")

    # Without our TCP listener (on by default) the detector cannot connect:
    # Tomcat never lists us.
    deaf = python(cloud, nodes, "--no-tcp-listener")
    deaf.wait_for(event("added", cloud.address(TOMCAT)), WAIT)
    time.sleep(5 * POLL_MS / 1000)        # on purpose: five of the detector's checks, none may list us
    assert tomcat_members(node) == [] and node.events == []
    deaf.stop()
    assert_quiet(deaf)

    # With it (--tomcat, on Tomcat's tcpListenPort), the detector's next check lists us.
    ours = python(cloud, nodes, "--tomcat")
    ours.wait_for(event("added", cloud.address(TOMCAT)), WAIT)
    assert tomcat_sees(node, "ADDED", cloud).unique_id == cloud.uid(PYTHON)

    # Our record leaves DNS: the provider expires us, the detector connects, we
    # answer, and Tomcat keeps us.
    cloud.list(TOMCAT)
    wait_logged(node, "Verification complete. Member still alive")
    time.sleep(5 * POLL_MS / 1000)        # on purpose: five more checks, none may drop us
    assert tomcat_members(node) == [(java_text(cloud.address(PYTHON)), MEMBER_PORT,
                                     cloud.uid(PYTHON))]
    assert [m.kind for _, m in node.events] == ["ADDED"]

    # We stop: the listener closes, and the detector's next check drops us.
    at = time.monotonic()
    ours.stop()
    assert_quiet(ours)
    tomcat_sees(node, "GONE", cloud, after=at)
    assert tomcat_members(node) == []
