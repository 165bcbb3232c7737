"""One run of the doctor: the checks for ``join``'s settings, in order.

What a run knows as it goes is a ``DoctorContext`` (``context``); the checks
are functions of it: ``local`` (nothing sent), ``listen`` (joining, the
loop, listening and the pair datagrams), ``members`` and ``pairs`` (the
verdicts on what was heard). ``Doctor`` is the context that also refuses
what join would refuse and runs the checks.
"""

from __future__ import annotations

import ipaddress
import math
from typing import TYPE_CHECKING

from ...tribes.engine.config import CheckedSettings
from ..._runtime.errors import ConfigurationError
from . import listen
from . import local
from . import members
from . import pairs
from .context import DoctorContext
from .report import Report

if TYPE_CHECKING:
    from ...tribes.engine.config import Settings


class Doctor(DoctorContext):
    """The checks for ``join``'s settings (``settings``: ServiceConfig's
    keyword arguments), run by ``run()`` into a Report. ConfigurationError
    for settings that join would refuse (a usage error), but for the card
    and the group: what is wrong with those is a failing check."""

    def __init__(self, group: str | None, port: int, settings: Settings,
                 wait: float = 5.0, pair: bool = False) -> None:
        if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not wait >= 0 \
                or math.isinf(wait):
            raise ConfigurationError("wait must be a positive number of seconds")
        super().__init__(group, port, settings, wait, pair)
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
