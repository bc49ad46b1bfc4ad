"""Sealed storage for the guardian: AES-GCM blobs on the host's disk, a rollback counter in the card.

The IBM 4758 keeps its secrets in battery-backed memory that only the card can read, but that
memory is small; bulk state (here: the e-voting tally and the set of voters who voted) lives on
the *host's* disk, where a malicious operator can read, alter, delete or replay old copies of it.
Sealing makes those attacks detectable:

* **confidentiality and integrity**: the state is encrypted with AES-256-GCM under a key that
  never leaves the guardian's state directory (``seal.key``, created at first use, mode 0600);
  the header (magic, store label, counter) is authenticated as associated data, so a blob of
  another store or a flipped bit fails to open (:class:`TamperedError`);
* **freshness**: every write carries a counter one higher than the last; the guardian keeps the
  latest counter in ``<name>.counter`` beside the key. That file stands in for the 4758's
  battery-backed RAM: the threat model lets the host replace the *blob* but not the guardian's
  state directory. A blob older than the counter (an old copy replayed by the host) or a missing
  blob while the counter says one was written raises :class:`RollbackError`;
* **durability**: a write goes to a temporary file, is ``fsync``-ed, renamed over the old blob
  and the directory is ``fsync``-ed; only then is the counter advanced the same way. A guardian
  killed between the two steps restarts with a blob exactly one ahead of the counter, which is
  accepted (only the guardian can make a valid blob) and the counter is repaired. A caller that
  acknowledges a request only after :meth:`SealedStore.save` returns never loses an
  acknowledged change.

Usage::

    store = SealedStore(state_dir, "evoting")
    state = store.load()          # None on first start; raises on tampering or rollback
    store.save(b"...new state...")
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from .errors import WebAlpsError

__all__ = ["MAGIC", "RollbackError", "SealedStateError", "SealedStore", "TamperedError"]

#: First bytes of every blob (format version 1).
MAGIC = b"WALPSEAL1"
_HEADER = struct.Struct(">9sQ12s")  # magic, counter, nonce
_KEY_BYTES = 32


class SealedStateError(WebAlpsError):
    """The sealed state cannot be trusted; the guardian must not serve from it."""


class TamperedError(SealedStateError):
    """The blob does not open: altered, truncated, sealed under another key or for another store."""


class RollbackError(SealedStateError):
    """The blob is older than the guardian's counter (a replayed copy) or has been removed."""


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Replace ``path`` by ``data`` so that a crash leaves the old or the new file, never a mix.

    Temporary file in the same directory, ``fsync``, ``os.replace``, ``fsync`` of the directory
    (the rename itself is only durable once the directory entry is on disk).
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _load_or_create_key(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        key = path.read_bytes()
        if len(key) != _KEY_BYTES:
            raise SealedStateError(f"{path.name}: expected a {_KEY_BYTES}-byte key") from None
        return key
    key = AESGCM.generate_key(bit_length=8 * _KEY_BYTES)
    try:
        os.write(fd, key)
        os.fsync(fd)
    finally:
        os.close(fd)
    _fsync_dir(path.parent)
    return key


class SealedStore:
    """One named, sealed, rollback-protected state blob.

    ``state_dir`` is the guardian's private directory (key and counter); ``blob_dir`` is where the
    host keeps the blob (default: the same directory, which is what the guardian uses when it has
    no separate host storage). ``name`` labels the store and is bound into every blob.
    """

    def __init__(self, state_dir: str | os.PathLike[str], name: str,
                 blob_dir: str | os.PathLike[str] | None = None) -> None:
        if not name or not name.replace("-", "").replace("_", "").isalnum():
            raise ValueError(f"store name must be alphanumeric (with - or _): {name!r}")
        self.state_dir = Path(state_dir)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.blob_path = Path(blob_dir or self.state_dir) / f"{name}.sealed"
        self.counter_path = self.state_dir / f"{name}.counter"
        self._aead = AESGCM(_load_or_create_key(self.state_dir / "seal.key"))
        self.counter = self._read_counter()

    # -- the trusted counter (the card's battery-backed memory) ---------------------------------
    def _read_counter(self) -> int:
        try:
            text = self.counter_path.read_text()
        except FileNotFoundError:
            return 0
        try:
            return int(text)
        except ValueError:
            raise SealedStateError(f"{self.counter_path.name}: not a counter") from None

    def _write_counter(self, value: int) -> None:
        write_atomically(self.counter_path, f"{value}\n".encode())
        self.counter = value

    # -- blobs ---------------------------------------------------------------------------------
    def _aad(self, counter: int, nonce: bytes) -> bytes:
        return _HEADER.pack(MAGIC, counter, nonce) + self.name.encode()

    def seal(self, plaintext: bytes, counter: int) -> bytes:
        """The blob for ``plaintext`` at ``counter`` (header + AES-GCM ciphertext and tag)."""
        nonce = os.urandom(12)
        return _HEADER.pack(MAGIC, counter, nonce) + self._aead.encrypt(
            nonce, plaintext, self._aad(counter, nonce)
        )

    def unseal(self, blob: bytes) -> tuple[int, bytes]:
        """``(counter, plaintext)`` of a blob; :class:`TamperedError` if it does not open."""
        if len(blob) < _HEADER.size + 16:
            raise TamperedError(f"{self.blob_path.name}: truncated ({len(blob)} bytes)")
        magic, counter, nonce = _HEADER.unpack_from(blob)
        if magic != MAGIC:
            raise TamperedError(f"{self.blob_path.name}: not a sealed blob")
        try:
            plaintext = self._aead.decrypt(nonce, blob[_HEADER.size:], self._aad(counter, nonce))
        except InvalidTag:
            raise TamperedError(f"{self.blob_path.name}: authentication failed") from None
        return counter, plaintext

    def load(self) -> bytes | None:
        """The latest state, or None if nothing was ever saved.

        Raises :class:`RollbackError` for a blob older than the counter or a missing blob the
        counter says exists, :class:`TamperedError` for a blob that does not open. A blob exactly
        one ahead of the counter (a crash between the two writes of :meth:`save`) is accepted and
        the counter repaired.
        """
        try:
            blob = self.blob_path.read_bytes()
        except FileNotFoundError:
            if self.counter:
                raise RollbackError(
                    f"{self.blob_path.name} is missing but version {self.counter} was written"
                ) from None
            return None
        counter, plaintext = self.unseal(blob)
        if counter < self.counter:
            raise RollbackError(
                f"{self.blob_path.name} is version {counter}, older than version {self.counter}:"
                " the host replayed an old copy"
            )
        if counter > self.counter + 1:
            raise RollbackError(
                f"{self.counter_path.name} says version {self.counter} but the blob is version"
                f" {counter}: the guardian's own counter was rolled back"
            )
        if counter == self.counter + 1:
            self._write_counter(counter)
        return plaintext

    def save(self, plaintext: bytes) -> int:
        """Seal ``plaintext`` as the next version, durably; returns the new counter.

        Blob first, counter second (see the module docstring for why this order is crash-safe).
        """
        counter = self.counter + 1
        write_atomically(self.blob_path, self.seal(plaintext, counter))
        self._write_counter(counter)
        return counter
