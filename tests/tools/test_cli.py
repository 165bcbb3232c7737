"""mcast-demo as scripts use it: two processes on loopback, decode, bad input."""

import json
import shutil
import signal
import subprocess
import sys
import time

import pytest

from mcastmember.tools.cli import main

from support import GROUP, V1, V3, NoLineInTime, next_datagram, next_line, rest_of_stdout

DEMO = [shutil.which("mcast-demo")] if shutil.which("mcast-demo") else \
    [sys.executable, "-m", "mcastmember"]


def run(args, tmp_path, **kw):
    return subprocess.run(DEMO + args, capture_output=True, text=True, cwd=tmp_path,
                          timeout=30, **kw)


def start_join(group_port, member_port, tmp_path, *extra):
    return subprocess.Popen(
        DEMO + ["join", GROUP, "--port", str(group_port), "--interface", "127.0.0.1",
                "--ttl", "0", "--member-port", str(member_port), "--json", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)


def read_event(proc, timeout=15.0):
    """The next JSON line from a demo's stdout (the test fails on anything else).
    The bound is generous: a loaded machine starts Python processes slowly."""
    line = next_line(proc, timeout)
    return json.loads(line), time.monotonic()


def test_read_event_returns_lines_that_reached_the_pipe_together():
    """Two events written at once reach the reader in one read: the second
    must come from what was read, not from a wait on the emptied pipe (a
    buffered readline took both and hid the second from select, so a test
    waited 15 s for an event it had; seen on a loaded machine)."""
    writer = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; sys.stdout.write('{\"n\": 1}\\n{\"n\": 2}\\n'); "
         "sys.stdout.flush(); time.sleep(30)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert [read_event(writer, timeout=10)[0] for _ in range(2)] == [{"n": 1}, {"n": 2}]
    finally:
        writer.kill()
        writer.wait()
        writer.stdout.close()


@pytest.mark.network
def test_two_demo_processes_see_each_other_join_and_leave(group_port, tmp_path):
    a = start_join(group_port, 4001, tmp_path, "--payload", "hé", "--domain", "{1,-1}")
    b = None
    try:
        next_datagram(group_port)   # a is up and heartbeating
        b = start_join(group_port, 4002, tmp_path, "--frequency", "500")
        b_started = time.monotonic()
        event, seen_at = read_event(b)
        assert event["event"] == "added" and event["reason"] is None
        assert seen_at - b_started < 0.5 + 1.0   # one frequency, plus interpreter start-up
        member = event["member"]
        assert (member["host"], member["port"]) == ("127.0.0.1", 4001)
        assert member["payload_hex"] == "hé".encode().hex()
        assert member["domain_hex"] == "01ff"
        assert len(member["unique_id"]) == 32
        assert set(member) == {"host", "port", "unique_id", "domain_hex", "payload_hex",
                               "alive_ms", "authenticated"}
        assert member["authenticated"] is None      # no keys: not judged
        event, _ = read_event(a)
        assert (event["event"], event["member"]["port"]) == ("added", 4002)
        a.send_signal(signal.SIGTERM)
        assert a.wait(5) == 0
        a_gone = time.monotonic()
        event, seen_at = read_event(b)
        assert (event["event"], event["reason"], event["member"]["port"]) == \
            ("removed", "shutdown", 4001)
        assert seen_at - a_gone < 0.5
        b.send_signal(signal.SIGINT)
        assert b.wait(5) == 0
        assert rest_of_stdout(b) == ""   # nothing but events on stdout
    finally:
        for proc in (a, b):
            if proc and proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.mark.network
def test_duration_leaves_by_itself(group_port, tmp_path):
    result = run(["join", GROUP, "--port", str(group_port), "--interface", "127.0.0.1",
                  "--ttl", "0", "--duration", "0.3", "--json"], tmp_path)
    assert result.returncode == 0
    assert result.stdout == ""


@pytest.mark.network
def test_verify_timeout_is_how_long_a_silent_port_is_probed(group_port, tmp_path):
    # A member heard once whose port never answers (a full backlog: SYNs go
    # unanswered) is removed no sooner than drop time + --verify-timeout
    # after it was heard (300 ms by default would remove it at 0.7 s).
    from support import free_tcp_port, heartbeat, loopback_sender, silent_port, wait_until

    with silent_port() as (_, port):
        watcher = start_join(group_port, free_tcp_port(), tmp_path, "--frequency", "100",
                             "--drop-time", "400", "--verify", "--verify-timeout", "1500")
        try:
            kinds, heard, seen = [], None, None
            with loopback_sender() as sender:
                def heard_once():      # sent until the demo is up to hear it (Python starts slowly)
                    nonlocal heard
                    # read before sending: the demo cannot hear it sooner, where a
                    # reading after the send can come later than the demo's own
                    heard = time.monotonic()
                    sender.sendto(heartbeat(port=port, uid=b"S" * 16), (GROUP, group_port))
                    try:
                        event, _ = read_event(watcher, timeout=0.2)
                    except NoLineInTime:
                        return None
                    kinds.append((event["event"], event["reason"]))
                    return True
                wait_until(heard_once, interval=0, message="the demo to hear a heartbeat")

            def three_events():
                nonlocal seen
                event, seen_at = read_event(watcher)
                if event["member"]["port"] == port:
                    kinds.append((event["event"], event["reason"]))
                    seen = seen_at
                return len(kinds) >= 3
            wait_until(three_events, interval=0, message=lambda: f"three events about the member: {kinds}")
            assert kinds == [("added", None), ("suspect", None), ("removed", "expired")]
            assert seen - heard >= 0.4 + 1.5
        finally:
            watcher.kill()
            watcher.wait()


@pytest.mark.network
def test_human_output_without_json(group_port, tmp_path):
    result = run(["join", GROUP, "--port", str(group_port), "--interface", "127.0.0.1",
                  "--ttl", "0", "--duration", "0.3"], tmp_path)
    assert result.returncode == 0
    assert "joined 228.0.0.4:%d as 127.0.0.1:4000" % group_port in result.stdout
    assert "left the group" in result.stdout


def test_decode_json(tmp_path):
    result = run(["decode", V1.hex(), "--json"], tmp_path)
    assert result.returncode == 0
    assert json.loads(result.stdout) == {
        "host": "127.0.0.1", "port": 4000, "unique_id": bytes(range(16)).hex(),
        "domain_hex": b"dom".hex(), "payload_hex": b"payload".hex(), "alive_ms": 12345,
        "authenticated": None, "secure_port": -1, "udp_port": -1, "command_hex": "", "shutdown": False}


def test_decode_human_names_a_shutdown(tmp_path):
    result = run(["decode", V3.hex()], tmp_path)
    assert result.returncode == 0
    assert "member      127.0.0.1:4000" in result.stdout
    assert "'BABY-ALEX'" in result.stdout and "shutdown packet" in result.stdout


@pytest.mark.parametrize("packet, reason", [
    (V1[:-1].hex(), "truncated"),
    ("5452494245532d420200", "bad_version"),
    ("zz", "not hexadecimal"),
])
def test_decode_malformed_says_why_and_exits_2(tmp_path, packet, reason):
    result = run(["decode", packet], tmp_path)
    assert result.returncode == 2
    assert reason in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.network
def test_two_demos_by_unicast_alone(group_port, tmp_path):
    def start(me, other, member_port):
        return subprocess.Popen(
            DEMO + ["join", "--no-multicast", "--port", str(group_port), "--interface", me,
                    "--peers", f"{me},{other}", "--member-port", str(member_port), "--json",
                    "--frequency", "100", "--drop-time", "400"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    a = start("127.0.0.1", "127.0.0.2", 4001)
    b = start("127.0.0.2", "127.0.0.1", 4002)
    try:
        first, _ = read_event(a)
        assert (first["event"], first["member"]["host"], first["member"]["port"]) == (
            "added", "127.0.0.2", 4002)
        b.send_signal(signal.SIGTERM)
        assert b.wait(10) == 0
        gone, _ = read_event(a)
        assert (gone["event"], gone["reason"], gone["member"]["port"]) == (
            "removed", "shutdown", 4002)
    finally:
        for proc in (a, b):
            proc.kill()
            proc.wait()
            proc.stdout.close()
            proc.stderr.close()


@pytest.mark.parametrize("args, message", [
    (["join", "10.1.2.3"], "not a multicast group"),
    (["join", "228.0.0.4", "--port", "0"], "port 0 is out of range"),
    (["join", "228.0.0.4", "--port", "x"], "invalid int value"),
    (["join", "228.0.0.4", "--interface", "192.0.2.77"], "no network interface"),
    (["join", "228.0.0.4", "--interface", "127.0.0.1", "--duration", "-1"], "--duration"),
    (["join"], "give the multicast GROUP, or --no-multicast with --peers or --dns"),
    (["join", "228.0.0.4", "--interface", "nosuch0"], "no network interface 'nosuch0'"),
    (["join", "228.0.0.4", "--interface", "lo,nosuch0"], "no network interface 'nosuch0'"),
    (["join", "228.0.0.4", "--interface", "::1"], "is IPv6, the group is IPv4"),
    (["join", "ff02::4"], "name the card, e.g. --interface eth0"),
    (["join", "fd00::4", "--interface", "lo"], "not a multicast group"),
    (["join", "228.0.0.4", "--no-multicast", "--peers", "127.0.0.2"], "leave out the group"),
    (["join", "--no-multicast"], "nobody to send to"),
    (["join", "--no-multicast", "--peers", "127.0.0.2"], "set --interface (or --host)"),
    (["join", "--no-multicast", "--interface", "127.0.0.1", "--peers", "127.0.0.2:x"],
     "port 'x' is not 1-65535"),
    (["join", "--no-multicast", "--interface", "127.0.0.1", "--dns-members", "--peers",
      "127.0.0.2"], "--dns-members needs --dns"),
    (["join", "228.0.0.4", "--verify-timeout", "500"], "--verify-timeout needs --verify"),
    (["join", "228.0.0.4", "--verify", "--verify-timeout", "0"],
     "--verify-timeout 0 is out of range (1-60000)"),
    (["frobnicate"], "invalid choice"),
])
def test_bad_arguments_get_one_line_and_exit_2(tmp_path, args, message):
    result = run(args, tmp_path)
    assert result.returncode == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr


CAPTURE = f"""# two heartbeats and a goodbye, as a capture tool printed them

{V1.hex()}
  {V1.hex(':')}   # colons between bytes, a comment after
{V3.hex()}
"""


def test_decode_reads_a_capture_file(tmp_path):
    (tmp_path / "capture.txt").write_text(CAPTURE)
    result = run(["decode", "capture.txt", "--json"], tmp_path)
    assert (result.returncode, result.stderr) == (0, "")
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(f["line"], f["shutdown"]) for f in lines] == [(3, False), (4, False), (5, True)]
    assert lines[0] == dict(json.loads(run(["decode", V1.hex(), "--json"], tmp_path).stdout),
                            line=3)
    human = run(["decode", "capture.txt"], tmp_path)
    assert human.returncode == 0
    assert human.stdout.count("member      127.0.0.1:4000") == 3
    assert human.stdout.startswith("-- capture.txt line 3\nmember      127.0.0.1:4000\n")
    assert "\n\n-- capture.txt line 5\n" in human.stdout


def test_decode_reads_stdin_and_names_each_bad_line(tmp_path):
    capture = f"{V1.hex()}\nnot hex at all\n\n{V1[:-1].hex()}\n{V3.hex()}\n"
    result = run(["decode", "-", "--json"], tmp_path, input=capture)
    assert result.returncode == 2                       # a bad line or more
    assert [json.loads(line)["line"] for line in result.stdout.splitlines()] == [1, 5]
    assert result.stderr.splitlines() == [
        "mcast-demo decode: stdin line 2: not hexadecimal",
        "mcast-demo decode: stdin line 4: malformed membership packet (truncated): "
        "truncated: shorter than its header or body length says"]


@pytest.mark.parametrize("content, message", [
    ("# nothing but a comment\n\n", "mcast-demo decode: error: no packet in capture.txt"),
    (None, "mcast-demo decode: error: 'capture.txt' is not hexadecimal, and not a file we "
           "can read (No such file or directory)"),
])
def test_decode_of_an_empty_or_missing_capture_is_one_line_and_exit_2(tmp_path, content,
                                                                       message):
    if content is not None:
        (tmp_path / "capture.txt").write_text(content)
    result = run(["decode", "capture.txt"], tmp_path)
    assert (result.returncode, result.stderr, result.stdout) == (2, message + "\n", "")


def test_version_names_the_release_and_the_codec(tmp_path):
    import mcastmember

    result = run(["--version"], tmp_path)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == (f"mcast-demo {mcastmember.__version__} "
                             f"({mcastmember.implementation()} codec)\n")


def test_bare_command_prints_the_usage_with_each_command_and_exits_2(tmp_path):
    result = run([], tmp_path)
    assert (result.returncode, result.stdout) == (2, "")
    lines = result.stderr.splitlines()
    assert lines[0] == "usage: mcast-demo [-h] [-V] COMMAND ..."
    start = lines.index("commands:")
    assert lines[start:start + 8] == [
        "commands:",
        "  COMMAND",
        "    join         heartbeat as a member and show the membership",
        "    doctor       check why members don't see each other, and what to change",
        "    watch        show a group's membership without joining it (nothing sent)",
        "    decode       show the fields of packets given in hex",
        "    gossip       be a member of a Serf (memberlist) cluster and show it",
        "    keygen       print a new random key as a key file line"]
    assert lines[-1] == "'mcast-demo COMMAND --help' shows a command's arguments."


LO = ["--interface", "127.0.0.1", "--ttl", "0"]


@pytest.mark.parametrize("args, message", [
    (["join", "--no-multicast", "--ttl", "0", "--peers", "127.0.0.2"],
     "without multicast, set --interface (or --host): the address to bind unicast heartbeats "
     "to and advertise, such as the pod's IP"),
    (["join", "ff02::4", "--ttl", "0"],
     "the IPv6 group ff02::4 exists on one link only: name the card, e.g. --interface eth0"),
    (["join", "--no-multicast", *LO, "--peers", "127.0.0.2", "--dns-interval", "10"],
     "--dns-interval 10 is out of range (at least 100)"),
    (["join", GROUP, *LO, "--verify", "--verify-timeout", "0"],
     "--verify-timeout 0 is out of range (1-60000)"),
    (["join", GROUP, *LO, "--drop-time", "400"],
     "--drop-time (400 ms) must be longer than --frequency (500 ms), or every member would "
     "be dropped between heartbeats"),
    (["join", GROUP, "--interface", "127.0.0.1", "--ttl", "300"],
     "--ttl 300 is out of range (0-255)"),
    (["join", GROUP, *LO, "--frequency", "0"], "--frequency 0 is out of range (at least 1)"),
    (["join", GROUP, *LO, "--member-port", "70000"],
     "--member-port 70000 is out of range (0-65535)"),
    (["join", GROUP, *LO, "--port", "0"], "--port 0 is out of range (1-65535)"),
    (["join", GROUP, *LO, "--max-members", "0"],
     "--max-members 0 is out of range (1-1048576)"),
    (["join", GROUP, *LO, "--phi-threshold", "2"], "--phi-threshold needs --detector phi"),
    (["join", GROUP, *LO, "--detector", "phi", "--phi-threshold", "20"],
     "--phi-threshold must be a number in (0, 16], not 20.0"),
    (["join", "--no-multicast", *LO], "with --no-multicast there is nobody to send to: give "
                                      "--peers or --dns"),
    (["join", "--no-multicast", *LO, "--dns-srv", "--peers", "127.0.0.2"],
     "--dns-srv needs --dns (the SRV name to ask)"),
    (["join", GROUP, *LO, "--dns-members", "--dns", "members.test"],
     "--dns-members takes its members from DNS alone: set --no-multicast and no peers"),
    (["join", "--no-multicast", *LO, "--peers", "127.0.0.2", "--dns-server", "x"],
     "--dns-server: 'x' is not an address"),
    (["join", GROUP, "--ttl", "0", "--interface", ","],
     "no network interface ',' on this host"),
    (["join", GROUP, "--ttl", "0", "--interface", "lo,127.0.0.1"],
     "--interface lists a card twice: lo, lo"),
    (["join", GROUP, *LO, "--host", "1.2.3"], "--host '1.2.3' is not an IPv4 or IPv6 address"),
    (["join", GROUP, *LO, "--domain", "{1,x}"], "--domain '{1,x}': 'x' is not a number"),
    (["watch", GROUP, "--interface", "127.0.0.1", "--drop-time", "0"],
     "--drop-time 0 is out of range (at least 1)"),
    (["doctor", "--no-multicast", "--peers", "127.0.0.2"],
     "without multicast, set --interface (or --host): the address to bind unicast heartbeats "
     "to and advertise, such as the pod's IP"),
    (["doctor", GROUP, *LO, "--frequency", "500", "--drop-time", "500"],
     "--drop-time (500 ms) must be longer than --frequency (500 ms), or every member would "
     "be dropped between heartbeats"),
])
def test_errors_name_the_flags_typed(capsys, args, message):
    assert main(args) == 2
    out = capsys.readouterr()
    assert out.out == ""
    [line] = out.err.splitlines()
    assert line.startswith(f"mcast-demo {args[0]}: error: {message}"), line


@pytest.mark.network
def test_a_closed_pipe_ends_the_demo_before_the_next_event(group_port, tmp_path):
    # As `mcast-demo join ... | head -2`: the reader goes, then nothing happens
    # on the group. The demo must see that its reader left, not wait for an event.
    from mcastmember import McastService
    from support import LOOPBACK

    demo = subprocess.Popen(
        DEMO + ["join", GROUP, "--port", str(group_port), *LO, "--member-port", "4001",
                "--no-tcp-listener"],          # stderr stays empty even if 4001 is taken
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        with McastService(GROUP, group_port, member_port=4002, **LOOPBACK):
            assert f" joined {GROUP}:{group_port} as " in demo.stdout.readline()
            assert " added: 127.0.0.1:4002 " in demo.stdout.readline()
            demo.stdout.close()                          # head -2 has its lines, and goes
            assert demo.wait(timeout=20) == 0            # the member is still there: no event
        assert demo.stderr.read() == ""                  # no BrokenPipeError, no traceback
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
        demo.stderr.close()


@pytest.mark.network
def test_the_line_view_says_it_is_we_who_stopped(group_port, tmp_path):
    from mcastmember import McastService

    from support import LOOPBACK

    demo = subprocess.Popen(
        DEMO + ["join", GROUP, "--port", str(group_port), *LO, "--member-port", "4002",
                "--no-tcp-listener"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    peer = McastService(GROUP, group_port, member_port=4001, frequency=100, drop_time=400,
                        tcp_listener=False, **LOOPBACK)
    try:
        peer.start()
        for line in demo.stdout:
            if " added: 127.0.0.1:4001 " in line:
                break
        demo.send_signal(signal.SIGTERM)
        assert demo.wait(10) == 0
        rest = [line[len("HH:MM:SS "):] for line in demo.stdout.read().splitlines()]
        uid = peer.local_member.unique_id.hex()
        assert (f"removed (we stopped): 127.0.0.1:4001 id={uid} domain=(empty) "
                f"payload=(empty)") in rest
        assert rest[-1] == "left the group (shutdown packet sent)"
    finally:
        peer.stop()
        if demo.poll() is None:
            demo.kill()
            demo.wait()
        demo.stdout.close()
        demo.stderr.close()


@pytest.mark.parametrize("args, lines", [
    (["doctor", GROUP, *LO, "--frequncy", "100"],
     ["mcast-demo doctor: error: unrecognized argument --frequncy: did you mean --frequency?",
      "usage: mcast-demo doctor [group] [options] (see mcast-demo doctor --help)"]),
    (["join", GROUP, *LO, "--payload=x", "--drop_time=900"],
     ["mcast-demo join: error: unrecognized argument --drop_time=900: did you mean "
      "--drop-time?",
      "usage: mcast-demo join [group] [options] (see mcast-demo join --help)"]),
    (["watch", GROUP, "--interface", "127.0.0.1", "--tomcat"],
     ["mcast-demo watch: error: unrecognized argument --tomcat",
      "usage: mcast-demo watch group [options] (see mcast-demo watch --help)"]),
    (["decode", "00", "extra"],
     ["mcast-demo decode: error: unrecognized argument extra",
      "usage: mcast-demo decode HEX|FILE|- [options] (see mcast-demo decode --help)"]),
])
def test_an_unknown_flag_names_the_command_the_likely_flag_and_its_usage(capsys, args, lines):
    assert main(args) == 2
    out = capsys.readouterr()
    assert (out.out, out.err.splitlines()) == ("", lines)


def test_dash_capital_v_is_the_version(capsys):
    import mcastmember

    with pytest.raises(SystemExit) as exited:
        main(["-V"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == (f"mcast-demo {mcastmember.__version__} "
                                       f"({mcastmember.implementation()} codec)\n")


@pytest.mark.parametrize("command", ["join", "doctor", "watch"])
def test_help_names_doc_pages_as_files_of_the_source(capsys, command):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "see docs/" not in text
    assert "see the docs: docs/security.md in the source" in text
