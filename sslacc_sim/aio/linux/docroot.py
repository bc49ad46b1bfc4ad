"""The files a node serves and the responses it makes of them, the same on every node.

:class:`Docroot` names the files (``GET /name``); :class:`Stream` is one response as one byte
stream (:func:`response_head`, then the file or an upload's :func:`receipt`), read at any
offset: what the primary writes and what a buddy rebuilds after a takeover
(:func:`~sslacc_sim.aio.linux.rebuild.rebuild`) are the same bytes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["Docroot", "Stream", "receipt", "response_head"]


def receipt(size: int, crc: int) -> bytes:
    """The body of the answer to an upload (``POST``): how many bytes arrived and their CRC-32
    (``zlib.crc32``: resumable from a mirrored integer, unlike a SHA-256 context), e.g.
    ``b"1024 5f2a9c01\\n"``. The client knows what it sent, so it checks the upload byte for
    byte (up to CRC-32's strength against accidents; this is no defence against an attacker)."""
    return b"%d %08x\n" % (size, crc)


def response_head(size: int, close: bool = True) -> bytes:
    """The HTTP response header for a body of ``size`` bytes (the same on every node);
    ``close``: the connection ends after this response (else ``Connection: keep-alive``)."""
    return (
        "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
        f"Content-Length: {size}\r\nConnection: {'close' if close else 'keep-alive'}\r\n\r\n"
    ).encode()


class Stream:
    """One response as one byte stream: :func:`response_head` then the body, a file (``path``)
    or bytes (``body``: an upload's receipt)."""

    def __init__(self, path: Path | None = None, *, body: bytes | None = None,
                 close: bool = True) -> None:  # fmt: skip
        self._body = body
        if body is None:
            if path is None:
                raise ValueError("a stream needs a file or a body")
            self._file = path.open("rb")
            self.size = path.stat().st_size
        else:
            self.size = len(body)
        self.head = response_head(self.size, close)
        self.total = len(self.head) + self.size

    def read(self, offset: int, n: int) -> bytes:
        """``n`` bytes from ``offset`` (short only at the end)."""
        out = self.head[offset : offset + n]
        start = max(0, offset - len(self.head))
        if self._body is not None:
            return out + self._body[start : start + n - len(out)]
        self._file.seek(start)
        return out + self._file.read(n - len(out))


class Docroot:
    """The files a node serves: every file of a directory by name (``/name``), or one file
    for every path. Each :meth:`stream` opens its own file object (one per connection)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.single = path.is_file()

    def stream(self, url: str, close: bool = True) -> Stream:
        """The response stream for ``GET url``; ``FileNotFoundError`` if none."""
        if self.single:
            return Stream(self.path, close=close)
        name = url.lstrip("/")
        if not name or "/" in name or name.startswith("."):
            raise FileNotFoundError(url)
        return Stream(self.path / name, close=close)

    def open(self, response: dict[str, Any]) -> Stream:
        """The stream of the response ``response`` names (``path``, ``close`` and, for an
        upload, ``upload`` = [bytes, CRC-32]): what ``app`` and every body segment carry."""
        close = bool(response.get("close", True))
        upload = response.get("upload")
        if upload is not None:
            return Stream(body=receipt(int(upload[0]), int(upload[1])), close=close)
        return self.stream(str(response["path"]), close)
