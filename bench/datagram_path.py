#!/usr/bin/env python3
"""The path of one gossip datagram through the package: modules entered and
calls back up a class chain.

    python bench/datagram_path.py [--json out.json] [--trace]

Two datagrams arrive at a started Serf node (``SerfNode``), each handed to
its receive entry point as a front hands it, then what it sends is taken
as a front takes it:

- an alive message about a node it does not know (the node joins: the
  node-state rules, a broadcast queued, the event handed to Serf's layer;
  nothing is sent yet);
- a ping addressed to it (answered with an ack, broadcasts piggybacked).

Both again in an encrypted cluster (a key set), where every datagram takes
the general path (the matcher reads only plaintext). Each is traced with
``sys.setprofile`` (after one datagram of the same kind to warm the caches,
so only the steady path counts). Counted, over the
package's own Python functions (compiled kernels and the standard library
are not seen or not counted):

- calls: every call of a package function;
- module entries: calls whose function is in another module of the
  package than its caller's (the nearest package frame below it), and the
  distinct modules entered; the same for memberlist's modules alone (the
  engine, its parts and its wire; not Serf's);
- calls back up: calls on the same object into a method defined in a class
  that comes earlier in the object's MRO than the class defining the
  calling method: a base class calling what a subclass defines (a forward
  stub's way), which a composed engine, whose parts call only parts below
  them, never makes;
- chain crossings: calls on the same object from a method of one class of
  its MRO into a method of another (up or down a mixin chain).

Runs on the code before and after the engine became composed (it finds the
node and the entry points under either layout: ``receive_packet`` and
``datagrams_to_send`` before, ``receive`` and ``outgoing`` after). Nothing
touches the network: the node is sans-IO.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any

import mcastmember
from mcastmember.gossip.serf.node import SerfNode

try:                                    # the layout with one folder per wing
    from mcastmember.gossip.memberlist import crypto, framing, messages
    from mcastmember.gossip.memberlist.settings import GossipSettings
except ImportError:                     # the layout before it
    from mcastmember.gossip import crypto, framing, messages  # type: ignore[no-redef]
    from mcastmember.gossip.settings import GossipSettings  # type: ignore[no-redef]

PACKAGE = mcastmember.__file__.rsplit("/", 1)[0] + "/"
ME = ("127.0.0.1", 7946)
PEER = ("127.0.0.2", 7946)
VSN = bytes((1, 5, 2, 2, 5, 4))      # what Serf 0.9.4 announces
KEY = bytes(range(16))


def _module(code: CodeType) -> str | None:
    """The package module a function's code is in, or None outside the package."""
    name = code.co_filename
    if not name.startswith(PACKAGE):
        return None
    return name[len(PACKAGE):].removesuffix(".py").replace("/", ".")


def _memberlist(module: str) -> bool:
    """Whether a module is memberlist's layer (gossip.memberlist.*; before
    the wings had folders, gossip.* but Serf's)."""
    return module.startswith("gossip.memberlist.") or (
        module.startswith("gossip.") and not module.startswith(("gossip.serf.", "gossip.fronts.")))


_defining: dict[tuple[type, CodeType], int | None] = {}


def _mro_index(frame: FrameType) -> tuple[object, int] | None:
    """(self, the MRO index of the class defining the frame's method), or
    None if the frame is not a method of a package object."""
    code = frame.f_code
    if not code.co_argcount or code.co_varnames[0] != "self":
        return None
    obj = frame.f_locals.get("self")
    if obj is None:
        return None
    key = (type(obj), code)
    if key not in _defining:
        found = None
        for index, cls in enumerate(type(obj).__mro__):
            for value in vars(cls).values():
                fns = (value.fget, value.fset) if isinstance(value, property) else (value,)
                if any(getattr(getattr(fn, "__func__", fn), "__code__", None) is code for fn in fns):
                    found = index
                    break
            if found is not None:
                break
        _defining[key] = found
    index = _defining[key]
    return None if index is None else (obj, index)


class PathCount:
    """Counts one traced call's calls, module entries and calls back up."""

    def __init__(self) -> None:
        self.calls = 0
        self.entries = 0
        self.modules: list[str] = []      # in the order first entered
        self.back_up = 0
        self.back_up_calls: list[str] = []
        self.crossings = 0
        self.route: list[str] = []        # the modules entered, in order

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        module = _module(frame.f_code)
        if module is None:
            return
        self.calls += 1
        caller = frame.f_back
        while caller is not None and _module(caller.f_code) is None:
            caller = caller.f_back
        if caller is None:
            return                        # the traced entry point itself
        if _module(caller.f_code) != module:
            self.entries += 1
            self.route.append(module)
            if module not in self.modules:
                self.modules.append(module)
        mine, theirs = _mro_index(frame), _mro_index(caller)
        if mine is not None and theirs is not None and mine[0] is theirs[0] and mine[1] != theirs[1]:
            self.crossings += 1
            if mine[1] < theirs[1]:
                self.back_up += 1
                self.back_up_calls.append(f"{caller.f_code.co_name} -> {frame.f_code.co_name}")

    def as_dict(self) -> dict[str, Any]:
        memberlist = [m for m in self.route if _memberlist(m)]
        return {"calls": self.calls, "module_entries": self.entries, "modules": len(self.modules),
                "memberlist_entries": len(memberlist), "memberlist_modules": len(set(memberlist)),
                "calls_back_up": self.back_up, "chain_crossings": self.crossings, "route": self.route,
                "back_up": self.back_up_calls}


def _verbs(node: SerfNode) -> tuple[Callable[..., None], Callable[[float], list[tuple[bytes, Any]]]]:
    """The node's receive and send-queue entry points, under either name."""
    if hasattr(node, "outgoing"):
        return node.receive, node.outgoing
    return node.receive_packet, node.datagrams_to_send     # type: ignore[attr-defined]


def _node(keys: tuple[bytes, ...]) -> SerfNode:
    node = SerfNode(GossipSettings(name="me", advertise_addr=ME[0], advertise_port=ME[1], keys=keys), seed=1)
    node.start(0.0)
    receive, outgoing = _verbs(node)
    # a known peer (its alive, then our gossip and the events drained)
    receive(_packet(_alive("peer", PEER), keys), PEER, 0.0)
    outgoing(0.0)
    node.events()
    return node


def _alive(name: str, addr: tuple[str, int]) -> bytes:
    host = bytes(int(b) for b in addr[0].split("."))
    return messages.encode(messages.Alive(incarnation=1, node=name, addr=host, port=addr[1], meta=b"", vsn=VSN))


def _packet(msg: bytes, keys: tuple[bytes, ...]) -> bytes:
    """The datagram a peer sends with ``msg`` (encrypted with ``keys``, if any)."""
    return framing.encode_packet(msg, keyring=crypto.Keyring(keys) if keys else None)


def _ping(seq: int) -> bytes:
    return messages.encode(messages.Ping(seq_no=seq, node="me", source_addr=bytes((127, 0, 0, 2)),
                                         source_port=PEER[1], source_node="peer"))


def trace(node: SerfNode, data: bytes, now: float, answered: bool = False) -> PathCount:
    receive, outgoing = _verbs(node)
    count = PathCount()
    sys.setprofile(count.profile)
    try:
        receive(data, PEER, now)
        sent = outgoing(now)
    finally:
        sys.setprofile(None)
    if answered and not sent:
        raise SystemExit("the ping was not answered: the path measured is not the answer's")
    return count


def measure() -> dict[str, dict[str, Any]]:
    results = {}
    for keys, cluster in (((), ""), ((KEY,), ", encrypted")):
        node = _node(keys)
        trace(node, _packet(_alive("warm", ("127.0.0.3", 7946)), keys), 0.1)              # warm the caches
        alive = trace(node, _packet(_alive("newcomer", ("127.0.0.4", 7946)), keys), 0.2)
        if not any(m.name == "newcomer" for m in node.members()):
            raise SystemExit("the newcomer did not join: the path measured is not the join's")
        node = _node(keys)
        trace(node, _packet(_ping(1), keys), 0.1, answered=True)
        ping = trace(node, _packet(_ping(2), keys), 0.2, answered=True)
        results[f"alive of an unknown node{cluster}"] = alive.as_dict()
        results[f"ping answered{cluster}"] = ping.as_dict()
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON")
    parser.add_argument("--trace", action="store_true", help="print each path's modules and calls back up")
    args = parser.parse_args(argv)
    results = measure()
    print(f"{'datagram':<37} {'calls':>6} {'module entries':>15} {'(memberlist)':>13} {'modules':>8} "
          f"{'(memberlist)':>13} {'calls back up':>14} {'chain crossings':>16}")
    for name, row in results.items():
        print(f"{name:<37} {row['calls']:>6} {row['module_entries']:>15} {row['memberlist_entries']:>13} "
              f"{row['modules']:>8} {row['memberlist_modules']:>13} {row['calls_back_up']:>14} "
              f"{row['chain_crossings']:>16}")
        if args.trace:
            print("  modules entered:", " -> ".join(row["route"]))
            for call in row["back_up"]:
                print("  back up:", call)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(results, out, indent=2)


if __name__ == "__main__":
    main()
