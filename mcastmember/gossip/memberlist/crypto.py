"""AES-GCM with a keyring, as memberlist's security.go and keyring.go do it.

An encrypted payload is: version byte, 12-byte nonce, then AES-GCM's
ciphertext and 16-byte tag. Version 0 (protocol 1 peers) PKCS#7-pads the
plaintext to the AES block first; version 1 does not. The key's length picks
AES-128/192/256. The keyring's first key is the primary: it encrypts; every key
is tried on receive, so keys can be rotated across a running cluster.

Associated data (the GCM "data" argument), as net.go passes it:

- packets: none in 0.2.x; the packet's label in memberlist >= 0.3 (empty
  without a label, which is the same as none);
- streams: the 5-byte encrypt header (type 10, big-endian uint32 length), then
  the stream's label (>= 0.3).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from .errors import GossipWireError, Truncated
from .layout import (AES_BLOCK_SIZE, ENCRYPTION_VERSION_MAX, ENCRYPTION_VERSION_PADDED,
                     ENCRYPTION_VERSION_SIZE, KEY_SIZES, NONCE_SIZE, STREAM_ENCRYPT_HEADER_SIZE,
                     TAG_SIZE, MessageType)
from .limits import Limits


def validate_key(key: bytes) -> None:
    """memberlist's ValidateKey: 16, 24 or 32 bytes."""
    if len(key) not in KEY_SIZES:
        raise ValueError(f"an encryption key must be 16, 24 or 32 bytes, not {len(key)}")


class Keyring:
    """Keys in memberlist's order: the primary first, then the others as added."""

    def __init__(self, keys: Iterable[bytes] = (), primary: bytes | None = None):
        self._keys: list[bytes] = []
        keys = list(keys)
        if primary is None and keys:
            primary = keys[0]
        if primary is not None:
            self.add_key(primary)
            self.use_key(primary)
        for key in keys:
            self.add_key(key)

    @property
    def keys(self) -> tuple[bytes, ...]:
        return tuple(self._keys)

    @property
    def primary_key(self) -> bytes:
        if not self._keys:
            raise ValueError("the keyring is empty")
        return self._keys[0]

    def add_key(self, key: bytes) -> None:
        """Install a key for decryption (no-op if present)."""
        validate_key(key)
        if key not in self._keys:
            self._keys.append(key)

    def use_key(self, key: bytes) -> None:
        """Make an installed key the primary (it moves to the front)."""
        if key not in self._keys:
            raise ValueError("the requested key is not in the keyring")
        self._keys.remove(key)
        self._keys.insert(0, key)

    def remove_key(self, key: bytes) -> None:
        """Drop a key; the primary cannot be removed (memberlist refuses too)."""
        if self._keys and key == self._keys[0]:
            raise ValueError("removing the primary key is not allowed")
        if key in self._keys:
            self._keys.remove(key)


def encrypted_length(version: int, plain_length: int) -> int:
    """The size of an encrypted payload (security.go encryptedLength)."""
    overhead = ENCRYPTION_VERSION_SIZE + NONCE_SIZE + TAG_SIZE
    if version == ENCRYPTION_VERSION_PADDED:
        overhead += AES_BLOCK_SIZE - plain_length % AES_BLOCK_SIZE
    return overhead + plain_length


def encrypt_payload(version: int, key: bytes, plain: bytes, data: bytes = b"",
                    nonce: bytes | None = None) -> bytes:
    """Seal ``plain`` with ``key``; ``data`` is the associated data. ``nonce`` is
    random unless given (tests and vectors only: never reuse one)."""
    if version not in (0, ENCRYPTION_VERSION_MAX):
        raise ValueError(f"encryption version {version} is not 0 or 1")
    validate_key(key)
    nonce = os.urandom(NONCE_SIZE) if nonce is None else nonce
    if len(nonce) != NONCE_SIZE:
        raise ValueError(f"the nonce must be {NONCE_SIZE} bytes")
    if version == ENCRYPTION_VERSION_PADDED:
        pad = AES_BLOCK_SIZE - len(plain) % AES_BLOCK_SIZE
        plain = plain + bytes((pad,)) * pad
    return bytes((version,)) + nonce + AESGCM(key).encrypt(nonce, plain, data)


def decrypt_payload(keys: Sequence[bytes], payload: bytes, data: bytes = b"") -> bytes:
    """Open ``payload`` with the first key of ``keys`` that authenticates it."""
    if not payload:
        raise Truncated("empty encrypted payload")
    version = payload[0]
    if version > ENCRYPTION_VERSION_MAX:
        raise GossipWireError("bad_encryption", f"unsupported encryption version {version}")
    if len(payload) < encrypted_length(version, 0):
        raise Truncated(f"encrypted payload of {len(payload)} bytes is too small")
    nonce = payload[ENCRYPTION_VERSION_SIZE:ENCRYPTION_VERSION_SIZE + NONCE_SIZE]
    sealed = payload[ENCRYPTION_VERSION_SIZE + NONCE_SIZE:]
    for key in keys:
        try:
            plain = AESGCM(key).decrypt(nonce, sealed, data)
        except InvalidTag:
            continue
        if version != ENCRYPTION_VERSION_PADDED:
            return plain
        # Go strips the last byte's count unchecked (and panics past the start);
        # the padding is authenticated, so only its bound needs checking here.
        pad = plain[-1] if plain else 0
        if not 1 <= pad <= min(AES_BLOCK_SIZE, len(plain)):
            raise GossipWireError("bad_encryption", "bad PKCS#7 padding in an encrypted payload")
        return plain[:-pad]
    raise GossipWireError("no_key", "no installed key could decrypt the message")


def encrypt_stream(version: int, key: bytes, plain: bytes, label: bytes = b"",
                   nonce: bytes | None = None) -> bytes:
    """A TCP stream message sealed as encryptLocalState does: type 10, the
    encrypted length, the payload; the header (and label) authenticated."""
    header = bytes((MessageType.ENCRYPT,)) + encrypted_length(version, len(plain)).to_bytes(4, "big")
    return header + encrypt_payload(version, key, plain, header + label, nonce)


def decrypt_stream(keys: Sequence[bytes], buf: bytes, limits: Limits, label: bytes = b"",
                   offset: int = 0) -> tuple[bytes, int]:
    """The plaintext of the encrypt message at ``offset`` (its type byte
    included) and the offset after it. :class:`Truncated` if it is incomplete."""
    header = buf[offset:offset + STREAM_ENCRYPT_HEADER_SIZE]
    if len(header) < STREAM_ENCRYPT_HEADER_SIZE:
        raise Truncated("stream encrypt header cut short")
    if header[0] != MessageType.ENCRYPT:
        raise GossipWireError("bad_type", f"stream message type {header[0]} is not encrypt")
    length = int.from_bytes(header[1:], "big")
    if length > limits.max_stream:
        raise GossipWireError("too_large", f"encrypted stream of {length} bytes is over {limits.max_stream}")
    end = offset + STREAM_ENCRYPT_HEADER_SIZE + length
    if end > len(buf):
        raise Truncated("encrypted stream cut short")
    payload = bytes(buf[offset + STREAM_ENCRYPT_HEADER_SIZE:end])
    return decrypt_payload(keys, payload, bytes(header) + label), end
