"""The tags file is Serf's own: Debian's ``serf agent -tags-file`` starts with
the tags a Python member wrote there, and a Python member starts with the
tags the agent wrote back after ``serf tags -set``. On loopback, about a
second; skipped where ``serf`` is not installed."""

import json
import shutil
import subprocess

import pytest

pytest.importorskip("msgpack")
pytest.importorskip("cryptography")

from mcastmember.gossip.fronts.service import SerfService  # noqa: E402
from support import free_gossip_port, free_tcp_port, wait_until  # noqa: E402

# What a Serf agent adds around a member is written once, above the gossip
# engine; the default implementation (compiled or pure) changes only the hot
# path's matcher beneath it, so CI's compiled pass runs these (single_pass).
pytestmark = [pytest.mark.skipif(shutil.which("serf") is None,
                                 reason="Debian's serf is not installed (apt-get install serf)"),
              pytest.mark.single_pass]


def own_tags(svc):
    return next(dict(m.tags) for m in svc.members() if m.name == svc.node.name)


def test_an_agent_and_a_python_member_share_a_tags_file(tmp_path):
    path = tmp_path / "tags.json"
    with SerfService("py1", "127.0.0.1", free_gossip_port(), tags_file=str(path)) as svc:
        svc.set_tags({"role": "py"})
    rpc = f"127.0.0.1:{free_tcp_port()}"
    agent = subprocess.Popen(["serf", "agent", "-node", "go1", "-bind", f"127.0.0.1:{free_gossip_port()}",
                              "-rpc-addr", rpc, "-tags-file", str(path)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path)
    try:
        # once its RPC answers, the agent adds a tag: it writes the file before it gossips them
        wait_until(lambda: subprocess.run(["serf", "tags", "-rpc-addr", rpc, "-set", "zone=a"],
                                          capture_output=True, timeout=10).returncode == 0)
        members = json.loads(subprocess.run(["serf", "members", "-rpc-addr", rpc, "-format", "json"],
                                            capture_output=True, text=True, timeout=10).stdout)["members"]
        assert [(m["name"], m["tags"]) for m in members] == [("go1", {"role": "py", "zone": "a"})]
        assert json.loads(path.read_text()) == {"role": "py", "zone": "a"}
    finally:
        agent.kill()
        agent.wait()
    with SerfService("py1", "127.0.0.1", free_gossip_port(), tags_file=str(path)) as svc:
        assert own_tags(svc) == {"role": "py", "zone": "a"}
