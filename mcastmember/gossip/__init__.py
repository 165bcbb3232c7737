"""memberlist's gossip wire, as bytes only (sans-IO): the groundwork of issue 26.

This layer owns the bytes HashiCorp memberlist 0.2.x (under Serf 0.9.4) puts on
UDP and TCP, plus the label header of memberlist >= 0.3:

- :mod:`.layout`: every wire number (message types, sizes, versions), in one place;
- :mod:`.msgpack_go`: msgpack exactly as hashicorp/go-msgpack writes it;
- :mod:`.messages`: ping, indirect ping, ack, nack, suspect, alive, dead, err,
  push/pull (header, node states, user state), user-message header, compress;
- :mod:`.lzw`: Go's ``compress/lzw`` (LSB order, 8-bit literals), both ways;
- :mod:`.crypto`: AES-GCM with a keyring, encryption versions 0 and 1;
- :mod:`.label`: the label header (type 244);
- :mod:`.framing`: compound messages, the CRC header, compression wrapping,
  whole packets and TCP stream messages in and out.

The wire modules own no sockets, timers or membership decisions. Every parser
takes a :class:`Limits` and raises :class:`GossipWireError` (with a ``reason``)
on bad input. On top of them, still without I/O:

- :mod:`.engine`: the gossip engine (SWIM with Lifeguard as memberlist does
  it), with :mod:`.settings`, :mod:`.state` (the node table),
  :mod:`.awareness`, :mod:`.suspicion`, :mod:`.broadcasts` (the
  transmit-limited queue) and :mod:`.events`.

It needs the ``gossip`` extra (``pip install 'mcastmember[gossip]'``: msgpack and
cryptography) and is never imported by ``import mcastmember``.
"""

from .errors import GossipWireError, Truncated
from .limits import Limits

__all__ = ["GossipWireError", "Limits", "Truncated"]
