"""The one place that picks the codec implementation.

The compiled ``_fast`` module when it was built, else the pure-Python twin
``_fast_py``. ``MCASTMEMBER_NO_EXTENSIONS=1`` forces the pure-Python twin.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

_FORCE_PYTHON = os.environ.get("MCASTMEMBER_NO_EXTENSIONS", "").strip().lower() in (
    "1", "true", "yes", "on")

if TYPE_CHECKING:
    # The checkers see the compiled module's stub (_fast.pyi); the twin
    # agrees with it name for name (tests/test_stub.py).
    from . import _fast as impl
elif _FORCE_PYTHON:
    from . import _fast_py as impl
else:
    try:
        from . import _fast as impl
    except ImportError:  # not built: no compiler at install time, or a source checkout
        from . import _fast_py as impl

__all__ = ["IMPLEMENTATION", "check", "parse", "identity", "encode", "HeartbeatPacket",
           "MemberIndex", "Targets", "impl"]

IMPLEMENTATION = impl.IMPLEMENTATION
check = impl.check
parse = impl.parse
identity = impl.identity
encode = impl.encode
HeartbeatPacket = impl.HeartbeatPacket
MemberIndex = impl.MemberIndex
Targets = impl.Targets
