"""The Python ``ssl`` reference server of ``bench_https.py``: what a Python user would write.

``asyncio.start_server(..., ssl=context)`` serving keep-alive GETs of the files under ROOT
(``Content-Length``; 404 for anything else), TLS 1.2 with one suite and encrypt-then-MAC off,
as nginx is configured in the same benchmark. It prints ``listening on https://HOST:PORT`` and
serves until killed::

    python benchmarks/pyssl_server.py ROOT CERT KEY CIPHER
"""

from __future__ import annotations

import asyncio
import os
import ssl
import sys
from pathlib import Path

PYSSL_CHUNK = 256 * 1024
NO_ENCRYPT_THEN_MAC = 1 << 19
"""OpenSSL's ``SSL_OP_NO_ENCRYPT_THEN_MAC`` (the ``ssl`` module names no constant for it)."""


async def _pyssl_handle(root: Path, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Keep-alive GETs of files under ``root`` (Content-Length, 404 for anything else)."""
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            target = head.split(b" ", 2)[1].decode("ascii")
            path = root / target.lstrip("/")
            close = b"connection: close" in head.lower()
            if not path.is_file() or ".." in target:
                writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            else:
                with path.open("rb") as f:
                    size = os.fstat(f.fileno()).st_size
                    writer.write(f"HTTP/1.1 200 OK\r\nContent-Length: {size}\r\n"
                                 "Content-Type: application/octet-stream\r\n\r\n".encode())
                    while chunk := f.read(PYSSL_CHUNK):
                        writer.write(chunk)
                        await writer.drain()
            await writer.drain()
            if close:
                break
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


async def _pyssl_main(root: Path, cert: Path, key: Path, cipher: str) -> None:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers(cipher)
    ctx.options |= NO_ENCRYPT_THEN_MAC
    ctx.load_cert_chain(cert, key)
    server = await asyncio.start_server(lambda r, w: _pyssl_handle(root, r, w), "127.0.0.1", 0, ssl=ctx)
    print(f"listening on https://127.0.0.1:{server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 4:
        print("usage: python benchmarks/pyssl_server.py ROOT CERT KEY CIPHER", file=sys.stderr)
        return 2
    root, cert, key, cipher = args
    asyncio.run(_pyssl_main(Path(root), Path(cert), Path(key), cipher))
    return 0


if __name__ == "__main__":
    sys.exit(main())
