"""The engine layer: the sans-IO membership protocol.

It owns every decision and timer: the member value type and its packet
(``member``, ``packet``), the membership table (``table``), the failure
detector (``detector``), the engine that drives them on one clock
(``engine``), the events and statistics it reports (``events``, ``stats``),
the settings and the local member they build (``config``), the Tribes TCP
channel's connection state machine (``channel``) and a rate-limited log
(``ratelimit``). It may import the wire, kernel (``mcastmember._codec``,
``_fast``, ``_fast_py``), transport and discovery layers; never the fronts or
the tools.
"""
