"""A gossip member's tags file, as Serf's agent keeps it (``-tags-file``).

The file is a JSON object of tag names to values (Serf's format, so one file
serves a Serf agent and a Python member alike). It is read at start and
written again whenever the member's tags change (``set_tags``), so that a
restarted member comes back with the tags it last had. A missing file is no
error: the member starts with no tags and the first change creates it.

Unlike the agent, which writes the file in place, a rewrite takes the file's
name in one rename (see :mod:`mcastmember._runtime.replace_file`): a crash
leaves the old tags or the new ones, never a half-written object that would
stop the next start. Created ``0600``, as the agent does, in case the tags
say more than the cluster should show others.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping

from ..._runtime.errors import ConfigurationError
from ..._runtime.replace_file import replace_file

#: a tags file larger than this is refused (the tags must fit memberlist's 512-byte node meta)
MAX_TAGS_FILE_BYTES = 64 * 1024

WHAT = "tags file"


def load_tags(path: str | os.PathLike[str]) -> dict[str, str]:
    """The tags in a tags file; none when it does not exist yet
    (ConfigurationError naming the file when it cannot be read or is not a
    JSON object of strings)."""
    try:
        # Non-blocking: opening a FIFO must not wait for a writer.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return {}
    except OSError as error:
        raise ConfigurationError(f"{WHAT} {path}: cannot read it ({error.strerror or error})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ConfigurationError(f"{WHAT} {path}: not a regular file")
    with os.fdopen(fd, "rb") as source:
        try:
            data = source.read(MAX_TAGS_FILE_BYTES + 1)
        except OSError as error:
            raise ConfigurationError(f"{WHAT} {path}: cannot read it ({error.strerror or error})") from None
    if len(data) > MAX_TAGS_FILE_BYTES:
        raise ConfigurationError(f"{WHAT} {path}: more than {MAX_TAGS_FILE_BYTES} bytes")
    try:
        tags = json.loads(data.decode("utf-8"))
    except ValueError:          # UnicodeDecodeError and JSONDecodeError both
        tags = None
    if not isinstance(tags, dict) or not all(isinstance(v, str) for v in tags.values()):
        raise ConfigurationError(f"{WHAT} {path}: not a JSON object of tag names to text values "
                                 '(as {"role": "web"})')
    return tags


def save_tags(path: str | os.PathLike[str], tags: Mapping[str, str]) -> None:
    """Write ``tags`` to the tags file in one rename (OSError if the folder refuses)."""
    replace_file(path, json.dumps(dict(tags), indent=2, sort_keys=True) + "\n", ".tags-")


__all__ = ["MAX_TAGS_FILE_BYTES", "load_tags", "save_tags"]
