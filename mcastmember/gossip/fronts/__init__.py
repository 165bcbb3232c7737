"""The gossip fronts: a Serf node driven by real sockets and a real clock.

The driver both share (``driver``: ``GossipFront``), the threaded service
(``service``: ``SerfService``), the asyncio one (``aio``:
``AsyncSerfService``), their settings (``settings``) and the keyring file
(``keyring_file``). Fronts only move bytes and wait; every decision is the
engine's. They may import the gossip layers below and the shared runtime.
"""
