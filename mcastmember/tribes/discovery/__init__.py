"""The Tribes discovery layer: where the peers are.

It owns the unicast peer list and its parsing (``peers``) and DNS look-ups of
peer names (``resolver``, dnspython imported lazily). It may import the
layers below it (wire, kernel, net) and the runtime, nothing above.
"""
