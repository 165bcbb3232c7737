"""The transport layer: sockets and the host's network cards.

It owns opening, joining and configuring UDP sockets (``net``), listing and
choosing interfaces (``interfaces``) and what every listening socket shares
(``listen``: connection shares per source, the accept back-off); it knows nothing of members or packets.
It may import the wire layer (for its errors) and nothing above it.
"""
