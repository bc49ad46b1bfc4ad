"""Type stub for the C extension ``tls12._recordcrypto`` (see tls12/recordcrypto.py)."""

from collections.abc import Sequence
from typing import final

PLAINTEXT_MAX: int
FRAGMENT_MAX: int

class RecordCryptoError(ValueError): ...

@final
class RecordCipher:

    """Protection of one direction of a TLS 1.2 connection (MAC-then-encrypt, RFC 5246 §6.2.3)."""

    @property
    def mac_length(self) -> int: ...
    @property
    def block_size(self) -> int: ...
    @property
    def stitched(self) -> bool: ...
    @property
    def multiblock(self) -> bool: ...
    def __init__(
        self,
        cipher: str,
        mac: str,
        enc_key: bytes,
        mac_key: bytes,
        *,
        stitched: bool = True,
        multiblock: bool = True,
    ) -> None: ...
    # compute_mac, open, seal_many, open_many, seal_stream: positional arguments only (METH_VARARGS)
    def compute_mac(
        self, seq: int, content_type: int, version: int, plaintext: bytes, /
    ) -> bytes: ...
    def seal(
        self, seq: int, content_type: int, version: int, plaintext: bytes, explicit_iv: bytes = b""
    ) -> bytes: ...
    def seal_with_mac(self, plaintext: bytes, mac: bytes, explicit_iv: bytes = b"") -> bytes: ...
    def open(self, seq: int, content_type: int, version: int, fragment: bytes, /) -> bytes: ...
    def seal_many(
        self,
        seq: int,
        content_type: int,
        version: int,
        plaintexts: Sequence[bytes],
        explicit_ivs: Sequence[bytes],
        /,
    ) -> list[bytes]: ...
    def open_many(
        self, seq: int, content_type: int, version: int, fragments: Sequence[bytes], /
    ) -> list[bytes]: ...
    def seal_stream(
        self, seq: int, content_type: int, version: int, data: bytes, /
    ) -> bytes: ...
