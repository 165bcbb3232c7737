"""mcast-demo doctor --gossip against a Go memberlist >= 0.3 node with
Label="dc1" (the node of tests/interop/test_memberlist_go.py, built from
the source MEMBERLIST_SRC names; skipped as that test is, saying what is
missing): the same label passes, with and without a key; another label, or
none, is told from how memberlist >= 0.3 closes the stream. Loopback."""

import base64
import json

import pytest

pytest.importorskip("msgpack")

from mcastmember.tools.cli import main  # noqa: E402
from support import free_gossip_port  # noqa: E402
from test_memberlist_go import KEY, GoNode, _missing, binary  # noqa: E402,F401 (binary: the fixture)

pytestmark = pytest.mark.skipif(_missing() is not None, reason=_missing() or "")


@pytest.fixture
def seed(binary, tmp_path, request):   # noqa: F811 (the fixture imported above)
    port = free_gossip_port("127.0.0.2")
    node = GoNode(binary, port, request.param, (tmp_path / "go.log").open("w"))
    try:
        assert node.ready.wait(10), (tmp_path / "go.log").read_text()
        yield f"127.0.0.2:{port}"
    finally:
        node.stop()


def doctor(capsys, seed, *extra):
    status = main(["doctor", "--gossip", "--bind", f"127.0.0.3:{free_gossip_port('127.0.0.3')}", "--join", seed,
                   "--node", "doc", "--wait", "1", "--json", *extra])
    return status, {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}


@pytest.mark.parametrize("seed", [False, True], indirect=True, ids=["plain", "keyed"])
def test_the_same_label_passes_every_check(capsys, seed, request):
    keyed = request.node.callspec.params["seed"]
    extra = ["--encrypt", base64.b64encode(KEY).decode()] if keyed else []
    status, checks = doctor(capsys, seed, "--label", "dc1", *extra)
    assert (status, [(name, c["status"]) for name, c in checks.items()]) == (0, [
        ("gossip_bind", "pass"), ("seed_tcp", "pass"), ("label", "pass"), ("key", "pass"), ("protocol", "pass"),
        ("name", "pass"), ("seed_udp", "pass")])
    assert checks["label"]["detail"] == "both label their traffic 'dc1'"


@pytest.mark.parametrize("seed", [False], indirect=True)
def test_another_label_is_told_apart_from_none(capsys, seed):
    fix = "--label with the cluster's label (the seed's memberlist configuration names it)"
    results = [doctor(capsys, seed, *extra)[1]["label"] for extra in (["--label", "blue"], [])]
    assert results == [
        {"name": "label", "status": "fail",
         "detail": f"{seed} closed the connection without an answer, with this node's label 'blue' and without a "
                   "label: the labels differ (memberlist >= 0.3 closes a stream whose label it does not take, and "
                   "names the label only in its configuration)", "fix": fix},
        {"name": "label", "status": "fail",
         "detail": f"{seed} closed the connection without an answer: it expects a label (memberlist >= 0.3 closes "
                   "a stream that lacks its label), or is no memberlist node", "fix": fix}]
