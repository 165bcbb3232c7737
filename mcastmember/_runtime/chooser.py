"""The one place that picks between a compiled module and its pure-Python
twin, for both protocols (the Tribes heartbeat kernel, the gossip matcher).

The compiled module when it was built, else the twin.
``MCASTMEMBER_NO_EXTENSIONS=1`` (one switch for every compiled module)
forces the twins. When a twin runs though nobody asked for it, the choice
says why in a sentence (``fallback``: the demo and the doctor print it), and
two cases warn at import (RuntimeWarning), as they are mistakes rather than
choices: the package was imported from its source folder, where the
extensions are not built (``python`` or ``python -m pytest`` in a checkout
puts that folder first on sys.path), or an extension is installed but does
not load.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from types import ModuleType

SWITCH = "MCASTMEMBER_NO_EXTENSIONS=1"

#: Whether the environment asks for the pure-Python twins.
FORCE_PYTHON = os.environ.get("MCASTMEMBER_NO_EXTENSIONS", "").strip().lower() in ("1", "true", "yes", "on")


class Implementation(NamedTuple):
    """The module that runs, and why the twin runs when nobody asked for it
    (None: the compiled one runs, or the switch chose the twin)."""

    module: ModuleType
    fallback: str | None


def source_tree() -> str | None:
    """The source checkout this package is imported from (the folder that
    holds setup.py beside it), else None."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))     # _runtime/ in the package
    root = os.path.dirname(package)
    return root if os.path.isfile(os.path.join(root, "setup.py")) else None


def choose(compiled: str, pure: str) -> Implementation:
    """The module named ``compiled`` (absolute), else the one named
    ``pure``, explained and, when a mistake, warned about."""
    if FORCE_PYTHON:
        return Implementation(importlib.import_module(pure), None)
    try:
        return Implementation(importlib.import_module(compiled), None)
    except ImportError as error:     # not built, or built but broken
        module = importlib.import_module(pure)
        why, warn = _fallback(compiled, error)
        fallback = f"the pure-Python implementation runs: {why}"
        if warn:
            import warnings
            warnings.warn(f"mcastmember: {fallback}", RuntimeWarning, stacklevel=3)
        return Implementation(module, fallback)


def compiled_if_built(compiled: str) -> ModuleType | None:
    """The compiled module whatever the switch says (its parity tests and
    benchmarks compare both), or None when it is not built or does not load."""
    try:
        return importlib.import_module(compiled)
    except ImportError:
        return None


def _fallback(compiled: str, error: ImportError) -> tuple[str, bool]:
    """Why the compiled module is missing, and whether that is a mistake
    worth a warning at import."""
    from importlib.util import find_spec
    if find_spec(compiled) is not None:
        return (f"the compiled extension is installed but does not load ({error}): reinstall "
                f"mcastmember, or set {SWITCH} to choose pure Python"), True
    tree = source_tree()
    if tree is not None:
        return (f"mcastmember is imported from its source folder {tree}, where the compiled "
                "extension is not built: install it (pip install .) and run from another "
                "folder, build it in place (python setup.py build_ext --inplace), or set "
                f"{SWITCH} to choose pure Python"), True
    return ("the compiled extension is not installed (the package was built without it): "
            "reinstall mcastmember where a C compiler is available, or set "
            f"{SWITCH} to choose pure Python"), False
