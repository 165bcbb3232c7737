"""One run of the doctor: what it was given and what it learns as it goes
(the config, the cards, what it heard), and the order of the checks.

The checks themselves are functions of this ``Doctor``: ``local`` (nothing
sent), ``listen`` (joining, the loop, listening and the pair datagrams),
``members`` and ``pairs`` (the verdicts on what was heard).
"""

from __future__ import annotations

import ipaddress
import math
import os
from typing import TYPE_CHECKING

from ...tribes.engine.config import CheckedSettings, ServiceConfig, choose_interface
from ..._runtime import net
from ..._runtime.errors import ConfigurationError
from . import listen
from . import local
from . import members
from . import pairs
from .report import Report

if TYPE_CHECKING:
    from typing import Literal

    from ...tribes.engine.config import Settings
    from ...tribes.engine.member import Member
    from ...tribes.net.interfaces import Choice, Interface
    from .listen import PeerState, Way


class Doctor:
    """The checks for ``join``'s settings (``settings``: ServiceConfig's
    keyword arguments), run by ``run()`` into a Report. ConfigurationError
    for settings that join would refuse (a usage error), but for the card
    and the group: what is wrong with those is a failing check."""

    family: Literal[4, 6] | None      # the group's IP version (None: unicast only)

    def __init__(self, group: str | None, port: int, settings: Settings,
                 wait: float = 5.0, pair: bool = False) -> None:
        if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not wait >= 0 \
                or math.isinf(wait):
            raise ConfigurationError("wait must be a positive number of seconds")
        self.group, self.port = group, port
        self.settings: Settings = {**settings}     # a dict display: the checkers keep its type
        self.wait, self.pair = float(wait), pair
        self.multicast: bool = self.settings.get("multicast", True)
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
        self._validate()

    def _validate(self) -> None:
        """Refuse now what join would refuse, the card and the group aside."""
        if self.multicast:
            try:
                self.family = ipaddress.ip_address(str(self.group)).version
            except ValueError:
                raise ConfigurationError(f"{self.group!r} is not an IPv4 or IPv6 "
                                         f"address") from None
        # Checked with no I/O: the card, the host and the group are the
        # local checks' to judge (a group that is no multicast group, or a
        # link-scoped one without its card, fails a check rather than the
        # command), so the group here is the default of its family. The
        # local checks check the settings again with the group given, and
        # resolve them on this host (local.settings).
        if self.multicast:
            assert self.family is not None
            group: str | None = local.default_group(self.family)
        else:
            group = None
            self.family = None
        CheckedSettings(group, self.port, **self.settings)
        if self.pair and not (self.settings.get("peers") or self.settings.get("dns")):
            raise ConfigurationError("--pair probes the peers: name the other hosts with "
                                     "--peers (or --dns), and run the doctor there too")

    def run(self) -> Report:
        if not local.checks(self):
            return self.report
        receivers, senders, unicast = listen.open_sockets(self)
        sockets = receivers + senders + ([unicast] if unicast else [])
        try:
            if self.multicast:
                if not receivers:
                    return self.report
                listen.loop(self, receivers, senders)
                listen.joined(self)
            listen.listen(self, receivers + ([unicast] if unicast else []), senders, unicast)
        finally:
            for sock in sockets:
                sock.close()
        members.judge(self)
        if self.pair:
            pairs.judge(self)
        return self.report

    # what the checks share -------------------------------------------------------------
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

