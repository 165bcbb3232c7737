"""The gossip hot path: which matcher runs, and the ack template.

memberlist's most frequent messages (a ping to answer, an ack, the alive,
suspect and dead broadcasts each node hears retransmit-limit times) are
recognised by a byte-level matcher (:func:`match`, in ``_hot.pyx`` compiled
and ``_hot_py.py``, its pure-Python twin, which behave identically) instead
of the general msgpack decode, and a ping is answered with an ack built from
a pre-encoded template and the sequence number. Anything the matcher does
not recognise takes the general path. The compiled module also reads and
writes LZW (compressed packets), the twins of ``lzw.decompress_py`` and
``lzw.compress_py``.

The compiled matcher when it was built, else the twin, as the runtime's
chooser picks for the heartbeat kernel too: ``MCASTMEMBER_NO_EXTENSIONS=1``
forces the twin, and when the twin runs though nobody asked for it,
``FALLBACK`` says why (a mistake, a source folder or an extension that does
not load, also warns at import).
"""

from __future__ import annotations

from types import ModuleType

from ..._runtime import chooser
from . import _matcher_py as _hot_py
from . import msgpack_go
from .layout import MessageType

#: the one the engine takes unless told otherwise, and why it is the twin
#: when nobody asked for it (None: it is not, or the switch chose it)
DEFAULT: ModuleType
FALLBACK: str | None
DEFAULT, FALLBACK = chooser.choose(f"{__package__}._matcher", f"{__package__}._matcher_py")
_compiled: ModuleType | None = (DEFAULT if DEFAULT is not _hot_py
                                else chooser.compiled_if_built(f"{__package__}._matcher"))

#: every matcher this installation has (None: not built)
IMPLEMENTATIONS: dict[str, ModuleType | None] = {"compiled": _compiled, "python": _hot_py}
#: the compiled LZW reader and writer, when the compiled matcher is chosen
#: (their twins are lzw.decompress_py and lzw.compress_py)
COMPILED_LZW = _compiled.lzw_decompress if _compiled is not None and DEFAULT is _compiled else None
COMPILED_LZW_WRITER = _compiled.lzw_compress if _compiled is not None and DEFAULT is _compiled else None
#: the compiled LZW reader that reads a turn at a time (its twin is _hot_py.LzwReader)
COMPILED_LZW_READER = _compiled.LzwReader if _compiled is not None and DEFAULT is _compiled else None


def ack_prefix(payload: bytes) -> bytes:
    """An ack message up to its sequence number: the type byte, the map of
    two fields, Payload (nil when empty, as Go sends a nil slice) and the
    SeqNo key, in go-msgpack's sorted order."""
    return (bytes((MessageType.ACK, 0x82)) + msgpack_go.pack(b"Payload") + msgpack_go.pack(payload or None)
            + msgpack_go.pack(b"SeqNo"))
