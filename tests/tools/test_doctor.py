"""mcast-demo doctor on loopback (TTL 0): its checks, their JSON, the fixes
it gives for what can be broken here, and its probes, which neither an
mcastmember member nor Tomcat takes for anything. The cases that need a
network of their own are in test_doctor_netns.py."""

import contextlib
import io
import json
import logging
import os
import re
import socket
import sys
import threading

import pytest

from mcastmember import McastService
from mcastmember.tools.cli import main
from mcastmember.tools.doctor import estimate
from mcastmember.tribes.net.interfaces import list_interfaces

from fronts import Events
from support import GROUP, LOOPBACK, fix_flag, heartbeat, loopback_sender
from tribes import TribesNode

CHECKS = ["interface", "route", "group", "port", "rp_filter", "loop", "joined", "heard",
          "domain", "drop_time", "loss", "identity"]
MEMBER_FIELDS = {"host", "port", "unique_id", "domain", "domain_hex", "period_ms", "loss",
                 "heard", "source"}


def doctor(capsys, *args):
    """(exit status, the JSON report) of an in-process run on loopback."""
    code = main(["doctor", *args, "--json"])
    out = capsys.readouterr()
    assert out.err == ""
    return code, json.loads(out.out)


def loopback(group_port, *extra):
    return [GROUP, "--port", str(group_port), "--interface", "127.0.0.1", "--ttl", "0", *extra]


def by_name(report):
    return {check["name"]: check for check in report["checks"]}


def member(group_port, **settings):
    options = dict(LOOPBACK, member_port=4000, frequency=100, drop_time=1000)
    options.update(settings)
    return McastService(GROUP, group_port, **options)


def beats(alive_times, period_s):
    """[(arrival, alive)] as a receiver sees them, one period apart."""
    return [(i * period_s, alive) for i, alive in enumerate(alive_times)]


def test_period_and_loss_from_alive_times():
    # A fixed-rate sender (mcastmember) with jitter, every fifth beat lost:
    # a late beat then an early one is no loss.
    jitter = [0, 9, 1, 12, 0, 3, 11, 0, 2, 8] * 11
    sent = [100 * n + jitter[n] for n in range(101)]
    heard = [a for n, a in enumerate(sent) if n % 5 != 4]         # 81 of 101
    assert estimate(beats(heard, 0.1)) == (100.0, round(1 - 81 / 101, 4))
    # Tomcat: a fixed delay, so every step is a little longer than the period.
    drifting = [502 * n for n in range(50)]
    assert estimate(beats(drifting, 0.5)) == (502.0, 0.0)
    assert estimate(beats(drifting[:10] + drifting[20:], 0.5)) == (502.0, 0.2)
    # Listed by Tomcat (--tomcat): below zero, wrapping round every two periods.
    capped = [-1 - (100 * n + 1) % 201 for n in range(40)]
    assert estimate(beats(capped, 0.1)) == (100.0, 0.0)
    # One datagram heard twice (two cards) is one beat; one heartbeat is no measure.
    assert estimate([(0.0, 5), (0.0, 5), (0.1, 105), (0.2, 205)]) == (100.0, 0.0)
    assert estimate([(0.0, 5)]) == (None, None)


def test_on_loopback_the_local_checks_and_the_loop_pass(group_port, capsys):
    code, report = doctor(capsys, *loopback(group_port, "--wait", "0.2"))
    assert code == 0
    assert set(report) == {"ok", "checks", "members", "pairs"}
    assert report["ok"] is True and report["members"] == [] and report["pairs"] == []
    assert [c["name"] for c in report["checks"]] == CHECKS
    for check in report["checks"]:
        assert set(check) == {"name", "status", "detail", "fix"}
        assert isinstance(check["detail"], str) and check["detail"]
        assert (check["fix"] is None) == (check["status"] == "pass")
    assert [c["status"] for c in report["checks"]] == ["pass"] * 7 + ["warn"] + ["pass"] * 4
    checks = by_name(report)
    assert checks["interface"]["detail"] == ("lo is up, loopback, with 127.0.0.1 (127.0.0.1 was "
                                             "given)")
    assert checks["route"]["detail"] == "lo (loopback): this host only"
    assert checks["group"]["detail"] == "228.0.0.4, TTL 0, on loopback: this host only"
    assert checks["port"]["detail"] == f"UDP port {group_port} is free"
    assert checks["loop"]["detail"] == (f"3 of 3 probes to 228.0.0.4:{group_port} came back: "
                                        f"this host sends and hears the group")
    assert checks["joined"]["detail"] == "the kernel lists 228.0.0.4 as joined on lo"
    assert checks["heard"] == {
        "name": "heard", "status": "warn",
        "detail": f"nobody heard on 228.0.0.4:{group_port} in 0.2 s",
        "fix": f"start a member on this host while the doctor listens: mcast-demo join "
               f"228.0.0.4 --port {group_port} --interface 127.0.0.1 --ttl 0; loopback reaches "
               f"no other host (to hear members elsewhere, give --interface their card)"}
    # The fix: a member started, the doctor hears it.
    with member(group_port):
        code, report = doctor(capsys, *loopback(group_port, "--wait", "0.3"))
    assert code == 0 and by_name(report)["heard"] == {
        "name": "heard", "status": "pass",
        "detail": f"1 member heard on 228.0.0.4:{group_port} in 0.3 s", "fix": None}


def test_text_output_is_one_line_per_check_and_a_verdict(group_port, capsys):
    assert main(["doctor", *loopback(group_port, "--wait", "0", "--interface", "lo")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:2] for line in lines[:-1]] == [
        ["PASS", name] if name != "heard" else ["WARN", name] for name in CHECKS]
    assert lines[6] == (f"PASS joined     the kernel lists 228.0.0.4 as joined on lo")
    assert lines[7].endswith(f"  fix: start a member on this host while the doctor listens: "
                             f"mcast-demo join 228.0.0.4 --port {group_port} --interface lo "
                             f"--ttl 0; loopback reaches no other host (to hear members "
                             f"elsewhere, give --interface their card)")
    assert lines[-1] == "ok: 11 passed, 1 warned, 0 failed"


def test_a_card_that_does_not_exist_is_a_failing_check_and_nothing_is_sent(group_port, capsys):
    usable = ", ".join(c.name for c in list_interfaces() if c.up and (c.multicast or c.loopback)
                       and any(a.version == 4 for a in c.addresses))
    code, report = doctor(capsys, GROUP, "--port", str(group_port), "--interface", "nosuch0")
    assert code == 1 and report["ok"] is False
    [check] = report["checks"]
    assert check["name"] == "interface" and check["status"] == "fail"
    assert check["detail"].startswith("no network interface 'nosuch0' on this host (this host "
                                      "has: ")
    assert check["fix"] == f"give --interface one of this host's cards with IPv4: {usable}"
    # The fix: a card that exists.
    code, report = doctor(capsys, *loopback(group_port, "--wait", "0"))
    assert code == 0 and by_name(report)["interface"]["status"] == "pass"


def test_a_group_that_is_not_multicast_is_a_failing_check(group_port, capsys):
    code, report = doctor(capsys, "10.1.2.3", "--port", str(group_port), "--interface", "lo")
    assert code == 1
    assert report["checks"] == [{
        "name": "group", "status": "fail", "detail": "10.1.2.3 is not a multicast group",
        "fix": "use a group in 224.0.0.0/4, the same on every node, such as Tomcat's default "
               "228.0.0.4"}]
    # The fix: the group it names.
    group = report["checks"][0]["fix"].rpartition(" ")[2]
    code, report = doctor(capsys, group, *loopback(group_port, "--wait", "0")[1:])
    assert code == 0 and by_name(report)["group"]["status"] == "pass"


def test_an_ipv6_group_on_loopback_fails_the_route_check(group_port, capsys):
    cards = ", ".join(c.name for c in list_interfaces() if c.up and c.multicast and not
                      c.loopback and any(a.version == 6 for a in c.addresses))
    code, report = doctor(capsys, "ff05::4", "--port", str(group_port), "--interface", "lo")
    assert code == 1
    assert [c["name"] for c in report["checks"]] == ["interface", "route"]
    assert by_name(report)["route"] == {
        "name": "route", "status": "fail",
        "detail": "the kernel cannot send ff05::4 on lo: Network is unreachable (Linux carries "
                  "no IPv6 multicast on loopback)",
        "fix": f"name a card that carries IPv6 multicast with --interface "
               f"({cards or 'this host has none'}); on loopback, test with an IPv4 group "
               f"such as 228.0.0.4"}
    # The fix on loopback: the IPv4 group it names.
    group = by_name(report)["route"]["fix"].rpartition(" ")[2]
    code, report = doctor(capsys, group, *loopback(group_port, "--wait", "0")[1:])
    assert code == 0 and by_name(report)["route"]["status"] == "pass"


@pytest.mark.parametrize("args, message", [
    (["not-an-address"], "'not-an-address' is not an IPv4 or IPv6 address"),
    ([GROUP, "--wait", "-1"], "--wait must be a positive number of seconds"),
    ([GROUP, "--wait", "inf"], "--wait must be a positive number of seconds"),
    ([GROUP, "--pair"], "--pair probes the peers: name the other hosts with --peers"),
    ([GROUP, "--frequency", "500", "--drop-time", "500"], "--drop-time (500 ms) must be longer"),
    ([GROUP, "--no-multicast", "--peers", "127.0.0.2"], "leave out the group"),
    (["--no-multicast", "--peers", "127.0.0.2"], "set --interface (or --host)"),
])
def test_settings_join_would_refuse_are_usage_errors(capsys, args, message):
    code = main(["doctor", *args, "--json"])
    out = capsys.readouterr()
    assert code == 2 and out.out == ""
    assert out.err.startswith("mcast-demo doctor: error: ") and message in out.err
    assert len(out.err.splitlines()) == 1


def test_a_port_held_without_reuse_fails_and_another_port_passes(group_port, capsys):
    with open("/proc/self/comm") as f:
        me = f"{f.read().strip()} (pid {os.getpid()})"
    holder = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with holder:
        holder.bind(("0.0.0.0", group_port))
        code, report = doctor(capsys, *loopback(group_port))
        assert code == 1
        assert [c["name"] for c in report["checks"]] == CHECKS[:5]     # nothing sent
        assert by_name(report)["port"] == {
            "name": "port", "status": "fail",
            "detail": f"UDP port {group_port} is held by {me} on 0.0.0.0: a member cannot bind "
                      f"it",
            "fix": f"stop {me} (unless it is this host's member; then stop it while the doctor "
                   f"runs), or use another --port on every node"}
        # The fix: another port.
        code, report = doctor(capsys, *loopback(group_port + 1, "--wait", "0"))
        assert code == 0 and by_name(report)["port"]["status"] == "pass"


def test_a_member_in_another_domain_is_named_with_ours(group_port, capsys, caplog):
    shop = member(group_port, domain="shop")
    events = Events()
    shop.add_listener(events)
    with caplog.at_level(logging.DEBUG, logger="mcastmember"), shop:
        code, report = doctor(capsys, *loopback(group_port, "--wait", "0.6"))
        assert code == 0
        [seen] = report["members"]
        assert set(seen) == MEMBER_FIELDS
        assert (seen["host"], seen["port"], seen["unique_id"], seen["domain"],
                seen["domain_hex"], seen["source"]) == (
            "127.0.0.1", 4000, shop.local_member.unique_id.hex(), "shop", b"shop".hex(),
            "127.0.0.1")
        assert 95 <= seen["period_ms"] <= 105 and seen["loss"] == 0.0 and seen["heard"] >= 5
        assert by_name(report)["domain"] == {
            "name": "domain", "status": "warn",
            "detail": "1 member in another domain: 127.0.0.1:4000 in 'shop'; this host is in "
                      "'' (empty)",
            "fix": "use one domain on every node: --domain shop here, or '' (empty) there"}
        # The fix, applied here: the member passes.
        domain = fix_flag(by_name(report)["domain"]["fix"], "--domain")
        code, report = doctor(capsys, *loopback(group_port, "--wait", "0.3", "--domain", domain))
        assert by_name(report)["domain"] == {
            "name": "domain", "status": "pass",
            "detail": "every member is in this host's domain 'shop'", "fix": None}
        stats = shop.stats()
    # Two runs of loop probes reached the member: counted, dropped, no event, no word.
    assert stats["doctor_probes"] == 6
    assert not [k for k, v in stats.items() if k.startswith("malformed.") and v] and stats["members"] == 0
    assert [e.kind for e in events.events] == []
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_drop_time_under_three_periods_of_a_member_warns_with_the_one_to_use(group_port,
                                                                                 capsys):
    with member(group_port, frequency=200, drop_time=2000):
        args = loopback(group_port, "--wait", "0.7", "--frequency", "100")
        code, report = doctor(capsys, *args, "--drop-time", "400")
        assert code == 0
        [seen] = report["members"]
        assert by_name(report)["drop_time"] == {
            "name": "drop_time", "status": "warn",
            "detail": f"drop time 400 ms is under 3 periods of 127.0.0.1:4000 "
                      f"({seen['period_ms']:.0f} ms): members will be dropped and added again",
            "fix": "--drop-time 1200 on every node (6 periods)"}
        code, report = doctor(capsys, *args, "--drop-time", "150")
        check = by_name(report)["drop_time"]
        assert check["detail"].startswith("drop time 150 ms is under one period of "
                                          "127.0.0.1:4000")
        # The fix: the drop time it names.
        code, report = doctor(capsys, *args, "--drop-time", fix_flag(check["fix"], "--drop-time"))
        assert by_name(report)["drop_time"]["status"] == "pass"
    # Nobody heard: our own frequency is the measure.
    args = loopback(group_port, "--wait", "0", "--frequency", "500")
    code, report = doctor(capsys, *args, "--drop-time", "1000")
    check = by_name(report)["drop_time"]
    assert check == {
        "name": "drop_time", "status": "warn",
        "detail": "drop time 1000 ms is under 3 periods of this host's own --frequency 500",
        "fix": "--drop-time 3000 on every node (6 periods)"}
    code, report = doctor(capsys, *args, "--drop-time", fix_flag(check["fix"], "--drop-time"))
    assert by_name(report)["drop_time"]["status"] == "pass"


def test_members_sharing_an_address_are_an_identity_warning(group_port, capsys):
    with member(group_port), member(group_port):
        code, report = doctor(capsys, *loopback(group_port, "--wait", "0.4"))
    assert code == 0 and len(report["members"]) == 2
    assert by_name(report)["identity"] == {
        "name": "identity", "status": "warn", "detail": "2 members advertise 127.0.0.1:4000",
        "fix": "give each node on a host its own --member-port (Tomcat: the Receiver's port)"}
    # The fix: the second node on a port of its own.
    with member(group_port), member(group_port, member_port=4001):
        code, report = doctor(capsys, *loopback(group_port, "--wait", "0.4"))
    assert len(report["members"]) == 2 and by_name(report)["identity"]["status"] == "pass"


@contextlib.contextmanager
def beating(group_port, sources, uid=bytes(range(16)), host="127.0.0.2", period_s=0.05,
            unicast_to=None):
    """Heartbeats of one member (``uid``, advertising ``host``:4001) sent to the
    group from each address of ``sources`` (on loopback) while the block runs;
    with ``unicast_to``, each also to that address, its alive time a
    millisecond later (as a member's second copy often is)."""
    senders = []
    for source in sources:
        sender = loopback_sender()
        sender.bind((source, 0))
        senders.append(sender)
    stop = threading.Event()

    def beat():
        alive = 1
        while not stop.wait(period_s):
            for sender in senders:
                sender.sendto(heartbeat(uid=uid, alive=alive, host=socket.inet_aton(host)),
                              (GROUP, group_port))
                if unicast_to:
                    sender.sendto(heartbeat(uid=uid, alive=alive + 1,
                                            host=socket.inet_aton(host)),
                                  (unicast_to, group_port))
            alive += round(period_s * 1000)

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        for sender in senders:
            sender.close()


def test_one_unique_id_from_two_addresses_is_an_identity_warning(group_port, capsys):
    with beating(group_port, ["127.0.0.2", "127.0.0.3"]):
        code, report = doctor(capsys, *loopback(group_port, "--wait", "0.3"))
    assert code == 0
    assert sorted((m["host"], m["port"], m["source"]) for m in report["members"]) == [
        ("127.0.0.2", 4001, "127.0.0.2"), ("127.0.0.2", 4001, "127.0.0.3")]
    assert by_name(report)["identity"] == {
        "name": "identity", "status": "warn",
        "detail": "unique id 000102030405 comes from 127.0.0.2, 127.0.0.3",
        "fix": "that node sends on two cards or its traffic is mirrored: give it one "
               "--interface, the card of 127.0.0.2 (the address it advertises)"}
    # The fix: the node sends on one card only.
    with beating(group_port, ["127.0.0.2"]):
        code, report = doctor(capsys, *loopback(group_port, "--wait", "0.3"))
    assert by_name(report)["identity"]["status"] == "pass" and len(report["members"]) == 1


def test_a_member_heard_by_multicast_and_by_unicast_is_measured_once(group_port, capsys):
    # Each beat twice, the unicast copy stamped a millisecond later: still one
    # beat (not two 1 ms apart), so no period of a millisecond and no loss.
    with beating(group_port, ["127.0.0.2"], unicast_to="127.0.0.1"):
        code, report = doctor(capsys, *loopback(group_port, "--wait", "0.5", "--peers",
                                                "127.0.0.2"))
    assert code == 0
    [seen] = report["members"]
    assert 45 <= seen["period_ms"] <= 55 and seen["loss"] == 0.0, seen
    assert by_name(report)["loss"]["status"] == "pass"


def test_a_member_advertising_another_host_than_it_sends_from_warns(group_port, capsys):
    with member(group_port, host="10.9.8.7"):
        code, report = doctor(capsys, *loopback(group_port, "--wait", "0.4"))
    assert code == 0
    [seen] = report["members"]
    assert (seen["host"], seen["source"]) == ("10.9.8.7", "127.0.0.1")
    check = by_name(report)["identity"]
    assert check == {
        "name": "identity", "status": "warn", "detail": "10.9.8.7:4000 sends from 127.0.0.1",
        "fix": "on that node, --interface 127.0.0.1 or --host 127.0.0.1, unless NAT rewrites "
               "its address"}
    # The fix, applied to the member: --host as the fix says.
    with member(group_port, host=fix_flag(check["fix"], "--host")):
        code, report = doctor(capsys, *loopback(group_port, "--wait", "0.4"))
    assert by_name(report)["identity"] == {
        "name": "identity", "status": "pass",
        "detail": "every member has its own address and id, and sends from the host it "
                  "advertises", "fix": None}


def test_tomcat_is_listed_with_its_period_and_ignores_the_probes(classpath, group_port, capsys):
    node = TribesNode(classpath, "plain", GROUP, group_port, 4100, frequency=100,
                      drop_time=1000)
    try:
        # --pair adds ten multicast probes a second to the loop's (the peer is nobody).
        code, report = doctor(capsys, *loopback(group_port, "--wait", "1.5", "--pair",
                                                "--peers", "127.0.0.2"))
        [seen] = report["members"]
        assert (seen["host"], seen["port"], seen["unique_id"]) == (
            "127.0.0.1", 4100, node.unique_id.hex())
        assert 95 <= seen["period_ms"] <= 130 and seen["loss"] == 0.0
        assert by_name(report)["pair"]["status"] == "fail"
        assert node.members() == []
        assert node.events == []
        # Its receiver is none the worse: a member that joins now is listed.
        with member(group_port, member_port=4001):
            node.wait_event("ADDED", 4001, timeout=5)
            assert [m.port for m in node.members()] == [4001]
    finally:
        node.stop()
    logged = "".join(node.stderr)
    assert "SEVERE" not in logged and "WARNING" not in logged and "Exception" not in logged, \
        logged


def test_help_shows_an_example(capsys):
    with pytest.raises(SystemExit) as done:
        main(["doctor", "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "$ mcast-demo doctor 228.0.0.4 --interface eth0 --domain shop --drop-time 2500" in out
    assert "--pair --peers 10.0.0.6,10.0.0.7" in out and "--wait SECONDS" in out


def test_the_drop_time_counts_the_periods_it_covers(group_port, capsys):
    # Nobody heard: this host's own period is the measure; 3000 ms is 6 of 500 ms.
    code, report = doctor(capsys, *loopback(group_port, "--wait", "0"))
    assert by_name(report)["drop_time"] == {
        "name": "drop_time", "status": "pass",
        "detail": "drop time 3000 ms covers 6 periods of --frequency 500 (nobody heard)",
        "fix": None}
    # A member heard every 100 ms (measured within a few ms: periods are round numbers).
    with member(group_port):
        code, report = doctor(capsys, *loopback(group_port, "--wait", "0.5", "--frequency",
                                                "100", "--drop-time", "1000"))
    [seen] = report["members"]
    assert 95 <= seen["period_ms"] <= 105
    assert by_name(report)["drop_time"] == {
        "name": "drop_time", "status": "pass",
        "detail": "drop time 1000 ms covers 10 periods of 127.0.0.1:4000 (100 ms), the "
                  "slowest member heard", "fix": None}


def test_a_unicast_doctor_on_loopback_says_how_to_start_a_member_here(group_port, capsys):
    code, report = doctor(capsys, "--no-multicast", "--port", str(group_port), "--interface",
                          "127.0.0.1", "--peers", "127.0.0.2", "--wait", "0")
    assert by_name(report)["heard"] == {
        "name": "heard", "status": "warn",
        "detail": f"nobody heard on peers 127.0.0.2 on port {group_port} in 0 s",
        "fix": f"start a member on this host while the doctor listens: mcast-demo join "
               f"--no-multicast --port {group_port} --interface 127.0.0.2 --peers 127.0.0.1; "
               f"loopback reaches no other host (to hear members elsewhere, give --interface "
               f"their card)"}


class Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("env, coloured", [({}, True), ({"NO_COLOR": "1"}, False),
                                           ({"TERM": "dumb"}, False)])
def test_on_a_terminal_the_verdicts_are_coloured_as_the_live_view_colours(
        group_port, capsys, monkeypatch, env, coloured):
    args = ["doctor", *loopback(group_port, "--wait", "0")]
    assert main(args) == 0
    plain = capsys.readouterr().out.splitlines()
    for name in ("NO_COLOR", "TERM"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(sys, "stdout", Terminal())
    assert main(args) == 0
    lines = sys.stdout.getvalue().splitlines()
    if not coloured:
        assert lines == plain
        return
    assert lines[0] == ("\x1b[32mPASS\x1b[0m interface  lo is up, loopback, with 127.0.0.1 "
                        "(127.0.0.1 was given)")
    assert lines[7] == "\x1b[33mWARN\x1b[0m" + plain[7][4:]
    assert lines[-1] == "\x1b[32mok\x1b[0m: 11 passed, 1 warned, 0 failed"
    assert [re.sub(r"\x1b\[\d+m", "", line) for line in lines] == plain
    monkeypatch.setattr(sys, "stdout", Terminal())
    assert main(["doctor", "10.1.2.3", "--port", str(group_port), "--interface", "lo"]) == 1
    assert sys.stdout.getvalue().splitlines() == [
        "\x1b[31mFAIL\x1b[0m group      10.1.2.3 is not a multicast group  fix: use a group in "
        "224.0.0.0/4, the same on every node, such as Tomcat's default 228.0.0.4",
        "\x1b[31mFAILED\x1b[0m: 0 passed, 0 warned, 1 failed"]
