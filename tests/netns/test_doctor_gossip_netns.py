"""mcast-demo doctor --gossip where it needs hosts of its own (two network
namespaces, tests/netlab.py; needs root):

- a seed whose address nobody has: silent by TCP and UDP, told apart from a
  refusal, with what --retry-join would do;
- --advertise ADDR, where ADDR is not an address of the doctor's host: it
  dials ADDR from there and says whether that leads to the member's --bind
  address: nobody's address (a warning: only a NAT on the members' way could
  lead it here), the same address forwarded here by nftables (a pass),
  another member's address (a failure)."""

import json
import shutil
import socket
import subprocess

import pytest

pytest.importorskip("msgpack")

from mcastmember.tools.cli import main  # noqa: E402
from netlab import Lan, demo_command, run_in_netns  # noqa: E402
from support import wait_until  # noqa: E402

# The doctor's verdicts are the same over either implementation (the
# kernels beneath are compared elsewhere): CI's compiled pass runs these.
pytestmark = [pytest.mark.network,
              pytest.mark.skipif(Lan.available() is not None, reason=str(Lan.available())),
              pytest.mark.single_pass]
NOBODY = "10.250.0.99"


@pytest.fixture(scope="module")
def lan():
    with Lan(2, prefix="dad") as network:
        yield network


def advertise_check(lan, capsys, advertise, seed="10.250.0.1"):
    """The doctor's advertise verdict, run on host 1 (10.250.0.2)."""
    run_in_netns(lan.hosts[1], main, ["doctor", "--gossip", "--bind", lan.address(1), "--join", seed,
                                      "--advertise", advertise, "--node", "doc", "--wait", "1", "--json"])
    checks = json.loads(capsys.readouterr().out)["checks"]
    return next(c for c in checks if c["name"] == "advertise")


def test_a_seed_nobody_has_is_silent_by_tcp_and_udp(lan, capsys):
    run_in_netns(lan.hosts[1], main, ["doctor", "--gossip", "--bind", lan.address(1), "--retry-join", NOBODY,
                                      "--retry-interval", "5s", "--node", "doc", "--wait", "1", "--json"])
    checks = json.loads(capsys.readouterr().out)["checks"]
    assert checks[1:] == [
        {"name": "seed_tcp", "status": "fail",
         "detail": f"{NOBODY}:7946 does not answer by TCP (nothing in 1 s): the host is down, or a firewall drops "
                   "TCP port 7946",
         "fix": "check the seed's host is up, and let TCP port 7946 through the firewalls between; with "
                "--retry-join this member tries again every 5 s, for as long as it runs (--retry-max 0): it joins "
                "once the seed is up"},
        {"name": "seed_udp", "status": "fail", "detail": f"no ack from {NOBODY}:7946 by UDP either (3 pings)",
         "fix": "check the seed runs (serf members on it) and the address and port"}]


def test_an_address_that_leads_nowhere_from_here_is_a_warning(lan, capsys):
    assert advertise_check(lan, capsys, NOBODY) == {
        "name": "advertise", "status": "warn",
        "detail": f"--advertise {NOBODY}:7946 is not an address of this host, and from here it does not answer "
                  "in 1 s: members reach this node only if a NAT or port forward on their way sends it to "
                  "10.250.0.2:7946",
        "fix": f"forward TCP and UDP port 7946 of {NOBODY} to 10.250.0.2:7946, or --advertise an address of "
               "this host"}


@pytest.mark.skipif(shutil.which("nft") is None, reason="nftables (nft) is not installed")
def test_an_address_forwarded_here_passes(lan, capsys):
    rules = ("table ip dadnat {\n  chain out {\n    type nat hook output priority -100; policy accept;\n"
             f"    ip daddr {NOBODY} dnat to {lan.address(1)}\n  }}\n}}\n")
    subprocess.run(["ip", "netns", "exec", lan.hosts[1], "nft", "-f", "-"], input=rules, text=True,
                   check=True, capture_output=True, timeout=30)
    try:
        verdict = advertise_check(lan, capsys, NOBODY)
    finally:
        subprocess.run(["ip", "netns", "exec", lan.hosts[1], "nft", "delete", "table", "ip", "dadnat"],
                       capture_output=True, timeout=30)
    assert verdict == {"name": "advertise", "status": "pass",
                       "detail": f"--advertise {NOBODY}:7946 (another host's address) leads to 10.250.0.2:7946 "
                                 "here, by TCP and UDP", "fix": None}


def test_another_members_address_fails(lan, capsys):
    seed = lan.run(0, [*demo_command(), "gossip", "--bind", lan.address(0), "--node", "s0", "--duration", "30"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def listening():
            try:
                run_in_netns(lan.hosts[1], socket.create_connection, (lan.address(0), 7946), 1).close()
                return True
            except OSError:
                return False

        wait_until(listening, interval=0.05)
        verdict = advertise_check(lan, capsys, lan.address(0))
    finally:
        seed.terminate()
        seed.wait(10)
    assert verdict == {
        "name": "advertise", "status": "fail",
        "detail": "--advertise 10.250.0.1:7946 is not this host's, and it answers from elsewhere: a connection "
                  "to it reached another listener, not 10.250.0.2:7946 (another member's address?)",
        "fix": "--advertise this host's address (or its NAT's) instead of 10.250.0.1"}


def test_bound_to_every_address_the_address_chosen_to_advertise_is_checked(lan, capsys):
    # a default route, so that the host has an address to choose (the one its routes send from)
    route = ["ip", "-n", lan.hosts[1], "route", "{}", "default", "dev", "eth0"]
    subprocess.run([w.format("add") for w in route], check=True, capture_output=True, timeout=30)
    try:
        run_in_netns(lan.hosts[1], main, ["doctor", "--gossip", "--bind", "0.0.0.0", "--join", NOBODY,
                                          "--node", "doc", "--wait", "0.3", "--json"])
    finally:
        subprocess.run([w.format("del") for w in route], capture_output=True, timeout=30)
    checks = json.loads(capsys.readouterr().out)["checks"]
    assert checks[1] == {"name": "advertise", "status": "pass",
                         "detail": "10.250.0.2:7946 is this host's, and the member binds every address "
                                   "(0.0.0.0:7946): the address chosen to advertise", "fix": None}
