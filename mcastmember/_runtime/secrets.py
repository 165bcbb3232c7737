"""Reading a file of secrets, the same for both protocols: the Tribes key
file and the gossip keyring file are refused when every user of the host may
read or write them, and warned about when their group may."""

from __future__ import annotations

import logging
import os
import stat

from .errors import ConfigurationError

log = logging.getLogger("mcastmember")


def read_secret_file(path: str | os.PathLike[str], what: str, max_bytes: int) -> str:
    """The text of a file of secrets (a key file, a gossip keyring file):
    a regular file of at most ``max_bytes``, UTF-8, that not every user of
    the host may read or write (ConfigurationError, naming it ``what path``);
    one its group may is warned about."""
    try:
        # Non-blocking: opening a FIFO must not wait for a writer.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        raise ConfigurationError(f"{what} {path}: {error.strerror}") from None
    with os.fdopen(fd, "rb") as source:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigurationError(f"{what} {path}: not a regular file")
        if info.st_size > max_bytes:
            raise ConfigurationError(f"{what} {path}: {info.st_size} bytes, more than a "
                                     f"{what}'s {max_bytes}")
        try:
            data = source.read(max_bytes + 1)
        except OSError as error:
            raise ConfigurationError(f"{what} {path}: {error.strerror}") from None
    if len(data) > max_bytes:      # grew since
        raise ConfigurationError(f"{what} {path}: more than {max_bytes} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigurationError(f"{what} {path}: not a text file") from None
    _check_mode(path, info.st_mode, what)
    return text


def _check_mode(path: str | os.PathLike[str], mode: int, what: str) -> None:
    """Who else may read the file. Whoever reads it can forge members
    and goodbyes, so a file every user of the host may read or write is
    refused (as ssh refuses such a private key); one its group may is
    warned about, as the way to share it with a service's group (what a
    Kubernetes Secret with fsGroup gives: 0440)."""
    if mode & (stat.S_IROTH | stat.S_IWOTH):
        raise ConfigurationError(f"{what} {path} can be read or written by every user of "
                                 f"this host (mode {stat.S_IMODE(mode):03o}): chmod 600 it")
    if mode & (stat.S_IRGRP | stat.S_IWGRP):
        log.warning("%s %s can be read or written by its group (mode %03o): every user "
                    "in it can forge members; chmod 600 it unless the group is this "
                    "service's own", what, path, stat.S_IMODE(mode))
