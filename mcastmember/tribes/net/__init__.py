"""The Tribes net layer: the host's network cards.

It owns listing and choosing interfaces for multicast (``interfaces``); the
sockets themselves are the shared runtime's (``mcastmember._runtime.net``).
It may import the wire and kernel layers, nothing above.
"""
