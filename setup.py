"""Builds the Cython extensions ``mcastmember.tribes.kernel._fast`` (the heartbeat kernel) and
``mcastmember.gossip.memberlist._matcher`` (the gossip hot path's matcher).

The heartbeat path is the product, so the extension is not optional by
default: when it cannot be built (no C compiler, no Python headers, no
Cython), the install stops with a message saying why and naming the switch
below. pip shows a build's output only when it fails, so a quiet fallback to
pure Python would go unseen.

MCASTMEMBER_NO_EXTENSIONS=1      build nothing: the pure-Python implementation,
                                 the same behaviour with a costlier heartbeat.
MCASTMEMBER_REQUIRE_EXTENSIONS=1 accepted for older scripts: the default now.

The extension is linked stripped (-s: about 240 KB instead of 1.4 MB of
symbols and debug information) unless the build asks for debug information
or a sanitizer: a -g flag or -fsanitize in CFLAGS or LDFLAGS, or
``build_ext --debug``.
"""

import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

SWITCH = "MCASTMEMBER_NO_EXTENSIONS=1"


def _flag(name):
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def _cannot_build(error):
    """The message a failed build ends with (SystemExit prints it last)."""
    return (f"mcastmember: could not build the compiled extensions (mcastmember.tribes.kernel._fast, mcastmember.gossip.memberlist._matcher): {error}\n"
            "It needs a C compiler and Python's headers (e.g. apt-get install gcc python3-dev).\n"
            "To install the pure-Python implementation instead (the same behaviour, a costlier\n"
            f"heartbeat path), set {SWITCH}: {SWITCH} pip install ...")


def _keeps_symbols(debug):
    """Whether this build asks for debug information or a sanitizer."""
    flags = (os.environ.get("CFLAGS", "") + " " + os.environ.get("LDFLAGS", "")).split()
    return debug or any(flag.startswith("-g") or flag.startswith("-fsanitize") for flag in flags)


class BuildExt(build_ext):
    """build_ext whose failure says what to do, and whose output is stripped."""

    def run(self):
        try:
            super().run()
        except Exception as error:  # compiler missing or failing
            raise SystemExit(_cannot_build(error)) from error

    def build_extension(self, ext):
        if not _keeps_symbols(self.debug) and self.compiler.compiler_type == "unix" \
                and sys.platform != "darwin":     # Apple's linker ignores -s
            ext.extra_link_args = [*ext.extra_link_args, "-s"]
        super().build_extension(ext)


def _extensions():
    if _flag("MCASTMEMBER_NO_EXTENSIONS"):
        return []
    try:
        from Cython.Build import cythonize
        return cythonize(
            [Extension("mcastmember.tribes.kernel._fast", ["mcastmember/tribes/kernel/_fast.pyx"],
                       extra_compile_args=["-O2"]),
             Extension("mcastmember.gossip.memberlist._matcher", ["mcastmember/gossip/memberlist/_matcher.pyx"],
                       extra_compile_args=["-O2"])],
            compiler_directives={"language_level": "3"},
            quiet=True,
        )
    except Exception as error:  # Cython missing, or it could not translate the module
        raise SystemExit(_cannot_build(error)) from error


setup(ext_modules=_extensions(), cmdclass={"build_ext": BuildExt})
