"""Prometheus metrics of a membership front, either wing's (optional: ``pip
install 'mcastmember[prometheus]'``; ``import mcastmember`` never imports
this).

Each wing owns its collector, which reads the front's ``stats()`` when
Prometheus scrapes, so the metrics cost nothing per heartbeat:
``MembershipCollector`` (tribes/fronts/metrics.py) for McastService and
AsyncMcastService, ``GossipCollector`` (gossip/fronts/metrics.py) for
SerfService and AsyncSerfService. Both are reachable here, each loaded when
first asked for::

    from prometheus_client import REGISTRY
    from mcastmember.metrics import MembershipCollector
    REGISTRY.register(MembershipCollector(service))

or serve a front's on a port of their own (what ``mcast-demo join
--metrics-port`` does); ``serve`` picks the collector of the front's wing and
loads nothing of the other::

    from mcastmember.metrics import serve
    server = serve(service, 9464, "127.0.0.1")    # http://127.0.0.1:9464/metrics
    ...
    server.close()

Every series of a Tribes front carries the ``group`` label: what the front
joined, in the words of ``config.describe()`` (``228.0.0.4:45564``), unless
``group=`` says otherwise; a gossip front's carry ``node``, its name.

A gossip front's server also serves its series under memberlist's and
Serf's own names, as go-metrics' Prometheus sink names them
(``memberlist_probeNode``, ``serf_member_join``: ``SerfNamesCollector``),
behind ``prefix=`` if given (``prefix="consul"`` gives Consul's names,
``consul_memberlist_probeNode``), so dashboards made for Serf and Consul
read a Python member.
"""

from __future__ import annotations

import importlib
import threading
from typing import TYPE_CHECKING, Any, cast

try:
    from prometheus_client import CollectorRegistry, make_wsgi_app
except ImportError as error:
    if not (error.name or "").startswith("prometheus_client"):
        raise                           # installed, but broken: its own error says more
    raise ModuleNotFoundError("mcastmember.metrics needs prometheus_client: "
                              "pip install 'mcastmember[prometheus]'",
                              name="prometheus_client") from None

from ._runtime.metrics_http import MetricsHTTPServer, ServerCollector
from ._runtime.scrape import LOOP_TIMEOUT_S, get_int, read_stats

if TYPE_CHECKING:
    from typing_extensions import Self

    from .gossip.fronts.driver import GossipFront
    from .gossip.fronts.metrics import (BAD_INPUT_REASONS, GOSSIP_COUNTERS, GOSSIP_GAUGES,
                                        GossipCollector)
    from .gossip.fronts.serf_names import SerfNamesCollector
    from .tribes.fronts.driver import MembershipFront
    from .tribes.fronts.metrics import COUNTERS, GAUGES, MembershipCollector

__all__ = ["BAD_INPUT_REASONS", "COUNTERS", "GAUGES", "GOSSIP_COUNTERS", "GOSSIP_GAUGES",
           "LOOP_TIMEOUT_S", "GossipCollector", "MembershipCollector", "MetricsServer",
           "SerfNamesCollector", "collector_for", "get_int", "read_stats", "serve"]

# The names each wing's collector module gives this one, loaded when first
# asked for: a scrape of one wing's front loads nothing of the other's.
_WING_NAMES = {
    "mcastmember.tribes.fronts.metrics": ("COUNTERS", "GAUGES", "MembershipCollector"),
    "mcastmember.gossip.fronts.metrics": ("BAD_INPUT_REASONS", "GOSSIP_COUNTERS", "GOSSIP_GAUGES",
                                          "GossipCollector"),
    "mcastmember.gossip.fronts.serf_names": ("SerfNamesCollector",),
}
_LAZY = {name: module for module, names in _WING_NAMES.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def _wing_of(front: object) -> str | None:
    """"tribes" or "gossip": the wing a class of ``front`` comes from (a
    subclass of a service too). Read off the classes' modules, so that
    telling the wings apart imports neither."""
    for cls in type(front).__mro__:
        package, _, rest = cls.__module__.partition(".")
        wing = rest.partition(".")[0]
        if package == "mcastmember" and wing in ("tribes", "gossip"):
            return wing
    return None


def collector_for(front: MembershipFront | GossipFront, label: str | None = None
                  ) -> MembershipCollector | GossipCollector:
    """The collector of ``front``'s wing: a MembershipCollector (its series
    labelled ``group``) for McastService and AsyncMcastService, a
    GossipCollector (labelled ``node``) for SerfService and AsyncSerfService;
    ``label`` is the label's value, if not the front's own. TypeError for
    anything else."""
    wing = _wing_of(front)
    if wing == "tribes":
        from .tribes.fronts.metrics import MembershipCollector
        return MembershipCollector(cast("MembershipFront", front), group=label)
    if wing == "gossip":
        from .gossip.fronts.metrics import GossipCollector
        return GossipCollector(cast("GossipFront", front), node=label)
    raise TypeError(f"no metrics for a {type(front).__name__}: serve a McastService, "
                    "AsyncMcastService, SerfService or AsyncSerfService")


class MetricsServer:
    """An HTTP server of one front's metrics on ``address``:``port``
    (``/metrics``, or any path), on one daemon thread; ``close()`` stops it.
    ``port`` 0 takes a free port (see ``.port``). OSError when the port is
    taken or the address is not ours. Bounded in connections (in all and per
    source), request size and time (see ``metrics_http``); ``stats()``
    counts what the bounds refused, also served as
    ``mcastmember_metrics_server_*``. A gossip front's series under
    memberlist's and Serf's names come too, behind ``prefix`` if given
    (ValueError if it is no Prometheus name; TypeError for a Tribes front,
    which has none of those series)."""

    def __init__(self, front: MembershipFront | GossipFront, port: int, address: str = "127.0.0.1", *,
                 group: str | None = None, prefix: str | None = None) -> None:
        registry = CollectorRegistry(auto_describe=True)
        collector = collector_for(front, group)
        registry.register(collector)
        if _wing_of(front) == "gossip":
            from .gossip.fronts.serf_names import SerfNamesCollector
            registry.register(SerfNamesCollector(cast("GossipFront", front), node=group, prefix=prefix))
        elif prefix:
            raise TypeError("a metrics prefix names memberlist's and Serf's series, which only a gossip "
                            "front (SerfService, AsyncSerfService) has")
        self._httpd = MetricsHTTPServer(address, port, make_wsgi_app(registry))
        registry.register(ServerCollector(self._httpd, collector.label_value, collector.namespace,
                                          collector.label))
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


def serve(front: MembershipFront | GossipFront, port: int, address: str = "127.0.0.1", *,
          group: str | None = None, prefix: str | None = None) -> MetricsServer:
    """Serve ``front``'s metrics over HTTP (see MetricsServer); returns the
    running server. A gossip front's series carry ``node`` (its name, or
    ``group`` given here) in place of ``group``, and come under
    memberlist's and Serf's names too, behind ``prefix`` (``"consul"``:
    Consul's names)."""
    return MetricsServer(front, port, address, group=group, prefix=prefix)
