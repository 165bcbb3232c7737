"""The heartbeat codec: the compiled ``_fast`` module when it was built,
else its pure-Python twin ``_fast_py``, as the runtime's chooser picks
(``MCASTMEMBER_NO_EXTENSIONS=1`` forces the twin). When the twin runs though
nobody asked for it, ``FALLBACK`` says why in a sentence (the demo and the
doctor print it); a mistake (a source folder, an extension that does not
load) also warns at import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._runtime import chooser

# Kept for who asks the codec (the test suite's guard).
_FORCE_PYTHON = chooser.FORCE_PYTHON
source_tree = chooser.source_tree

# Why the pure-Python twin runs when nobody asked for it (None: it does not,
# or MCASTMEMBER_NO_EXTENSIONS=1 asked for it).
FALLBACK: str | None = None

if TYPE_CHECKING:
    # The checkers see the compiled module's stub (_fast.pyi); the twin
    # agrees with it name for name (tests/tribes/test_kernel_stub.py).
    from . import _fast as impl
else:
    impl, FALLBACK = chooser.choose(f"{__package__}._fast", f"{__package__}._fast_py")

__all__ = ["IMPLEMENTATION", "FALLBACK", "check", "parse", "identity", "encode",
           "HeartbeatPacket", "MemberIndex", "Targets", "impl"]

IMPLEMENTATION = impl.IMPLEMENTATION
check = impl.check
parse = impl.parse
identity = impl.identity
encode = impl.encode
HeartbeatPacket = impl.HeartbeatPacket
MemberIndex = impl.MemberIndex
Targets = impl.Targets
