"""The tools: programs built on the library.

It owns the ``mcast-demo`` command line (``cli``, with the gossip commands in
``gossip_cli``), the live member views (``view``, ``gossip_view``) and the
network doctor (``doctor``). Tools may import both wings and the runtime;
nothing in the library imports the tools except ``mcastmember.__main__``.
"""
