"""Settings declared once, whatever the protocol: the machinery both wings'
declarations use (``tribes/engine/settings.py``, ``gossip/fronts/settings.py``).

A declaration is a TypedDict (``total=False``) whose fields are
``Annotated[type, Setting(...)]``: the type is what type checkers see for a
front's ``**settings`` (PEP 692), the :class:`Setting` its default, its
description and how the docs show its default. :class:`Declaration` reads
it once and gives what every place that lists the settings needs: the
defaults, the keyword parameters ``help()`` and ``inspect.signature`` show
(``takes_settings``), the list for the docstrings (``settings_doc``), the
refusal of a keyword that is no setting, with the likeliest one meant
(``refuse_unknown``), and the check of a value against its declared type
(``check``), each error a ConfigurationError naming the setting.

A declaring module must not use ``from __future__ import annotations``: the
annotations are evaluated as the class is made, so their metadata is there
to read.
"""

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypeVar, Union, get_args, get_origin, \
    get_type_hints

from .errors import ConfigurationError, UnknownSetting

if TYPE_CHECKING:
    import inspect

_Class = TypeVar("_Class")


class Setting(NamedTuple):
    """One setting's metadata: its ``default``, what it is (``doc``, a
    phrase for the docstrings and the docs' tables), what a default of None
    stands for (``otherwise``), and ``ms``: a time in milliseconds (the
    heartbeat settings, as Tomcat's ``server.xml`` has them; their engine
    gets seconds)."""

    default: object
    doc: str
    otherwise: str = ""
    ms: bool = False

    def shown(self) -> str:
        """The default as the docstrings and the docs' tables show it."""
        value = self.default
        if self.otherwise:
            return self.otherwise
        return repr(value).replace("'", '"') if isinstance(value, (str, bytes)) else str(value)


class Declaration:
    """The settings a TypedDict declares (see the module), read once.

    ``heading`` opens the docstrings' list."""

    def __init__(self, declared: type, heading: str) -> None:
        self.declared = declared
        self.heading = heading
        hints = get_type_hints(declared, include_extras=True)
        self.kinds: dict[str, object] = {name: get_args(hint)[0] for name, hint in hints.items()}
        self.specs: dict[str, Setting] = {name: hint.__metadata__[0] for name, hint in hints.items()}
        self._docs: dict[tuple[tuple[str, object], ...], str] = {}

    def __contains__(self, name: object) -> bool:
        return name in self.specs

    def default(self, name: str) -> Any:
        """The default of the setting ``name`` (KeyError for no setting)."""
        return self.specs[name].default

    def with_defaults(self, settings: Mapping[str, object]) -> dict[str, Any]:
        """Every setting: those given, the others at their default."""
        return {name: settings.get(name, spec.default) for name, spec in self.specs.items()}

    def settings_doc(self, defaults: Mapping[str, object] | None = None) -> str:
        """The list of settings for a docstring, with their defaults (made
        once: each class that takes the settings shows it); ``defaults``: a
        class's own, where the declaration leaves the default to it."""
        key = tuple(sorted((defaults or {}).items()))
        doc = self._docs.get(key)
        if doc is None:
            import textwrap

            lines = [self.heading, ""]
            for name, spec in self.specs.items():
                shown = repr(defaults[name]) if defaults and name in defaults else spec.shown()
                lines.extend(textwrap.wrap(f"- ``{name}``: {spec.doc} (default: {shown}).",
                                           76, subsequent_indent="  "))
            doc = self._docs[key] = "\n".join(lines)
        return doc

    def markdown_table(self) -> list[str]:
        """The settings as a Markdown table (a docs page's), line by line:
        each one's name, default and description, in the declaration's order."""
        lines = ["| setting | default | meaning |", "| --- | --- | --- |"]
        for name, spec in self.specs.items():
            cells = (f"`{name}`", spec.shown(), spec.doc)
            lines.append("| " + " | ".join(cell.replace("``", "`").replace("|", "\\|")
                                           for cell in cells) + " |")
        return lines

    def parameters(self, defaults: Mapping[str, object] | None = None) -> "list[inspect.Parameter]":
        """The settings as keyword-only parameters with their defaults (a
        class's own ``defaults`` first), and their types as text, for
        ``inspect.signature`` and ``help()``."""
        import inspect

        own = defaults or {}
        return [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=own.get(name, spec.default),
                                  annotation=type_text(self.kinds[name]))
                for name, spec in self.specs.items()]

    def takes_settings(self, cls: type[_Class], defaults: Mapping[str, object] | None = None) -> type[_Class]:
        """Class decorator of a class whose ``__init__`` takes ``**settings``:
        ``help()`` and ``inspect.signature`` then show every setting with its
        default (the class's own ``defaults`` where it has them), and its
        docstring lists them."""
        import inspect

        own = inspect.signature(cls.__init__)
        params = [p for p in own.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
        # setattr: __signature__ is no attribute of a function's type, for the checkers.
        setattr(cls.__init__, "__signature__", own.replace(parameters=params + self.parameters(defaults)))
        if cls.__doc__ is not None:     # python -OO strips docstrings
            cls.__doc__ = cls.__doc__.rstrip() + "\n\n" + _indent(self.settings_doc(defaults), "    ")
        return cls

    def refuse_unknown(self, front: str, given: Iterable[str], known: Iterable[str] = (),
                       retired: Mapping[str, str] | None = None) -> None:
        """UnknownSetting for the first keyword of ``given`` that is no
        setting, named with ``front`` (the class the user called) and the
        likeliest one meant among the settings and ``known`` (its other
        parameters); a ``retired`` keyword gets its own sentence instead."""
        unknown = [name for name in given if name not in self.specs]
        if not unknown:
            return
        if retired and unknown[0] in retired:
            raise UnknownSetting(f"{front}() got an unexpected keyword argument {unknown[0]!r}: "
                                 f"{retired[unknown[0]]}")
        import difflib

        close = difflib.get_close_matches(unknown[0], [*known, *self.specs], n=1)
        raise UnknownSetting(f"{front}() got an unexpected keyword argument {unknown[0]!r}"
                             + (f". Did you mean {close[0]!r}?" if close else ""))

    def check(self, name: str, value: object) -> Any:
        """``value`` of the setting ``name`` if it is of the declared type
        (an iterable declared as a tuple made one), else a
        ConfigurationError naming the setting: ``probe_interval must be a
        number, not '1s'``."""
        value, wrong = self._typed(self.kinds[name], value)
        if wrong:
            raise ConfigurationError(f"{name} must be {wrong}, not {value!r}")
        return value

    def _typed(self, kind: object, value: object) -> tuple[Any, str]:
        """(value, "") when ``value`` is a ``kind``, else (value, what a
        ``kind`` is, in words)."""
        origin, args = get_origin(kind), get_args(kind)
        if origin is Union:
            wants = []
            for arg in args:
                typed, wrong = self._typed(arg, value)
                if not wrong:
                    return typed, ""
                wants.append(wrong)
            return value, " or ".join(dict.fromkeys(wants))
        if origin is Literal:
            return value, "" if value in args and type(value) in map(type, args) else \
                "one of " + ", ".join(repr(arg) for arg in args)
        if origin in (tuple, list):      # tuple[X, ...], list[X]: any iterable of X but a string
            if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
                return value, f"a list of {_words(args[0])}"
            items = tuple(value)
            if any(self._typed(args[0], item)[1] for item in items):
                return value, f"a list of {_words(args[0])}"
            return items, ""
        if origin is not None and isinstance(origin, type) and issubclass(origin, Mapping):
            return value, "" if isinstance(value, Mapping) else "a mapping"
        return value, "" if _is(kind, value) else _words(kind)


def _is(kind: object, value: object) -> bool:
    if kind is type(None):
        return value is None
    if kind is bool:
        return isinstance(value, bool)
    if kind is float:                      # a whole number is a number
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    origin = get_origin(kind)
    if origin is not None:                 # os.PathLike[str]
        kind = origin
    return isinstance(kind, type) and isinstance(value, kind)


_WORDS: dict[object, str] = {bool: "True or False", int: "a whole number", float: "a number", bytes: "bytes",
                              str: "text", type(None): "None", os.PathLike: "a path"}


def _words(kind: object) -> str:
    """What a value of ``kind`` is, in words, for an error message."""
    kind = get_origin(kind) or kind
    words = _WORDS.get(kind)
    if words is not None:
        return words
    return f"a {getattr(kind, '__name__', kind)}"


def type_text(kind: object) -> str:
    """A type as a declaration spells it (``int | None``)."""
    if kind is type(None):
        return "None"
    args = get_args(kind)
    origin = get_origin(kind)
    if origin is Union:
        return " | ".join(type_text(arg) for arg in args)
    if origin is Literal:
        return f"Literal[{', '.join(repr(arg).replace(chr(39), chr(34)) for arg in args)}]"
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join('...' if a is Ellipsis else type_text(a) for a in args)}]"
    return getattr(kind, "__qualname__", str(kind))


def _indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line if line else line for line in text.splitlines())


__all__ = ["Declaration", "Setting", "type_text"]
