"""``mcast-demo doctor``: why members don't see each other, and what to change.

A check is ``Check(name, status, detail, fix)``, appended to a ``Report`` in
the order it ran; names are stable (scripts read them from ``--json``;
docs/doctor.md documents them). In order:

- local, sending nothing (``local``): ``interface`` (exists, up, MULTICAST,
  an address of the group's family), ``route`` (the card the kernel routes
  the group through, against the chosen one), ``group`` (a multicast
  address; its scope against the TTL), ``port`` (no socket that would keep a
  member from it), ``rp_filter`` (reverse-path filtering that would drop
  heartbeats);
- after joining (``listen``): ``loop`` (datagrams sent to the group come
  back) and ``joined`` (the kernel lists the group on the card);
- after listening ``wait`` seconds, sending nothing (``members``): ``heard``,
  ``domain``, ``drop_time``, ``loss``, ``identity``, about the members heard;
- with ``pair`` (``pairs``): ``pair``, numbered datagrams to and from the
  peers, by multicast and by unicast, for the same ``wait`` seconds;
- for a gossip member instead (``gossip``, ``mcast-demo doctor --gossip``):
  ``gossip_bind``, ``advertise`` (with ``--advertise``), then per seed
  (``--join`` and ``--retry-join``) ``seed_tcp``, ``label``, ``key``,
  ``protocol``, ``name`` and ``seed_udp``.

A failing local check ends the run: nothing is sent then. The doctor's
datagrams (``datagrams``) are taken by no member for a heartbeat: Tomcat
ignores them without a word, mcastmember counts them as ``doctor_probes``.

The modules: ``context`` (the ``DoctorContext``: what a run knows), ``session``
(the ``Doctor``: a context that runs the checks in order), ``local``,
``listen``, ``members`` and ``pairs`` (the checks, functions of a context),
``host`` (what the kernel says: /proc), ``sockets``, ``datagrams``,
``measure`` (period, loss) and ``report`` (the report and its English).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .measure import estimate, sequence_loss
from .report import Check, Report
from .session import Doctor

if TYPE_CHECKING:
    from ...tribes.engine.config import Settings

__all__ = ["Check", "Doctor", "Report", "estimate", "run", "sequence_loss"]


def run(group: str | None, port: int, settings: Settings, wait: float = 5.0,
        pair: bool = False) -> Report:
    """The Report of every check for ``join``'s settings (ConfigurationError
    for settings join would refuse)."""
    return Doctor(group, port, settings, wait, pair).run()
