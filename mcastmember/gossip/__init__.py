"""The gossip wing: membership by SWIM gossip (with Lifeguard) in HashiCorp
memberlist's wire, and Serf's layer on top, so a Python service is a member
of a real Serf cluster.

Layers, lowest first; each imports only those below it and the shared
runtime (``mcastmember._runtime``), never the Tribes wing:

- ``memberlist``: memberlist's wire (as go-msgpack writes it), its matcher of
  the most frequent messages (compiled, with a pure-Python twin) and the
  sans-IO gossip engine;
- ``serf``: Serf's wire and rules on top (tags, intents, user events,
  queries, coordinates, key management), sans-IO: ``SerfNode``;
- ``fronts``: the node driven by sockets and a clock (``SerfService``,
  ``AsyncSerfService``), their settings and the keyring file.

It needs the ``gossip`` extra (``pip install 'mcastmember[gossip]'``:
msgpack, cryptography and google-re2) and is never imported by
``import mcastmember``.
"""

from .memberlist.errors import GossipWireError, Truncated
from .memberlist.limits import Limits

__all__ = ["GossipWireError", "Limits", "Truncated"]
