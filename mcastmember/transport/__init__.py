"""The transport layer: sockets and the host's network cards.

It owns opening, joining and configuring UDP sockets (``net``) and listing and
choosing interfaces (``interfaces``); it knows nothing of members or packets.
It may import the wire layer (for its errors) and nothing above it.
"""
