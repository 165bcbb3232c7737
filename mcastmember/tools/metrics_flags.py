"""``--metrics-port``, ``--metrics-address`` (and, for a gossip member,
``--metrics-prefix``): the flags that serve a front's Prometheus metrics,
the same for ``mcast-demo join``, ``watch`` and ``gossip``; checked, and the
server started, with one sentence for what cannot work.

Loads no prometheus_client until a server is asked for.
"""

from __future__ import annotations

import argparse

from .._runtime.errors import ConfigurationError
from .view import host_port

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..gossip.fronts.driver import GossipFront
    from ..metrics import MetricsServer
    from ..tribes.fronts.service import McastService


def add_metrics_flags(command: argparse.ArgumentParser | argparse._ArgumentGroup, default_address: str,
                      prefix: bool = False) -> None:
    """The flags, on ``command``; ``default_address`` says in the help
    where the metrics are served without --metrics-address."""
    command.add_argument("--metrics-port", type=int, metavar="PORT",
                         help="serve Prometheus metrics on this TCP port (needs "
                              "prometheus_client: pip install 'mcastmember[prometheus]')")
    command.add_argument("--metrics-address", metavar="ADDR",
                         help=f"address the metrics are served on (default: {default_address})")
    if prefix:
        command.add_argument("--metrics-prefix", metavar="NAME",
                             help="put NAME_ before the series named as memberlist's and Serf's "
                                  "(consul: the names Consul's dashboards read; default none)")


def check_metrics_flags(args: argparse.Namespace) -> None:
    """ConfigurationError for flags that cannot work together."""
    port = getattr(args, "metrics_port", None)
    if getattr(args, "metrics_address", None) is not None and port is None:
        raise ConfigurationError("--metrics-address needs --metrics-port")
    if getattr(args, "metrics_prefix", None) is not None and port is None:
        raise ConfigurationError("--metrics-prefix needs --metrics-port")
    if port is not None and not 1 <= port <= 65535:
        raise ConfigurationError(f"--metrics-port {port} is out of range (1-65535)")
    prefix = getattr(args, "metrics_prefix", None)
    if prefix:
        from .._runtime.scrape import check_prefix       # (loaded only when asked for)
        try:
            check_prefix(prefix)
        except ValueError as error:
            raise ConfigurationError(f"--metrics-prefix: {error}") from None


def serve_metrics(front: McastService | GossipFront, args: argparse.Namespace, address: str) -> MetricsServer:
    """The metrics server of --metrics-port on --metrics-address, else
    ``address``; ConfigurationError without prometheus_client, or when the
    port cannot be had."""
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        raise ConfigurationError("--metrics-port needs prometheus_client: "
                                 "pip install 'mcastmember[prometheus]'") from None
    from ..metrics import serve

    if args.metrics_address is not None:
        address = args.metrics_address
    try:
        return serve(front, args.metrics_port, address, prefix=getattr(args, "metrics_prefix", None))
    except OSError as error:
        raise ConfigurationError(f"cannot serve metrics on {host_port(address, args.metrics_port)}: "
                                 f"{error.strerror or error}") from None
