"""Prometheus metrics of a membership front (optional: ``pip install
'mcastmember[prometheus]'``; ``import mcastmember`` never imports this).

A custom collector reads the front's ``stats()`` when Prometheus scrapes, so
the metrics cost nothing per heartbeat::

    from prometheus_client import REGISTRY
    from mcastmember.fronts.metrics import MembershipCollector
    REGISTRY.register(MembershipCollector(service))

or serve them on a port of their own (what ``mcast-demo join --metrics-port``
does)::

    from mcastmember.fronts.metrics import serve
    server = serve(service, 9464, "127.0.0.1")    # http://127.0.0.1:9464/metrics
    ...
    server.close()

Every series carries the ``group`` label: what the front joined, in the words
of ``config.describe()`` (``228.0.0.4:45564``), unless ``group=`` says
otherwise.
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, cast

try:
    from prometheus_client import CollectorRegistry, make_wsgi_app
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
    from prometheus_client.registry import Collector
except ImportError as error:
    if not (error.name or "").startswith("prometheus_client"):
        raise                           # installed, but broken: its own error says more
    raise ModuleNotFoundError("mcastmember.fronts.metrics needs prometheus_client: "
                              "pip install 'mcastmember[prometheus]'",
                              name="prometheus_client") from None

from ..wire import layout as L
from .metrics_http import MetricsHTTPServer, ServerCollector
from ..engine.events import Reason

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from prometheus_client.metrics_core import Metric
    from typing_extensions import Self

    from .driver import MembershipFront
    from ..engine.stats import Stats

# How long a scrape waits for the asyncio front's loop to read its stats.
LOOP_TIMEOUT_S = 5.0

# The label values a series exists for from the first scrape (zero until
# counted), as Prometheus practice asks, so a rate() over them never starts
# from a missing series. Channel frames and doctor probes have series of
# their own: they are not malformed.
_MALFORMED = sorted(v for k, v in L.REASONS.items()
                    if k not in (L.OK, L.CHANNEL_FRAME, L.DOCTOR_PROBE))
_AUTH = sorted(v for k, v in L.AUTH_REASONS.items() if k != L.AUTH_OK)
_REMOVED = sorted(str(reason) for reason in Reason)


class MembershipCollector(Collector):
    """The metrics of ``front`` (a McastService or an AsyncMembership),
    read from its ``stats()`` at every scrape. Safe to scrape from any
    thread: the asyncio front's stats are read on its loop."""

    def __init__(self, front: MembershipFront, *, group: str | None = None,
                 namespace: str = "mcastmember") -> None:
        self._front = front
        self._group = front.config.describe() if group is None else str(group)
        self._ns = namespace

    def describe(self) -> list[Metric]:
        # The names, without reading stats: registering checks them only.
        return self._families({})

    def collect(self) -> list[Metric]:
        # The counters it reads are ints (bools for healthy); the one text,
        # "implementation", is not read.
        return self._families(cast("Mapping[str, int]", self._stats()))

    def _stats(self) -> Stats:
        from .aio import AsyncMembership
        front = self._front
        loop = front._loop if isinstance(front, AsyncMembership) else None
        if loop is None or not loop.is_running() or _running_loop() is loop:
            return front.stats()

        async def read() -> Stats:
            return front.stats()
        return asyncio.run_coroutine_threadsafe(read(), loop).result(LOOP_TIMEOUT_S)

    def _families(self, stats: Mapping[str, int]) -> list[Metric]:
        group, ns = self._group, self._ns

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            family = GaugeMetricFamily(f"{ns}_{name}", doc, labels=["group"])
            if stats:
                family.add_metric([group], value)
            return family

        def counter(name: str, doc: str, label: str | None = None,
                    values: float | Mapping[str, float] = 0) -> CounterMetricFamily:
            family = CounterMetricFamily(f"{ns}_{name}", doc,
                                         labels=["group"] + ([label] if label else []))
            if stats:
                if isinstance(values, (int, float)):    # no label: one value
                    family.add_metric([group], values)
                else:                                   # one per value of the label
                    for key, value in values.items():
                        family.add_metric([group, key], value)
            return family

        def by(prefix: str, known: Iterable[str]) -> dict[str, int]:
            counts = dict.fromkeys(known, 0)
            counts.update({k[len(prefix):]: v for k, v in stats.items() if k.startswith(prefix)})
            return counts

        get = stats.get
        sent = {"multicast": get("sent", 0)}
        send_errors = {"multicast": get("send_errors", 0)}
        if "unicast_sent" in stats:
            sent["unicast"] = stats["unicast_sent"]
            send_errors["unicast"] = get("unicast_send_errors", 0)
        return [
            gauge("members", "Members in the table (suspects included).", get("members", 0)),
            gauge("healthy", "1 while the driver's loop has caught no unexpected error.",
                  1 if get("healthy", True) else 0),
            counter("heartbeats_sent", "Heartbeats sent: multicast, one per card; "
                    "unicast, one per peer.", "transport", sent),
            counter("datagrams_received", "Datagrams received on the membership "
                    "sockets, valid or not, but for our own heartbeats heard back.",
                    values=get("received", 0)),
            counter("fast_path", "Heartbeats of known members recognised without "
                    "parsing.", values=get("fast_path", 0)),
            counter("malformed", "Datagrams dropped as malformed, by verdict.", "verdict",
                    by("malformed.", _MALFORMED)),
            counter("channel_frames", "Tribes channel frames on the membership port, "
                    "dropped.", values=get("channel_frames", 0)),
            counter("doctor_probes", "mcast-demo doctor's probes heard on the membership "
                    "port, dropped (not malformed).", values=get("doctor_probes", 0)),
            counter("refused", "Datagrams refused: a new member, the table being full "
                    "(full); a unicast sender that is not a peer (unlisted); unauthenticated, "
                    "in an authenticated member's name (unauthenticated).", "reason",
                    {"full": get("refused", 0), "unlisted": get("refused_unlisted", 0),
                     "unauthenticated": get("refused_unauthenticated", 0)}),
            counter("auth_failures", "Datagrams that failed authentication, by reason "
                    "(dropped under enforce, admitted unauthenticated when permissive).",
                    "reason", by("auth.", _AUTH)),
            counter("added", "Members added.", values=get("added", 0)),
            counter("updated", "Members whose packet changed.", values=get("updated", 0)),
            counter("removed", "Members removed, by reason.", "reason",
                    by("removed.", _REMOVED)),
            counter("send_errors", "Heartbeats the kernel refused to send.", "transport",
                    send_errors),
            counter("receive_errors", "Failed receives on the membership sockets.",
                    values=get("receive_errors", 0)),
        ]


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class MetricsServer:
    """An HTTP server of one front's metrics on ``address``:``port``
    (``/metrics``, or any path), on one daemon thread; ``close()`` stops it.
    ``port`` 0 takes a free port (see ``.port``). OSError when the port is
    taken or the address is not ours. Bounded in connections (in all and per
    source), request size and time (see ``metrics_http``); ``stats()``
    counts what the bounds refused, also served as
    ``mcastmember_metrics_server_*``."""

    def __init__(self, front: MembershipFront, port: int, address: str = "127.0.0.1", *,
                 group: str | None = None) -> None:
        registry = CollectorRegistry(auto_describe=True)
        collector = MembershipCollector(front, group=group)
        registry.register(collector)
        self._httpd = MetricsHTTPServer(address, port, make_wsgi_app(registry))
        registry.register(ServerCollector(self._httpd, collector._group))
        self.address = address
        self.port = self._httpd.server_port
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        name="mcastmember-metrics", daemon=True)
        self._thread.start()

    def stats(self) -> dict[str, int]:
        """Connections by outcome (served, refused, evicted, timed_out,
        too_large, bad_request) and failed accepts (accept_errors)."""
        return self._httpd.stats()

    @property
    def url(self) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        self._httpd.shutdown()
        self._thread.join()
        self._httpd.server_close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve(front: MembershipFront, port: int, address: str = "127.0.0.1", *,
          group: str | None = None) -> MetricsServer:
    """Serve ``front``'s metrics over HTTP (see MetricsServer); returns the
    running server."""
    return MetricsServer(front, port, address, group=group)
