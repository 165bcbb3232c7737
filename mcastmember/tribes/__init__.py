"""The Tribes wing: membership by heartbeats in Apache Tomcat Tribes'
packet, over multicast, unicast peers or DNS.

Layers, lowest first; each imports only those below it and the shared
runtime (``mcastmember._runtime``), never the gossip wing:

- ``wire``: the packet's bytes (layout, schema, trailer, Java serialization);
- ``kernel``: the compiled heartbeat kernel, its pure-Python twin, the choice;
- ``net``: the host's network cards;
- ``discovery``: unicast peer lists and DNS;
- ``engine``: the sans-IO protocol (table, detector, engine, settings, channel);
- ``fronts``: the engine driven by sockets and a clock (``McastService``,
  ``AsyncMcastService``, the Tribes TCP listener, the verify prober).
"""
