"""The one place that picks the codec implementation.

The compiled ``_fast`` module when it was built, else the pure-Python twin
``_fast_py``. ``MCASTMEMBER_NO_EXTENSIONS=1`` forces the pure-Python twin.

When the twin runs though nobody asked for it, ``FALLBACK`` says why in a
sentence (the demo and the doctor print it), and two cases warn at import
(RuntimeWarning), as they are mistakes rather than choices: the package was
imported from its source folder, where the extension is not built (``python``
or ``python -m pytest`` in a checkout puts that folder first on sys.path),
or the extension is installed but does not load.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

_FORCE_PYTHON = os.environ.get("MCASTMEMBER_NO_EXTENSIONS", "").strip().lower() in (
    "1", "true", "yes", "on")

_SWITCH = "MCASTMEMBER_NO_EXTENSIONS=1"

# Why the pure-Python twin runs when nobody asked for it (None: it does not,
# or MCASTMEMBER_NO_EXTENSIONS=1 asked for it).
FALLBACK: str | None = None


def source_tree() -> str | None:
    """The source checkout this package is imported from (the folder that
    holds setup.py beside it), else None."""
    package = os.path.abspath(__file__)
    for _ in range(3):      # codec.py in tribes/kernel/ of the package
        package = os.path.dirname(package)
    root = os.path.dirname(package)
    return root if os.path.isfile(os.path.join(root, "setup.py")) else None


def _fallback(error: ImportError) -> tuple[str, bool]:
    """Why the compiled module is missing, and whether that is a mistake
    worth a warning at import."""
    from importlib.util import find_spec
    if find_spec(f"{__package__}._fast") is not None:
        return (f"the compiled extension is installed but does not load ({error}): reinstall "
                f"mcastmember, or set {_SWITCH} to choose pure Python"), True
    tree = source_tree()
    if tree is not None:
        return (f"mcastmember is imported from its source folder {tree}, where the compiled "
                "extension is not built: install it (pip install .) and run from another "
                "folder, build it in place (python setup.py build_ext --inplace), or set "
                f"{_SWITCH} to choose pure Python"), True
    return ("the compiled extension is not installed (the package was built without it): "
            "reinstall mcastmember where a C compiler is available, or set "
            f"{_SWITCH} to choose pure Python"), False


if TYPE_CHECKING:
    # The checkers see the compiled module's stub (_fast.pyi); the twin
    # agrees with it name for name (tests/test_stub.py).
    from . import _fast as impl
elif _FORCE_PYTHON:
    from . import _fast_py as impl
else:
    try:
        from . import _fast as impl
    except ImportError as error:  # not built, or built but broken
        from . import _fast_py as impl
        _why, _warn = _fallback(error)
        FALLBACK = f"the pure-Python implementation runs: {_why}"
        if _warn:
            import warnings
            warnings.warn(f"mcastmember: {FALLBACK}", RuntimeWarning, stacklevel=2)

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
