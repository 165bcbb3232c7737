"""The Tribes engine layer: the sans-IO membership protocol.

It owns every decision and timer: the member value type and its packet
(``member``, ``packet``), the membership table (``table``), the failure
detector (``detector``), the engine that drives them on one clock
(``engine``), the events and statistics it reports (``events``, ``stats``),
the settings and the local member they build (``config``, ``settings``), the
Tribes TCP channel's connection state machine (``channel``), the data path
(``datapath``) and verify probes (``verify``). It may import the wire,
kernel, net and discovery layers and the runtime; never the fronts, the
tools or the gossip wing.
"""
