"""The fronts: the engine driven by real sockets and a real clock.

It owns the driver both fronts share (``driver``), the threaded front
(``service``: ``McastService``), the asyncio front (``aio``:
``AsyncMembership``), the Tribes TCP listener for each
(``tribes_listener``, ``tribes_listener_aio``), the threaded front's verify
connects (``verify_prober``) and the Prometheus collector and its HTTP
server (``metrics``, ``metrics_http``). Fronts only move bytes and call the engine:
they may import every layer below (engine, discovery, transport, kernel,
wire), never the tools.
"""
