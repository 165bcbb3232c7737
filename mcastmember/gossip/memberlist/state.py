"""The node table (memberlist state.go's nodes and nodeMap, util.go's
helpers; read, not copied).

``nodes`` is the probe order: a new node goes to a random place (so that,
cluster-wide, a new node is probed soon on average), and the list is
reshuffled each time the probe round-robin wraps, when dead nodes past
GossipToTheDeadTime are reaped.

Beyond memberlist, the dead and left nodes are also kept in the order they
became so (``gone``), so that the one that changed longest ago is found at
once: the engine bounds how many it keeps and evicts the oldest to make
room for a live newcomer, which forged deaths would otherwise keep out of a
full table until the reaping.
"""

from __future__ import annotations

import functools
import ipaddress
import random
from collections.abc import Callable
from dataclasses import dataclass

from .layout import VSN_SIZE, NodeState

Addr = tuple[str, int]


def ip_text(raw: bytes) -> str:
    """A wire address (4 or 16 bytes) as text; anything else as hex. The
    last 1,024 (given as bytes) are remembered: every ack and probe asks."""
    return _ip_text_cached(raw) if type(raw) is bytes else _ip_text(raw)


def _ip_text(raw: bytes) -> str:
    if len(raw) in (4, 16):
        return str(ipaddress.ip_address(raw))
    return raw.hex()


_ip_text_cached = functools.lru_cache(maxsize=1024)(_ip_text)


def ip_bytes(text: str) -> bytes:
    """An IP address as the wire carries it (net.IP: 4 bytes for IPv4)."""
    return ipaddress.ip_address(text).packed


@dataclass(frozen=True)
class NodeInfo:
    """A snapshot of one node, as events and ``members()`` give it."""

    name: str
    addr: str
    port: int
    meta: bytes
    incarnation: int
    state: NodeState
    #: pmin, pmax, pcur, dmin, dmax, dcur
    vsn: bytes


@dataclass(eq=False, slots=True)
class Node:
    """What we know of one node (memberlist's nodeState). Slotted: every
    member keeps one per member of the cluster (10,000 members simulated in
    one process hold 10^8 of them)."""

    name: str
    addr: bytes
    port: int
    meta: bytes = b""
    incarnation: int = 0
    state: NodeState = NodeState.DEAD
    state_change: float = 0.0
    vsn: bytes = bytes(VSN_SIZE)

    @property
    def address(self) -> Addr:
        return (ip_text(self.addr), self.port)

    @property
    def pmax(self) -> int:
        return self.vsn[1]

    def dead_or_left(self) -> bool:
        return self.state in (NodeState.DEAD, NodeState.LEFT)

    def info(self) -> NodeInfo:
        return NodeInfo(self.name, ip_text(self.addr), self.port, self.meta, self.incarnation, self.state,
                        self.vsn)


class NodeTable:
    """The nodes in probe order and by name; bounded by the engine.
    ``get(name)`` gives the node of that name or None: the dict's own
    ``get`` (the engine asks tens of times per packet). ``gone``: the dead
    and left nodes the engine registered (:meth:`went`), oldest first."""

    get: Callable[[str], Node | None]

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.nodes: list[Node] = []
        self.by_name = {}
        self.gone: dict[str, Node] = {}
        # Each node's place in ``nodes``, made when an eviction first needs
        # it and kept by add and evict until a reshuffle; checked on use, as
        # ``nodes`` may be replaced wholesale (the simulator builds tables).
        self._where: dict[str, int] | None = None

    @property
    def by_name(self) -> dict[str, Node]:
        return self._by_name

    @by_name.setter
    def by_name(self, by_name: dict[str, Node]) -> None:
        self._by_name = by_name
        self.get = by_name.get

    def __len__(self) -> int:
        return len(self.nodes)

    def random_offset(self, n: int) -> int:
        """util.go randomOffset: 0 <= offset < n (0 when n is 0)."""
        return self.rng.randrange(n) if n else 0

    def add(self, node: Node) -> None:
        """Append, then swap with a random place (aliveNode)."""
        nodes = self.nodes
        n = len(nodes)
        offset = self.random_offset(n)
        nodes.append(node)
        nodes[offset], nodes[n] = nodes[n], nodes[offset]
        self.by_name[node.name] = node
        where = self._where
        if where is not None:
            where[nodes[n].name] = n
            where[nodes[offset].name] = offset

    def went(self, node: Node) -> None:
        """``node`` just became dead or left: the newest of ``gone``."""
        self.gone.pop(node.name, None)
        self.gone[node.name] = node

    def back(self, node: Node) -> None:
        """``node`` is alive again: no longer gone."""
        self.gone.pop(node.name, None)

    def oldest_gone(self) -> Node | None:
        """The node that became dead or left longest ago (and still is), if any."""
        return next(iter(self.gone.values()), None)

    def evict(self, node: Node) -> None:
        """Forget ``node`` now: its place in the probe order goes to the
        last node (a swap, not a shift of the whole list)."""
        where = self._places(node)
        index = where.pop(node.name)
        nodes = self.nodes
        last = nodes.pop()
        if index < len(nodes):
            nodes[index] = last
            where[last.name] = index
        del self.by_name[node.name]
        self.gone.pop(node.name, None)

    def _places(self, node: Node) -> dict[str, int]:
        """``_where``, made anew unless it holds ``node`` at its place."""
        where = self._where
        if where is not None:
            index = where.get(node.name, -1)
            if 0 <= index < len(self.nodes) and self.nodes[index] is node:
                return where
        self._where = where = {n.name: i for i, n in enumerate(self.nodes)}
        return where

    def reap_and_shuffle(self, now: float, gossip_to_the_dead: float) -> list[Node]:
        """resetNodes: remove dead and left nodes older than
        ``gossip_to_the_dead`` (see the engine notes on left ones), shuffle
        the rest; returns the removed."""
        keep: list[Node] = []
        gone: list[Node] = []
        for node in self.nodes:
            if node.dead_or_left() and now - node.state_change > gossip_to_the_dead:
                gone.append(node)
                del self.by_name[node.name]
                self.gone.pop(node.name, None)
            else:
                keep.append(node)
        self.rng.shuffle(keep)
        self.nodes = keep
        self._where = None
        return gone

    def k_random(self, k: int, skip: Callable[[Node], bool]) -> list[Node]:
        """util.go kRandomNodes: up to ``k`` distinct nodes ``skip`` does not
        refuse, from at most 3n random draws."""
        n = len(self.nodes)
        out: list[Node] = []
        for _ in range(3 * n):
            if len(out) >= k:
                break
            node = self.nodes[self.random_offset(n)]
            if skip(node) or node in out:
                continue
            out.append(node)
        return out
