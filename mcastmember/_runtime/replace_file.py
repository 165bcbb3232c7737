"""Writing a small file that a restart reads back (a gossip keyring file, a
tags file) so that a crash or a full disk leaves the old content or the new,
never half of one: the text goes to a new file beside it, created ``0600``
(the old file's group bits kept, never others'), is flushed to the disk, and
then takes the file's name in one rename."""

from __future__ import annotations

import os
import stat
import tempfile


def replace_file(path: str | os.PathLike[str], text: str, prefix: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` in one rename; the temporary file
    is named ``prefix`` and something random, in the same folder (OSError if
    the folder refuses; the temporary file is removed then)."""
    target = os.fspath(path)
    try:
        old = stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        old = 0o600
    mode = (old & 0o660) | 0o600
    folder = os.path.dirname(os.path.abspath(target))
    fd, temporary = tempfile.mkstemp(prefix=prefix, dir=folder)   # created 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fchmod(out.fileno(), mode)
            os.fsync(out.fileno())
        os.replace(temporary, target)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


__all__ = ["replace_file"]
