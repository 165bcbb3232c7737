"""Builds the optional Cython extension ``mcastmember._fast``.

MCASTMEMBER_NO_EXTENSIONS=1      skip it: pure Python only.
MCASTMEMBER_REQUIRE_EXTENSIONS=1 a failed build is an error instead of a
                                 fallback to pure Python.
Otherwise a missing compiler or Cython failure installs the pure-Python twin
and says so.
"""

import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


def _flag(name):
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


NO_EXTENSIONS = _flag("MCASTMEMBER_NO_EXTENSIONS")
REQUIRE_EXTENSIONS = _flag("MCASTMEMBER_REQUIRE_EXTENSIONS")


def _warn_fallback(error):
    message = ("mcastmember: could not build the compiled extension "
               f"({error}); installing the pure-Python implementation. "
               "Set MCASTMEMBER_REQUIRE_EXTENSIONS=1 to make this an error.")
    sys.stderr.write("\n" + "*" * 72 + "\n" + message + "\n" + "*" * 72 + "\n")


class OptionalBuildExt(build_ext):
    """build_ext that falls back to pure Python unless the extension is required."""

    def run(self):
        try:
            super().run()
        except Exception as error:  # compiler missing, Cython failure...
            if REQUIRE_EXTENSIONS:
                raise
            _warn_fallback(error)

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as error:
            if REQUIRE_EXTENSIONS:
                raise
            # An extension left by an earlier build in this tree would be
            # installed as if this build had worked: remove it.
            stale = self.get_ext_fullpath(ext.name)
            if os.path.exists(stale):
                os.remove(stale)
            _warn_fallback(error)


def _extensions():
    if NO_EXTENSIONS:
        return []
    try:
        from Cython.Build import cythonize
    except ImportError as error:
        if REQUIRE_EXTENSIONS:
            raise
        _warn_fallback(error)
        return []
    try:
        return cythonize(
            [Extension("mcastmember._fast", ["mcastmember/_fast.pyx"],
                       extra_compile_args=["-O2"])],
            compiler_directives={"language_level": "3"},
            quiet=True,
        )
    except Exception as error:  # Cython could not translate the module
        if REQUIRE_EXTENSIONS:
            raise
        _warn_fallback(error)
        return []


setup(ext_modules=_extensions(), cmdclass={"build_ext": OptionalBuildExt})
