"""A Go memberlist >= 0.3 node with Label="dc1" (tests/interop/memberlist_go,
built from the source MEMBERLIST_SRC names) and our Serf member with label
dc1 on loopback, with and without a key, on both fronts: ours joins it and
it joins ours, and each lists the other alive through several push/pulls
each way (streams whose dialer writes the label header and whose reply
carries none). The Go node is a plain memberlist node: it lists members, it
has no Serf layer of its own."""

import asyncio
import base64
import json
import os
import queue
import re
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

pytest.importorskip("msgpack")

from support import async_wait_until, free_gossip_port, wait_until  # noqa: E402

HERE = Path(__file__).resolve().parent / "memberlist_go"
GOCODE = Path("/usr/share/gocode/src/github.com/hashicorp/memberlist")
LABEL = b"dc1"
KEY = b"0123456789abcdef"
#: short timers on both sides, so that push/pulls and probes come often
OURS = {"label": LABEL, "push_pull_interval": 0.2, "probe_interval": 0.1, "probe_timeout": 0.05,
        "gossip_interval": 0.05}
GO_TIMERS = ["-push-pull", "300", "-probe", "100"]


def _missing():
    """Why the test cannot run here, in one sentence (None: it can)."""
    if shutil.which("go") is None:
        return "Go is not installed (apt-get install golang-go): no memberlist >= 0.3 node to run"
    src = os.environ.get("MEMBERLIST_SRC")
    if not src:
        return ("MEMBERLIST_SRC is not set: point it to memberlist >= 0.3's source (github.com/hashicorp/memberlist "
                "at v0.3.0 or later, a checkout or an export), which neither PyPI nor Debian has")
    if not (Path(src) / "label.go").is_file():
        return f"MEMBERLIST_SRC={src} has no label.go: it is not memberlist >= 0.3's source"
    if not GOCODE.is_dir():
        return ("Debian's Go sources for memberlist's imports are not installed "
                "(apt-get install golang-github-hashicorp-memberlist-dev)")
    return None


pytestmark = pytest.mark.skipif(_missing() is not None, reason=_missing() or "")


@pytest.fixture(scope="module")
def binary(tmp_path_factory):
    out = tmp_path_factory.mktemp("memberlist_go") / "memberlist_go"
    built = subprocess.run([str(HERE / "gen.sh"), "build", str(out)], capture_output=True, text=True, timeout=300)
    missing = sorted(set(re.findall(r'cannot find package "([^"]+)"', built.stderr)))
    if missing:     # later tags import what Debian does not package (v0.5.1 on: go-msgpack/v2, go-metrics)
        pytest.skip(f"memberlist at MEMBERLIST_SRC imports Go packages that neither this Go nor Debian's "
                    f"/usr/share/gocode has ({', '.join(missing)}): use a tag from v0.3.0 to v0.5.0")
    assert built.returncode == 0, built.stderr
    return out


class GoNode:
    """The Go node as a child process: its JSON lines read as they come."""

    def __init__(self, binary, port, keyed, stderr):
        args = [str(binary), "node", "-name", "go1", "-bind", "127.0.0.2", "-port", str(port),
                "-label", LABEL.decode(), *GO_TIMERS]
        if keyed:
            args += ["-key", base64.b64encode(KEY).decode()]
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True,
                                     cwd="/")
        self.members = []
        self.joins = queue.Queue()
        self.ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            item = json.loads(line)
            if "ready" in item:
                self.ready.set()
            elif "members" in item:
                self.members = [(m["name"], m["state"]) for m in item["members"] or []]
            elif "joined" in item:
                self.joins.put(item)

    def join(self, port):
        self.proc.stdin.write(f"join 127.0.0.1:{port}\n")
        self.proc.stdin.flush()
        return self.joins.get(timeout=10)

    def stop(self):
        try:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.flush()
            self.proc.wait(5)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait(5)


BOTH = [("go1", "alive"), ("py1", "alive")]


def _ours(svc):
    return sorted((m.name, m.status.name.lower()) for m in svc.members())


def _pushes(svc):
    return svc.stats()["push_pulls"] + svc.stats()["streams_received"]


@pytest.fixture
def go_node(binary, tmp_path):
    nodes = []

    def start(keyed):
        node = GoNode(binary, free_gossip_port("127.0.0.2"), keyed, (tmp_path / "go.log").open("w"))
        nodes.append(node)
        assert node.ready.wait(10), (tmp_path / "go.log").read_text()
        return node
    yield start
    for node in nodes:
        node.stop()


def _port(node):
    return int(node.proc.args[node.proc.args.index("-port") + 1])


@pytest.mark.parametrize("direction", ["we_join_go", "go_joins_us"])
@pytest.mark.parametrize("keyed", [False, True], ids=["plain", "encrypted"])
def test_a_labelled_member_on_threads_and_memberlist_0_3_join_both_ways_and_stay_alive(go_node, keyed, direction):
    from mcastmember.gossip.fronts.service import SerfService

    go = go_node(keyed)
    port = free_gossip_port("127.0.0.1")
    with SerfService("py1", "127.0.0.1", port, keys=(KEY,) if keyed else (), **OURS) as py:
        if direction == "we_join_go":
            done = py.join([("127.0.0.2", _port(go))])
            assert (done.joined, done.errors) == (1, ())
        else:
            assert go.join(port) == {"joined": 1}
        wait_until(lambda: _ours(py) == BOTH and go.members == BOTH)
        streams = _pushes(py)
        # push/pulls both ways since: streams Go dialled and streams we dialled, each reply headerless
        wait_until(lambda: py.stats()["push_pulls"] >= 3 and _pushes(py) >= streams + 6)
        assert (_ours(py), go.members) == (BOTH, BOTH)
        assert py.stats()["streams_bad"] == 0


@pytest.mark.parametrize("direction", ["we_join_go", "go_joins_us"])
@pytest.mark.parametrize("keyed", [False, True], ids=["plain", "encrypted"])
def test_a_labelled_member_on_asyncio_and_memberlist_0_3_join_both_ways_and_stay_alive(go_node, keyed, direction):
    from mcastmember.gossip.fronts.aio import AsyncSerfService

    go = go_node(keyed)
    port = free_gossip_port("127.0.0.1")

    async def main():
        async with AsyncSerfService("py1", "127.0.0.1", port, keys=(KEY,) if keyed else (), **OURS) as py:
            if direction == "we_join_go":
                done = await py.join([("127.0.0.2", _port(go))])
                assert (done.joined, done.errors) == (1, ())
            else:
                assert await asyncio.to_thread(go.join, port) == {"joined": 1}
            await async_wait_until(lambda: _ours(py) == BOTH and go.members == BOTH)
            streams = _pushes(py)
            await async_wait_until(lambda: py.stats()["push_pulls"] >= 3 and _pushes(py) >= streams + 6)
            assert (_ours(py), go.members) == (BOTH, BOTH)
            assert py.stats()["streams_bad"] == 0
    asyncio.run(asyncio.wait_for(main(), 30))
