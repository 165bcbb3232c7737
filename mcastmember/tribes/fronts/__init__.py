"""The Tribes fronts: the engine driven by real sockets and a real clock.

It owns the driver both fronts share (``driver``), the threaded front
(``service``: ``McastService``), the asyncio front (``aio``:
``AsyncMcastService``), the Tribes TCP channel listener for each
(``channel_listener``, ``channel_listener_aio``) and the threaded front's
verify connects (``verify_prober``). Fronts only move bytes and call the
engine: they may import every layer below and the runtime, never the tools
or the gossip wing.
"""
