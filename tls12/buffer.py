"""Byte buffers for codecs: ``pull_*`` reads, ``push_*`` writes (after aioquic's ``buffer``).

Reading past the end raises :class:`tls12.errors.DecodeError`, so every codec
built on :class:`Buffer` turns a truncated or malformed message into the
``decode_error`` alert without further checks.
"""

from __future__ import annotations

from .errors import DecodeError

__all__ = ["Buffer", "Writer"]


class Buffer:
    """A read cursor over immutable bytes."""

    __slots__ = ("_data", "_pos")

    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        self._data = bytes(data)
        self._pos = 0

    @property
    def remaining(self) -> int:
        return len(self._data) - self._pos

    def eof(self) -> bool:
        return self._pos >= len(self._data)

    def pull_bytes(self, n: int) -> bytes:
        if n < 0 or self._pos + n > len(self._data):
            raise DecodeError(f"message truncated: wanted {n} bytes, {self.remaining} left")
        out = self._data[self._pos : self._pos + n]
        self._pos += n
        return out

    def pull_uint(self, width: int) -> int:
        return int.from_bytes(self.pull_bytes(width), "big")

    def pull_uint8(self) -> int:
        pos = self._pos
        if pos >= len(self._data):
            raise DecodeError(f"message truncated: wanted 1 bytes, {self.remaining} left")
        self._pos = pos + 1
        return self._data[pos]

    def pull_uint16(self) -> int:
        data, pos = self._data, self._pos
        if pos + 2 > len(data):
            raise DecodeError(f"message truncated: wanted 2 bytes, {self.remaining} left")
        self._pos = pos + 2
        return (data[pos] << 8) | data[pos + 1]

    def pull_uint24(self) -> int:
        return self.pull_uint(3)

    def pull_vector(self, length_width: int, minimum: int = 0, maximum: int | None = None) -> bytes:
        """A ``<minimum..maximum>`` vector with a ``length_width``-byte length prefix."""
        data, pos = self._data, self._pos
        start = pos + length_width
        if start > len(data):
            raise DecodeError(f"message truncated: wanted {length_width} bytes, {self.remaining} left")
        n = int.from_bytes(data[pos:start], "big")
        self._pos = start
        top = (1 << (8 * length_width)) - 1 if maximum is None else maximum
        if n < minimum or n > top:
            raise DecodeError(f"vector length {n} outside <{minimum}..{top}>")
        end = start + n
        if end > len(data):
            raise DecodeError(f"message truncated: wanted {n} bytes, {self.remaining} left")
        self._pos = end
        return data[start:end]

    def pull_rest(self) -> bytes:
        return self.pull_bytes(self.remaining)

    def expect_end(self, what: str = "message") -> None:
        """Length-prefixed blocks reject trailing bytes."""
        if not self.eof():
            raise DecodeError(f"{self.remaining} trailing bytes after {what}")


class Writer:
    """An append-only byte builder."""

    __slots__ = ("_parts",)

    def __init__(self) -> None:
        self._parts = bytearray()

    def push_bytes(self, data: bytes) -> None:
        self._parts += data

    def push_uint(self, value: int, width: int) -> None:
        self._parts += value.to_bytes(width, "big")

    def push_uint8(self, value: int) -> None:
        self.push_uint(value, 1)

    def push_uint16(self, value: int) -> None:
        self.push_uint(value, 2)

    def push_uint24(self, value: int) -> None:
        self.push_uint(value, 3)

    def push_vector(self, length_width: int, data: bytes) -> None:
        if len(data) >= 1 << (8 * length_width):
            raise ValueError(f"vector of {len(data)} bytes does not fit a {length_width}-byte length")
        self.push_uint(len(data), length_width)
        self._parts += data

    def getvalue(self) -> bytes:
        return bytes(self._parts)
