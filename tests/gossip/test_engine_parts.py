"""The gossip engine is composed of parts it owns and calls downward.

The engine's parts (fast path, probing, streams, node-state rules, outbox,
over one shared state) are each their own class, none inheriting another,
so no part reaches a method another defines by climbing a class chain; the
package declares no method by raising NotImplementedError for a subclass to
fill; each event the engine hands a Serf node has its handler, by type; and
one datagram's path through a Serf node (bench/datagram_path.py) makes no
call back up a class chain.
"""

from __future__ import annotations

import ast
import importlib.util
import pathlib
import typing

import pytest

import mcastmember

pytest.importorskip("msgpack")

from mcastmember.gossip.memberlist.core import EngineState  # noqa: E402
from mcastmember.gossip.memberlist.engine import GossipEngine  # noqa: E402
from mcastmember.gossip.memberlist.events import Event  # noqa: E402
from mcastmember.gossip.memberlist.fast_path import FastPath  # noqa: E402
from mcastmember.gossip.memberlist.outbox import Outbox  # noqa: E402
from mcastmember.gossip.memberlist.probing import Probing  # noqa: E402
from mcastmember.gossip.memberlist.rules import NodeRules  # noqa: E402
from mcastmember.gossip.memberlist.settings import GossipSettings  # noqa: E402
from mcastmember.gossip.memberlist.streams import StreamSync  # noqa: E402
from mcastmember.gossip.serf.node import SerfNode  # noqa: E402

PACKAGE = pathlib.Path(mcastmember.__file__).parent
BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench" / "datagram_path.py"


@pytest.mark.parametrize("part", [GossipEngine, FastPath, Probing, StreamSync, NodeRules, Outbox, EngineState])
def test_each_engine_part_is_a_class_of_its_own(part):
    assert part.__mro__ == (part, object)


def test_the_engine_holds_its_parts_over_one_shared_state():
    engine = GossipEngine(GossipSettings(name="a"))
    parts = (engine.fast_path, engine.probing, engine.streams, engine.rules, engine.outbox)
    assert [type(p) for p in parts] == [FastPath, Probing, StreamSync, NodeRules, Outbox]
    assert all(p.shared is engine.shared for p in parts)
    assert (engine.fast_path.probing, engine.fast_path.rules, engine.fast_path.outbox) == (
        engine.probing, engine.rules, engine.outbox)
    assert (engine.probing.streams, engine.probing.rules, engine.probing.outbox) == (
        engine.streams, engine.rules, engine.outbox)
    assert engine.streams.rules is engine.rules and engine.rules.outbox is engine.outbox


def _stubs(path: pathlib.Path) -> list[int]:
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Raise) and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(exc, ast.Name) and exc.id == "NotImplementedError":
                lines.append(node.lineno)
    return lines


def test_no_method_of_the_package_is_a_stub_raising_not_implemented():
    found = {str(p.relative_to(PACKAGE)): _stubs(p) for p in sorted(PACKAGE.rglob("*.py"))}
    assert {name: lines for name, lines in found.items() if lines} == {}


def test_each_engine_event_has_its_handler_in_the_serf_node():
    node = SerfNode(GossipSettings(name="a"))
    assert set(node._on_event) == set(typing.get_args(Event))


def test_a_datagram_through_a_serf_node_never_calls_back_up_a_class_chain():
    spec = importlib.util.spec_from_file_location("datagram_path", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    results = bench.measure()
    assert sorted(results) == ["alive of an unknown node", "alive of an unknown node, encrypted",
                               "ping answered", "ping answered, encrypted"]
    assert {name: (row["calls_back_up"], row["chain_crossings"]) for name, row in results.items()} == {
        name: (0, 0) for name in results}
