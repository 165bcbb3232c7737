"""The one place that picks the codec implementation.

The compiled ``_fast`` module when it was built, else the pure-Python twin
``_fast_py``. ``MCASTMEMBER_NO_EXTENSIONS=1`` forces the pure-Python twin.
"""

import os

_FORCE_PYTHON = os.environ.get("MCASTMEMBER_NO_EXTENSIONS", "").strip().lower() in (
    "1", "true", "yes", "on")

if _FORCE_PYTHON:
    from . import _fast_py as impl
else:
    try:
        from . import _fast as impl
    except ImportError:  # not built: no compiler at install time, or a source checkout
        from . import _fast_py as impl

IMPLEMENTATION = impl.IMPLEMENTATION
check = impl.check
parse = impl.parse
identity = impl.identity
encode = impl.encode
HeartbeatPacket = impl.HeartbeatPacket
MemberIndex = impl.MemberIndex
