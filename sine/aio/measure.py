"""The measuring side of the SINE experiments: real loopback runs and timings of the real code.

:func:`count_table2` runs the origin server and the verifying client on loopback and returns what
their instrumentation counted (Table II); :func:`measure_sine_costs` times the real verifier and
Python's ``ssl`` on this machine (the model's :class:`~sine.model_latency.Costs`); :func:`timed`
is the wall clock around one call. :mod:`sine.experiments` turns these into DataFrames.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ssl
import tempfile
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from ..algorithms import SigAlg, SigningKey, VerifyingKey
from ..model_latency import Costs
from ..site import sign_site
from ..tag import encode_stream, sign_document
from ..verifier import StreamVerifier
from .client import SineClient
from .server import OriginServer, make_self_signed

__all__ = ["count_table2", "measure_sine_costs", "run_async", "timed"]

T = TypeVar("T")


def timed(fn: Callable[[], T]) -> tuple[T, float]:
    """``fn()`` and the wall-clock seconds it took."""
    t0 = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - t0


def _site(root: Path, pages: int) -> list[str]:
    """An index linking ``pages`` pages of ~8 KB (a navigation bar), each linking back."""
    links = " ".join(f'<a href="p{i}.html">page {i}</a>' for i in range(pages))
    (root / "index.html").write_text(f"<html><nav>{links}</nav></html>\n")
    for i in range(pages):
        filler = ("lorem ipsum " * 700)[: 8000]
        (root / f"p{i}.html").write_text(
            f'<html><a href="index.html">home</a> <a href="p{(i + 1) % pages}.html">next</a>'
            f"<p>{filler}</p></html>\n")
    return ["/index.html"] + [f"/p{i}.html" for i in range(pages)]


def count_table2(n_requests: tuple[int, ...]) -> list[dict[str, Any]]:
    """For each N and protocol (SINE, SINEB, SINEB with AT_collect, SINEX): a real loopback
    session of N requests and what the client's counters saw (signature verifications, TLS
    handshakes, public-key operations, origin round trips)."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp, "site")
        root.mkdir()
        paths = _site(root, max(n_requests))
        key = SigningKey.generate(SigAlg.RSA_PSS_SHA256)
        sign_site(root, key, time.time())
        cert, tls_key = make_self_signed("127.0.0.1")
        Path(tmp, "c.pem").write_bytes(cert)
        Path(tmp, "k.pem").write_bytes(tls_key)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(Path(tmp, "c.pem"), Path(tmp, "k.pem"))

        async def run() -> None:
            origin = OriginServer(root)
            port, tls_port = await origin.start(tls=ctx)
            try:
                for n in n_requests:
                    for label, mode, collect in [("SINE", "sine", False),
                                                 ("SINEB", "sineb", False),
                                                 ("SINEB (AT_collect)", "sineb", True),
                                                 ("SINEX", "sinex", False)]:
                        pk = VerifyingKey.from_pem(key.verifying_key().to_pem())
                        client = SineClient(
                            f"http://127.0.0.1:{port}", mode=mode, public_key=pk,
                            tls_origin=f"https://127.0.0.1:{tls_port}", tls_ca=cert,
                            collect=collect)
                        async with client:
                            results = [await client.get(p) for p in paths[:n]]
                        c = client.counters
                        rows.append({
                            "protocol": label, "N": n,
                            "verified": sum(r.ok for r in results),
                            "signature_verifications": c.signature_verifications,
                            "tls_handshakes": c.tls_handshakes,
                            "public_key_operations": c.public_key_operations,
                            "origin_round_trips": c.origin_round_trips,
                        })
            finally:
                await origin.close()

        run_async(run)
    return rows




def run_async(coro_fn: Callable[[], Coroutine[Any, Any, object]]) -> None:
    """``asyncio.run``, also from inside a running loop (Jupyter): then in a worker thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(coro_fn())
        return
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, coro_fn()).result()



def _best(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _tls_pair(cert_pem: bytes, key_pem: bytes, tmpdir: str
              ) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    cert_file, key_file = Path(tmpdir, "c.pem"), Path(tmpdir, "k.pem")
    cert_file.write_bytes(cert_pem)
    key_file.write_bytes(key_pem)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert_file, key_file)
    client = ssl.create_default_context(cadata=cert_pem.decode())
    return server, client


def _handshake(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext, payload: bytes = b""
               ) -> None:
    """One in-memory TLS handshake (MemoryBIO, no sockets), then ``payload`` one way."""
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname="127.0.0.1")
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    for _ in range(10):
        for side in (client, server):
            try:
                side.do_handshake()
            except ssl.SSLWantReadError:
                pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if client.version() and server.version():
            try:
                client.do_handshake()
                server.do_handshake()
                break
            except ssl.SSLWantReadError:
                continue
    view = memoryview(payload)
    for i in range(0, len(payload), 16384):
        server.write(view[i : i + 16384])
        c_in.write(s_out.read())
        while True:
            try:
                client.read(65536)
            except ssl.SSLWantReadError:
                break


def measure_sine_costs(quick: bool = True) -> Costs:
    """Measure the model's :class:`~sine.model_latency.Costs` on this machine with the real code
    (best of a few runs): an RSA-PSS verification, the streaming verifier's bytes per second, and
    a Python ``ssl`` handshake and record stream in memory (P-256 certificate)."""
    repeat = 3 if quick else 10
    key = SigningKey.generate(SigAlg.RSA_PSS_SHA256)
    pk = key.verifying_key()
    msg = b"x" * 200
    sig = key.sign(msg)
    signature_verify = _best(lambda: [pk.verify(msg, sig) for _ in range(20)], repeat) / 20
    doc = bytes(range(256)) * (4096 if quick else 16384)
    signed = sign_document(doc, "/m", key, 1e9)
    body = b"".join(encode_stream(doc, signed))

    def verify() -> None:
        v = StreamVerifier("/m", 1e9, trusted_digest=signed.info.at_sign())
        view = memoryview(body)
        for i in range(0, len(body), 65536):
            v.receive_data(view[i : i + 65536])
        v.receive_eof()

    hash_per_byte = _best(verify, repeat) / len(body)
    cert, tls_key = make_self_signed("127.0.0.1")
    with tempfile.TemporaryDirectory() as tmp:
        server_ctx, client_ctx = _tls_pair(cert, tls_key, tmp)
        handshake = _best(lambda: _handshake(server_ctx, client_ctx), repeat)
        with_data = _best(lambda: _handshake(server_ctx, client_ctx, doc), repeat)
    per_byte = max(with_data - handshake, 0.0) / len(doc)
    return Costs(signature_verify, hash_per_byte, handshake, per_byte, source="measured")
