"""The tools: programs built on the library.

It owns the ``mcast-demo`` command line (``cli``), its live member view
(``view``) and the network doctor (``doctor``). Tools may import every layer
below them (fronts, engine, discovery, transport, kernel, wire); nothing in
the library imports the tools except ``mcastmember.__main__``.
"""
