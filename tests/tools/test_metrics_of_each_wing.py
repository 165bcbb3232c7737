"""mcastmember.metrics serves either wing's front with that wing's collector
(tribes/fronts/metrics.py, gossip/fronts/metrics.py) and loads nothing of the
other wing to tell them apart; anything that is no front is refused."""

import subprocess
import sys

import pytest

pytest.importorskip("prometheus_client")

# In a fresh interpreter: start the front, serve it, scrape it once, and print the
# package modules then loaded and the first series of the scrape.
SCRAPE = """
import sys, urllib.request
from mcastmember.metrics import serve
{start}
with front, serve(front, 0, "127.0.0.1") as server:
    with urllib.request.urlopen(server.url, timeout=5) as answer:
        text = answer.read().decode()
print(" ".join(sorted(m for m in sys.modules if m.startswith("mcastmember."))))
print(next(line for line in text.splitlines() if line.startswith("{series}")))
"""


def scrape_in_a_fresh_interpreter(start, series):
    # from the root folder: the installed package, never the source checkout
    done = subprocess.run([sys.executable, "-c", SCRAPE.format(start=start, series=series)],
                          capture_output=True, text=True, timeout=60, cwd="/")
    assert done.stderr == ""
    loaded, line = done.stdout.splitlines()
    return loaded.split(), line


def test_a_gossip_front_is_served_by_the_gossip_collector_without_loading_tribes():
    pytest.importorskip("msgpack")
    from support import free_gossip_port
    loaded, line = scrape_in_a_fresh_interpreter(
        "from mcastmember import SerfService\n"
        f"front = SerfService('solo', '127.0.0.1', {free_gossip_port()})",
        "mcastmember_gossip_serf_members")
    assert line == 'mcastmember_gossip_serf_members{node="solo"} 1.0'
    assert "mcastmember.gossip.fronts.metrics" in loaded
    assert [m for m in loaded if m.startswith("mcastmember.tribes")] == []


def test_a_tribes_front_is_served_by_the_tribes_collector_without_loading_gossip(group_port):
    loaded, line = scrape_in_a_fresh_interpreter(
        "from mcastmember import McastService\n"
        f"front = McastService('228.0.0.4', {group_port}, member_port=4000, interface='127.0.0.1', ttl=0, "
        "tcp_listener=False)",
        "mcastmember_healthy")
    assert line == f'mcastmember_healthy{{group="228.0.0.4:{group_port}"}} 1.0'
    assert "mcastmember.tribes.fronts.metrics" in loaded
    assert [m for m in loaded if m.startswith("mcastmember.gossip")] == []


def test_what_is_no_front_is_refused_with_the_fronts_it_could_be():
    from mcastmember.metrics import serve
    with pytest.raises(TypeError) as refused:
        serve(object(), 0, "127.0.0.1")
    assert str(refused.value) == ("no metrics for a object: serve a McastService, "
                                  "AsyncMcastService, SerfService or AsyncSerfService")
