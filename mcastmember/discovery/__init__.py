"""The discovery layer: where the peers are.

It owns the unicast peer list and its parsing (``peers``) and DNS look-ups of
peer names (``resolver``, dnspython imported lazily). It may import the wire
layer and the transport layer, nothing above.
"""
