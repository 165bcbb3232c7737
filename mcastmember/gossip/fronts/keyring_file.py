"""A gossip member's keyring file, as Serf's agent keeps it (``-keyring-file``).

The file is a JSON list of base64 keys, the primary first (Serf's format, so
one file serves a Serf agent and a Python member alike). It is read at start
and written again whenever ``serf keys -install/-use/-remove`` changes the
keyring, so that a restarted member comes back with the keys the cluster
uses now. Both gossip fronts use it.

Whoever reads the file can read and forge the cluster's traffic: a file every
user of the host may read or write is refused (as the heartbeat key file is,
see docs/security.md), one its group may is warned about. A rewrite goes to a
new file created ``0600`` beside it (the old file's group bits kept, never
others'), then takes its name in one rename: a crash leaves the old keyring
or the new one, never half of one.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from collections.abc import Sequence

from ..memberlist.layout import KEY_SIZES
from ..._runtime.replace_file import replace_file
from ..._runtime.secrets import read_secret_file
from ..._runtime.errors import ConfigurationError

#: a keyring file larger than this is refused (Serf's keyrings hold a few keys)
MAX_KEYRING_FILE_BYTES = 64 * 1024
#: and so is one with more keys than this
MAX_KEYS = 64

WHAT = "keyring file"


def decode_key(text: str) -> bytes:
    """One base64 key; ValueError with what is wrong, said of the key
    ("is not base64", "is 9 bytes, not 16, 24 or 32"), never its text."""
    try:
        key = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("is not base64") from None
    if len(key) not in KEY_SIZES:
        raise ValueError(f"is {len(key)} bytes, not 16, 24 or 32")
    return key


def load_keyring(path: str | os.PathLike[str]) -> tuple[bytes, ...]:
    """The keys of a keyring file, the primary first (ConfigurationError naming the file)."""
    text = read_secret_file(path, WHAT, MAX_KEYRING_FILE_BYTES)
    try:
        listed = json.loads(text)
    except ValueError:
        listed = None
    if not isinstance(listed, list) or not all(isinstance(k, str) for k in listed):
        raise ConfigurationError(f"{WHAT} {path}: not a JSON list of base64 keys, the primary first")
    if not listed:
        raise ConfigurationError(f"{WHAT} {path}: no keys")
    if len(listed) > MAX_KEYS:
        raise ConfigurationError(f"{WHAT} {path}: {len(listed)} keys, more than {MAX_KEYS}")
    keys: list[bytes] = []
    for number, item in enumerate(listed, 1):
        try:
            key = decode_key(item)
        except ValueError as error:
            raise ConfigurationError(f"{WHAT} {path}: key {number} {error}") from None
        if key not in keys:
            keys.append(key)
    return tuple(keys)


def save_keyring(path: str | os.PathLike[str], keys: Sequence[bytes]) -> None:
    """Write ``keys`` (the primary first) to the keyring file, as Serf's
    agent writes it, in one rename (OSError if the folder refuses)."""
    text = json.dumps([base64.b64encode(key).decode("ascii") for key in keys], indent=2) + "\n"
    replace_file(path, text, ".keyring-")


__all__ = ["MAX_KEYRING_FILE_BYTES", "decode_key", "load_keyring", "save_keyring"]
