"""The live view in a real terminal: mcast-demo in tmux
(a server of the test's own), its screen read with capture-pane and every
byte it wrote recorded with pipe-pane. Loopback only, TTL 0; skipped
without tmux."""

import os
import re
import shutil
import subprocess
import sys
import threading
import time

import pytest

from mcastmember import McastService

from support import GROUP, LOCALHOST, LOOPBACK, heartbeat, loopback_sender, wait_until

TMUX = shutil.which("tmux")
pytestmark = [pytest.mark.network,
              pytest.mark.skipif(TMUX is None, reason="tmux not installed (Debian: tmux)")]

DEMO = shutil.which("mcast-demo") or f"{sys.executable} -m mcastmember"
BEGIN, CLEAR = "\x1b[?2026h", "\x1b[2J"
IPV6_HOST = bytes(15) + b"\x01"          # a member that advertises ::1


class Terminal:
    """One tmux session of ``width`` x ``height`` running ``command``, on a
    tmux server of the test's own (its socket in the test's directory)."""

    def __init__(self, tmp_path, name, command, width=100, height=24):
        self.sock, self.name = str(tmp_path / "tmux.sock"), name
        self.log = tmp_path / f"{name}.raw"
        self.log.write_bytes(b"")
        self.status = tmp_path / f"{name}.status"
        # The command waits for a line on its terminal: it starts only once
        # pipe-pane records, so the log has every byte it writes. The shell
        # outlives a ^C (a trap is not inherited: the command gets it).
        self.tmux("new-session", "-d", "-s", name, "-x", str(width), "-y", str(height),
                  f"trap true INT; read go; {command}; echo $? > '{self.status}'")
        self.tmux("set-option", "-t", name, "remain-on-exit", "on")
        self.tmux("pipe-pane", "-t", name, "-o", f"cat >> '{self.log}'")
        self.tmux("send-keys", "-t", name, "Enter")

    def tmux(self, *args):
        # No tmux.conf of the user's; a POSIX shell runs the command; a UTF-8
        # terminal (the table cuts a long cell with an ellipsis).
        env = dict(os.environ, SHELL="/bin/sh", LC_ALL="C.UTF-8")
        return subprocess.run([TMUX, "-S", self.sock, "-f", os.devnull, *args],
                              capture_output=True, text=True, check=True, timeout=10,
                              env=env).stdout

    def screen(self, escapes=False):
        """The lines on the screen, trailing blanks and empty lines removed."""
        text = self.tmux("capture-pane", "-p", *(["-e"] if escapes else []), "-t", self.name)
        return [line.rstrip() for line in text.rstrip("\n").split("\n")]

    def wait_for(self, predicate, timeout=5.0):
        """The screen's lines once ``predicate(lines)`` holds for them; the
        colour each starts in is in ``self.colour`` (text: SGR colour or None)."""
        def shown():
            screen = self.screen(escapes=True)
            lines = [plain(line).rstrip() for line in screen]
            if predicate(lines):
                self.colour = dict(zip(lines, colours(screen)))
                return lines
            return None
        return wait_until(shown, timeout, interval=0.05, message=lambda: "\n".join(self.screen()))

    def raw(self):
        return self.log.read_bytes().decode("utf-8", "replace")

    def exit_status(self):
        """The command's exit status, once it has exited (written by the shell
        that ran it: tmux 3.3 may leave it unreaped, its status unknown)."""
        wait_until(lambda: self.status.exists() and self.status.read_text().endswith("\n"))
        return int(self.status.read_text())

    def last_line(self):
        """The command's last line (not tmux's note that the pane is dead)."""
        return [line for line in self.screen()
                if line and not line.startswith("Pane is dead")][-1]

    def close(self):
        subprocess.run([TMUX, "-S", self.sock, "kill-server"], capture_output=True, timeout=10)


def plain(line):
    return re.sub(r"\x1b\[[0-9;]*m", "", line)


class FakeMember:
    """A stranger heartbeating from a raw socket until stopped: one that
    advertises an IPv6 host (::1), over IPv4 loopback."""

    def __init__(self, group_port, port, host=IPV6_HOST, uid=77):
        self._packet = heartbeat(port=port, uid=uid.to_bytes(16, "big"), host=host)
        self._port, self._stop = group_port, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        with loopback_sender() as sender:
            while not self._stop.is_set():
                sender.sendto(self._packet, (GROUP, self._port))
                self._stop.wait(0.1)

    def stop(self):
        self._stop.set()
        self._thread.join()


@pytest.fixture
def terminals(tmp_path):
    made = []

    def make(*args, **kw):
        made.append(Terminal(tmp_path, *args, **kw))
        return made[-1]
    yield make
    for terminal in made:
        terminal.close()


def colours(lines):
    """The foreground colour (SGR 30-37) each line starts in, or None: tmux's
    capture-pane -e writes a colour where it changes, so it carries on."""
    fg, out = None, []
    for line in lines:
        first = None
        for part in re.split(r"(\x1b\[[0-9;]*m)", line):
            if part.startswith("\x1b["):
                for code in part[2:-1].split(";"):
                    if code in ("", "0", "39"):
                        fg = None
                    elif len(code) == 2 and code[0] == "3":
                        fg = code
            elif part and first is None:
                first = fg
        out.append(first)
    return out


def rows(lines):
    """The table's rows: the lines between its header and the blank line after it."""
    starts = [i for i, line in enumerate(lines) if line.startswith("host:port")]
    if not starts or "" not in lines[starts[0]:]:
        return []        # not drawn yet
    return lines[starts[0] + 1:lines.index("", starts[0])]


def changes(lines):
    return lines[lines.index("recent changes:") + 1:] if "recent changes:" in lines else []


def test_the_table_updates_in_place_fits_the_terminal_and_colours_changes(
        terminals, group_port):
    payload = "a payload far too long for the last column of a terminal " * 2
    # Without the TCP listener: its alive time is its uptime (with it, a
    # negative one Tomcat sorts last, shown as "-").
    member = McastService(GROUP, group_port, member_port=4001, payload=payload, **LOOPBACK,
                          frequency=100, drop_time=400, tcp_listener=False)
    stranger = FakeMember(group_port, 5000)
    term = terminals("join", f"{DEMO} join {GROUP} --port {group_port} --interface 127.0.0.1 "
                             f"--ttl 0 --member-port 4000 --frequency 100 --drop-time 1000")
    try:
        member.start()
        lines = term.wait_for(lambda lines: len(rows(lines)) == 2
                              and len(changes(lines)) == 2 and "ago" in rows(lines)[1])
        assert lines[0].startswith(f"mcast-demo  {GROUP}:{group_port}  me 127.0.0.1:4000 id ")
        assert lines[1].startswith("2 member(s)  received ")
        header = next(line for line in lines if line.startswith("host:port"))
        assert re.fullmatch(r"host:port\s+last heard\s+uptime\s+unique id\s+domain / payload",
                            header), header
        first, second = rows(lines)               # by address: IPv4 first, IPv6 bracketed
        assert first.startswith("127.0.0.1:4001 ") and second.startswith("[::1]:5000 ")
        assert member.local_member.unique_id.hex()[:12] in first
        assert re.search(r" \d+\.\ds ago +\d+\.\ds ", first), first     # last heard, uptime
        assert first.endswith("…") and "(empty) / 'a payload far t" in first
        assert max(len(line) for line in lines) == 99     # the width, one column spare
        stranger_id = (77).to_bytes(16, "big").hex()[:12]
        assert sorted(c.split(" ", 1)[1] for c in changes(lines)) == [
            f"added 127.0.0.1:4001 id {member.local_member.unique_id.hex()[:12]}",
            f"added [::1]:5000 id {stranger_id}"]
        colour = term.colour
        assert [colour[line] for line in changes(lines)] == ["32", "32"]    # added: green
        assert [colour[line] for line in rows(lines)] == ["32", "32"]

        # A burst of changes: a hundred updates in a second, drawn ten times at most.
        before, started = len(term.raw()), time.monotonic()
        for i in range(100):
            member.set_payload(f"update {i}")
            time.sleep(0.01)
        lines = term.wait_for(lambda lines: "'update 99'" in rows(lines)[0])
        frames = term.raw()[before:].count(BEGIN)
        elapsed = time.monotonic() - started
        assert 1 <= frames <= elapsed / 0.1 + 2, (frames, elapsed)
        assert changes(lines)[-1].split(" ", 1)[1].startswith("updated 127.0.0.1:4001")
        assert len(changes(lines)) == 5                   # the last few, not one
        colour = term.colour
        assert colour[rows(lines)[0]] == "33" and colour[changes(lines)[-1]] == "33"  # yellow

        member.stop()
        lines = term.wait_for(lambda lines: len(rows(lines)) == 1)
        assert rows(lines)[0].startswith("[::1]:5000 ")
        assert changes(lines)[-1].split(" ", 1)[1].startswith(
            "removed (shutdown) 127.0.0.1:4001")
        assert term.colour[changes(lines)[-1]] == "31"                              # red

        term.tmux("resize-window", "-t", "join", "-x", "60", "-y", "20")
        lines = term.wait_for(lambda lines: max(len(line) for line in lines) <= 59)
        assert rows(lines)[0].startswith("[::1]:5000 ")
        assert term.raw().count(CLEAR) == 2    # the first frame and the resize: never per refresh
        term.tmux("send-keys", "-t", "join", "C-c")
        assert term.exit_status() == 0
        assert term.last_line().endswith("left the group (shutdown packet sent)")
    finally:
        stranger.stop()
        member.stop()


def test_a_lone_members_header_counts_nothing_received_of_its_own(terminals, group_port):
    # Its heartbeats come back by multicast loopback: sent, not received.
    term = terminals("lone", f"{DEMO} join {GROUP} --port {group_port} --interface 127.0.0.1 "
                             f"--ttl 0 --member-port 4000 --frequency 100")
    lines = term.wait_for(lambda lines: len(lines) > 1 and re.match(
        r"0 member\(s\)  received \d+  sent ([3-9]|\d\d+)  ", lines[1]))
    assert lines[1].startswith("0 member(s)  received 0  sent "), lines[1]


def test_watch_shows_the_same_table_without_colours_under_no_color(terminals, group_port):
    member = McastService(GROUP, group_port, member_port=4001, **LOOPBACK, frequency=100,
                          drop_time=400)
    term = terminals("watch", f"env NO_COLOR=1 {DEMO} watch {GROUP} --port {group_port} "
                              f"--interface 127.0.0.1", height=12)
    strangers = []
    try:
        member.start()
        lines = term.wait_for(lambda lines: len(rows(lines)) == 1 and changes(lines))
        assert lines[0].startswith(f"mcast-demo watch  {GROUP}:{group_port}  "
                                   "listen-only: nothing sent")
        assert re.match(r"1 member\(s\)  received \d+  sent 0  ", lines[1]), lines[1]
        assert rows(lines)[0].startswith("127.0.0.1:4001 ")
        assert "\x1b[" not in "".join(term.screen(escapes=True))    # no colour at all
        assert set(term.colour.values()) == {None}
        # More members than the terminal has room for: the changes shrink to
        # the last one, then rows give way to a count of the rest.
        strangers += [FakeMember(group_port, 5001 + i, LOCALHOST, uid=100 + i) for i in range(8)]
        lines = term.wait_for(lambda lines: lines[1].startswith("9 member(s)"))
        assert len(lines) == 12 and changes(lines)[0].split(" ")[1] == "added"
        assert len(changes(lines)) == 1
        assert [row.split(" ")[0] for row in rows(lines)] == [
            "127.0.0.1:4001", "127.0.0.1:5001", "127.0.0.1:5002", "127.0.0.1:5003",
            "..."]
        assert rows(lines)[-1] == "... and 5 more (a taller terminal shows them)"
        term.tmux("send-keys", "-t", "watch", "C-c")
        assert term.exit_status() == 0
        assert term.last_line().endswith("stopped watching (nothing was sent)")
    finally:
        for stranger in strangers:
            stranger.stop()
        member.stop()

