"""The examples of README.md and docs/*.md do what they say.

- Python: the ```python blocks of a page run in order, as one script (a page
  is read top to bottom), in a fresh interpreter; on such a page the
  ```text blocks are what the script prints. A block that cannot run alone
  (a fragment, a list of alternatives) says so with an HTML comment on the
  line before its fence, ``<!-- not run: why -->``; it must still compile.
- Shell: every ``mcast-demo`` command of a shell block, of a prompt line
  (``$ mcast-demo ...``) or of inline code with arguments is accepted by the
  CLI's parser and its checks of combined flags.
- Output: the JSON a page shows has the keys ``mcast-demo join --json``
  prints.

Network safety: the scripts run with the group port of the test instead of
45564 and 127.0.0.1 instead of the documentation's site-specific address
(10.0.0.5, which the pages say stands for this host's address), and a guard
refuses to start a member that is not on loopback with TTL 0 on that port.
"""

import contextlib
import io
import json
import os
import pathlib
import re
import select
import shlex
import signal
import socket
import subprocess
import sys

import pytest

from mcastmember import McastService

from mcastmember.tools import cli
from mcastmember.tools import gossip_cli
from mcastmember._runtime.errors import ConfigurationError

import support

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\S*)\s*$")
NOT_RUN = re.compile(r"^<!-- not run: .+ -->$")
# Site-specific values of the examples, and what the test uses instead.
SITE = {'"10.0.0.5"': '"127.0.0.1"'}
SHELLS = {"sh", "shell", "bash", "console"}
PROMPT = re.compile(r"^\S*\$ ")

pytestmark = [pytest.mark.network, pytest.mark.docs]


def name(page):
    return str(page.relative_to(ROOT))


def fences(page):
    """(language, body, marked not run) of every fenced block of a page."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].rstrip() == "```")
        before = next((line for line in reversed(lines[:i]) if line.strip()), "")
        blocks.append((opening.group(1), "".join(line + "\n" for line in lines[i + 1:end]),
                       bool(NOT_RUN.match(before.strip()))))
        i = end + 1
    return blocks


def python_pages():
    return [page for page in PAGES if any(lang == "python" for lang, _, _ in fences(page))]


# Run before the page's script: refuses to start a member that could send
# anywhere but this host, or on another group port than the test's.
GUARD = """\
import ipaddress as _ip, os as _os
from mcastmember import McastService as _Threads
from mcastmember.tribes.fronts.aio import AsyncMembership as _Async
from mcastmember.tribes.discovery.peers import parse_peer as _parse_peer

def _loopback_only(front):
    cfg = front.config
    where = [link.address for link in cfg.links]
    where += [_parse_peer(peer, cfg.port)[0] for peer in cfg.peers]
    if not where or cfg.dns is not None or not all(_ip.ip_address(a).is_loopback for a in where):
        raise SystemExit(f"docs test: refused to start a member not on loopback: {where}")
    if cfg.multicast and (cfg.ttl != 0 or cfg.port != int(_os.environ["DOCS_GROUP_PORT"])):
        raise SystemExit(f"docs test: refused: TTL {cfg.ttl}, port {cfg.port}")

for _front in (_Threads, _Async):
    def _start(self, _start=_front.start):
        _loopback_only(self)
        return _start(self)
    _front.start = _start

# A gossip member bound to loopback sends nowhere else.
from mcastmember.gossip.fronts.driver import GossipFront as _Gossip

def _bind(self, _bind=_Gossip._bind):
    if not _ip.ip_address(self.bind_addr).is_loopback:
        raise SystemExit(f"docs test: refused to start a gossip member not on loopback: {self.bind_addr}")
    return _bind(self)
_Gossip._bind = _bind
"""


def free_tcp_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("page", python_pages(), ids=name)
def test_python_examples_run_as_written(page, group_port, tmp_path):
    blocks = fences(page)
    script = ""
    for lang, body, not_run in blocks:
        if lang == "python":
            compile(body, name(page), "exec")        # a fragment must still be Python
            if not not_run:
                script += body
    if not script:
        return                                       # all fragments: compiled is all
    for site, here in SITE.items():
        script = script.replace(site, here)
    script = script.replace("45564", str(group_port)).replace("9464", str(free_tcp_port()))
    script = script.replace("7946", str(support.free_gossip_port()))      # gossip, on 127.0.0.x
    env = dict(os.environ, DOCS_GROUP_PORT=str(group_port), POD_IP="127.0.0.1")
    run = subprocess.run([sys.executable, "-c", GUARD + script], capture_output=True, text=True,
                         cwd=tmp_path, env=env, timeout=60)
    assert run.returncode == 0, f"{name(page)}: its Python examples failed:\n{run.stderr}"
    assert run.stdout == "".join(body for lang, body, _ in blocks if lang == "text")


def commands(page):
    """The argument lists of the page's mcast-demo commands."""
    lines = []
    for lang, body, _ in fences(page):
        for line in body.replace("\\\n", " ").splitlines():
            if PROMPT.match(line):
                lines.append(PROMPT.sub("", line))
            elif lang in SHELLS:
                lines.append(line)
    prose = re.sub(r"^```.*?^```$", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    lines += [span for span in re.findall(r"`(mcast-demo [^`]+)`", prose)
              if len(span.split()) > 2]          # `mcast-demo join` alone names the command
    found = []
    for line in lines:
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        command = []
        for word in [*lexer, ";"]:
            if word and set(word) <= set(";&|<>()"):     # an operator ends a command
                if command[:1] == ["mcast-demo"]:
                    found.append(command[1:])
                command = []
            else:
                command.append(word)
    return found


def problem(argv):
    """Why mcast-demo would refuse ``argv`` before doing anything, or None."""
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            args = cli._build_parser().parse_args(argv)
        if args.command == "gossip" or getattr(args, "gossip", False):
            args.encrypt = args.keyring_file = None      # the docs' keys are placeholders ($KEY)
            gossip_cli.options(args)
        elif args.command in ("join", "watch", "doctor"):
            cli._settings(args)
    except SystemExit:
        return stderr.getvalue().strip()
    except ConfigurationError as error:
        return str(error)
    return None


def test_shell_examples_are_commands_mcast_demo_takes():
    checked = {name(page): commands(page) for page in PAGES}
    problems = [f"{page}: mcast-demo {shlex.join(argv)}: {problem(argv)}"
                for page, found in checked.items() for argv in found if problem(argv)]
    assert problems == []
    # the extraction finds what it is meant to (the README's tour, cli.md's none)
    assert ["join", "228.0.0.4", "--interface", "127.0.0.1", "--ttl", "0"] in checked["README.md"]
    assert ["keygen", "--id", "1"] in checked["docs/security.md"]
    assert len(checked["docs/doctor.md"]) == 5
    assert ["gossip", "--bind", "127.0.0.2", "--join", "127.0.0.1", "--node", "py1"] in checked["README.md"]


def test_a_bad_command_in_the_docs_would_be_caught():
    assert "--ttl" in problem(["join", "228.0.0.4", "--ttl", "x"])
    assert "--verify" in problem(["join", "228.0.0.4", "--verify-timeout", "100"])
    assert problem(["join", "228.0.0.4", "--interface", "127.0.0.1", "--ttl", "0"]) is None


def json_examples():
    """{page: the JSON objects its ```json blocks show}."""
    examples = {}
    for page in PAGES:
        for lang, body, _ in fences(page):
            if lang == "json":
                decoder, text, at = json.JSONDecoder(), body.strip(), 0
                while at < len(text):
                    obj, at = decoder.raw_decode(text, at)
                    examples.setdefault(name(page), []).append(obj)
                    at = len(text) - len(text[at:].lstrip())
    return examples


def join_json_lines(group_port):
    """What ``mcast-demo join --json`` prints when a member joins (on
    loopback): its lines once the first arrived (bounded), after a SIGTERM."""
    with McastService("228.0.0.4", group_port, interface="127.0.0.1", ttl=0, member_port=4002):
        demo = subprocess.Popen(
            ["mcast-demo", "join", "228.0.0.4", "--port", str(group_port), "--interface",
             "127.0.0.1", "--ttl", "0", "--member-port", "4001", "--json", "--duration", "20"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            out = b""

            def first_line():          # or the end of its output
                nonlocal out
                if select.select([demo.stdout], [], [], 0)[0]:
                    chunk = os.read(demo.stdout.fileno(), 65536)
                    if not chunk:
                        return True
                    out += chunk
                return b"\n" in out
            support.wait_until(first_line, timeout=15, interval=0.05, message=lambda: f"a line from mcast-demo: {out!r}")
            demo.send_signal(signal.SIGTERM)
            rest, err = demo.communicate(timeout=15)
        finally:
            if demo.poll() is None:
                demo.kill()
                demo.wait()
    assert demo.returncode == 0, err
    return [json.loads(line) for line in (out + rest).decode().splitlines()]


def test_the_json_example_has_the_keys_join_prints(group_port):
    examples = json_examples()
    assert list(examples) == ["docs/cli.md"]        # the one output example checked here
    printed = join_json_lines(group_port)
    assert printed and printed[0]["event"] == "added"
    joins = [shown for shown in examples["docs/cli.md"] if "unique_id" in shown.get("member", {})]
    assert len(joins) == 1
    for shown in joins:
        actual = next(line for line in printed if line["event"] == shown["event"])
        assert list(shown) == list(actual)
        assert list(shown["member"]) == list(actual["member"])
        for value in (shown["previous"], actual["previous"]):
            assert value is None or list(value) == list(actual["member"])


def test_the_gossip_json_examples_have_the_keys_gossip_prints():
    """cli.md's `mcast-demo gossip --json` lines, against what its view makes of the events."""
    pytest.importorskip("msgpack")
    import dataclasses

    from mcastmember.gossip.serf.layout import MemberStatus
    from mcastmember.gossip.serf.node import GossipMember as Member, SerfMemberEvent, UserEventReceived
    from mcastmember.tools.gossip_view import event_json

    member = Member("go1", "127.0.0.1", 7946, {"role": "go"}, MemberStatus.ALIVE)
    made = {"added": event_json(SerfMemberEvent("joined", member)),
            "removed": event_json(SerfMemberEvent("left", dataclasses.replace(member, status=MemberStatus.LEFT))),
            "user": event_json(UserEventReceived("deploy", b"v42", 1, True))}
    shown = [e for e in json_examples()["docs/cli.md"] if "unique_id" not in e.get("member", {})]
    assert [e["event"] for e in shown] == ["added", "user", "removed"]
    for example in shown:
        actual = made[example["event"]]
        assert list(example) == list(actual)
        assert {k: v for k, v in example.items() if k != "time"} == {k: v for k, v in actual.items() if k != "time"}
