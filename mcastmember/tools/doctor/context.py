"""What one run of the doctor knows, as the checks see it: what it was given
(group, port, settings, wait, pair) and what it learns as it goes (the
config, the cards, what it heard, the peers' counters), with the questions
several checks ask of it (the card a spec names, the cards in use, this
host's address).

The checks (``local``, ``listen``, ``members``, ``pairs``) take a
``DoctorContext``; ``session.Doctor`` is one that also orders them. Kept
apart from ``session`` so that the checks and the module that calls them do
not import each other.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ...tribes.engine.config import ServiceConfig, choose_interface
from ..._runtime import net
from .report import Report

if TYPE_CHECKING:
    from typing import Literal, TypedDict

    from typing_extensions import TypeAlias

    from ...tribes.engine.config import Settings
    from ...tribes.engine.member import Member
    from ...tribes.net.interfaces import Choice, Interface
    from .datagrams import Counts

    # Which socket heard a member: the group's or the unicast one.
    Way: TypeAlias = Literal["multicast", "unicast"]

    class PeerState(TypedDict):
        """The datagram counters of one peer (DoctorContext.peers)."""
        m_in: set[int]                # sequences of its multicast datagrams heard
        u_in: set[int]                # sequences of its unicast datagrams heard
        rtt: list[float]              # round trips of our unicast datagrams, ms
        report: Counts | None         # the newest report of what it heard of ours
        report_at: int                # the sequence of the datagram that carried it
        ident: bytes | None           # its doctor id, once heard


class DoctorContext:
    """The inputs of a run and what its checks found so far (each check reads
    what the ones before it set, and adds to ``report``)."""

    family: Literal[4, 6] | None      # the group's IP version (None: unicast only)

    def __init__(self, group: str | None, port: int, settings: Settings,
                 wait: float, pair: bool) -> None:
        self.group, self.port = group, port
        self.settings: Settings = {**settings}     # a dict display: the checkers keep its type
        self.wait, self.pair = float(wait), pair
        self.multicast: bool = self.settings.get("multicast", True)
        self.family = None
        self.report = Report()
        # Set by the local checks: what runs after them asserts it is there.
        self.config: ServiceConfig | None = None
        self.cards: list[Interface] = []
        self.chosen: list[Choice] = []    # the interfaces.Choice of each card given
        self.via: Interface | None = None   # the card the kernel routes the group through
        self.ident = os.urandom(8)
        # (uid, host, port, source) -> (member, {way: [(t, alive)]})
        self.heard: dict[tuple[bytes, bytes, int, str],
                         tuple[Member, dict[Way, list[tuple[float, int]]]]] = {}
        self.peers: dict[str, PeerState] = {}    # peer address text -> its datagram counters
        self.unresolved: list[str] = []   # why each peer name gave no address

    def choose(self, spec: str | int) -> Choice:
        """The card ``spec`` names among this host's (as join chooses it)."""
        return choose_interface(spec, self.family if self.multicast else None, self.cards)

    def multicast_cards(self, family: int) -> list[str]:
        """The names of the cards, loopback aside, that carry IPv``family`` multicast."""
        return [c.name for c in self.cards if c.up and c.multicast and not c.loopback
                and any(a.version == family for a in c.addresses)]

    def cards_used(self) -> list[Interface]:
        """The cards the group's traffic uses: those given, else the route's."""
        if self.chosen:
            return [choice.interface for choice in self.chosen]
        return [self.via] if self.via is not None else []

    def unicast_address(self) -> str:
        """Where a member binds its unicast socket (config.unicast_address,
        which the route check made sure can be computed)."""
        assert self.config is not None
        return self.config.unicast_address

    def me(self) -> str:
        """This host's unicast address as text, without scope."""
        assert self.config is not None
        return str(net.unscoped(self.config.unicast_address))
