"""Reverse SSL over loopback TCP with asyncio: bad clients are refused, the server keeps serving.

Each refusal of the issue's list is sent by a misbehaving client to a live
server, followed by an honest client on the *same* server, which must still
get its echo.  The CLIs are run as subprocesses (``--help`` and a short real
session that stops by itself).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reverse_ssl.aio import ReverseServerStats, closed_loop_load, connect, echo_handler, serve
from reverse_ssl.messages import Mode
from reverse_ssl.puzzle import Construction, PuzzleParams, SignaturePolicy
from tests.reverse_ssl.rssl_helpers import TamperingClient, client_config, server_config
from tls12.aio import connect as tls_connect
from tls12.errors import TLSError

ROOT = Path(__file__).resolve().parents[3]


def _flip(reply):  # type: ignore[no-untyped-def]
    return dataclasses.replace(reply, self_signature=bytes([reply.self_signature[0] ^ 1]) + reply.self_signature[1:])


def _outside(reply):  # type: ignore[no-untyped-def]
    n = int.from_bytes(reply.modulus, "big") ^ (1 << 400)
    return dataclasses.replace(reply, modulus=n.to_bytes(len(reply.modulus), "big"))


BAD = {
    "ModulusOutOfRange": _outside,
    "MissingSelfSignature": lambda r: dataclasses.replace(r, self_signature=b""),
    "BadSelfSignature": _flip,
    "WrongPreimage": lambda r: dataclasses.replace(r, preimage=bytes([r.preimage[0] ^ 1])),
}


async def _echo(port: int, mode: Mode) -> bytes:
    stream = await connect("127.0.0.1", port, client_config(modes=(mode,)), handshake_timeout=20)
    stream.write(b"still serving")
    data = await stream.read_exactly(13)
    await stream.close()
    return data


@pytest.mark.timeout(60)
def test_bad_clients_then_good_ones_on_the_same_server() -> None:
    stats = ReverseServerStats()
    cfg = server_config(
        signature_policy=SignaturePolicy.ALWAYS,
        puzzle=PuzzleParams(Construction.HASH_AND_RANGE, n_bits=512, preimage_bits=4),
    )

    async def main() -> None:
        server = await serve(echo_handler, "127.0.0.1", 0, cfg, stats=stats, handshake_timeout=20)
        port = server.sockets[0].getsockname()[1]
        try:
            replies = []
            for name, tamper in BAD.items():
                with pytest.raises((TLSError, ConnectionError)):
                    await tls_connect(
                        "127.0.0.1", port, cfg.tls, handshake_timeout=20,
                        connection_factory=lambda _c, t=tamper: TamperingClient(client_config(modes=(Mode.PUZZLE,)), t),
                    )
                assert await _echo(port, Mode.PUZZLE) == b"still serving", name
            # a replayed solution: capture an honest reply, send it again
            honest = await connect("127.0.0.1", port, client_config(modes=(Mode.PUZZLE,)))
            replies.append(honest.conn.puzzle_solution.reply)  # type: ignore[attr-defined]
            await honest.close()
            with pytest.raises((TLSError, ConnectionError)):
                await tls_connect(
                    "127.0.0.1", port, cfg.tls, handshake_timeout=20,
                    connection_factory=lambda _c: TamperingClient(client_config(modes=(Mode.PUZZLE,)), lambda _r: replies[0]),
                )
            assert await _echo(port, Mode.CLIENT_AUTH) == b"still serving"
            # garbage instead of a ClientHello
            _reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET / HTTP/1.0\r\n\r\n")
            await writer.drain()
            writer.close()
            assert await _echo(port, Mode.PUZZLE) == b"still serving"
        finally:
            server.close()
            await server.wait_closed()
            await asyncio.sleep(0.1)

    asyncio.run(main())
    for name in [*BAD, "PuzzleReplayed"]:
        assert stats.refused[name] == 1, (name, stats.refused)
    assert stats.handshakes["PUZZLE"] >= 6 and stats.handshakes["CLIENT_AUTH"] == 1


@pytest.mark.timeout(60)
def test_closed_loop_load_completes_handshakes() -> None:
    stats = ReverseServerStats()
    cfg = server_config(pool_size=50)

    async def main():  # type: ignore[no-untyped-def]
        server = await serve(echo_handler, "127.0.0.1", 0, cfg, stats=stats)
        port = server.sockets[0].getsockname()[1]
        try:
            return await closed_loop_load(
                "127.0.0.1", port, lambda: client_config(modes=(Mode.CLIENT_AUTH,)), concurrency=3, duration=0.5
            )
        finally:
            server.close()
            await server.wait_closed()

    result = asyncio.run(main())
    assert result.handshakes >= 3 and result.errors == 0 and result.rate > 0
    assert stats.handshakes["CLIENT_AUTH"] == result.handshakes


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


@pytest.mark.parametrize("module", ["reverse_ssl.server", "reverse_ssl.client"])
def test_cli_help(module: str) -> None:
    out = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=60, env=_env())
    assert out.returncode == 0 and "usage" in out.stdout


@pytest.mark.timeout(90)
def test_cli_server_and_client(tmp_path: Path) -> None:
    port_file, stats_file = tmp_path / "port", tmp_path / "stats.json"
    server = subprocess.Popen(
        [sys.executable, "-m", "reverse_ssl.server", "--key-bits", "1024", "--puzzle-bits", "512", "--pool", "4",
         "--prefill", "--port-file", str(port_file), "--stats-json", str(stats_file), "--duration", "30",
         "--max-handshakes", "3"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(),
    )
    try:
        for _ in range(300):
            if port_file.exists() and port_file.read_text():
                break
            if server.poll() is not None:
                break
            import time

            time.sleep(0.05)
        port = port_file.read_text()
        for mode in ("puzzle", "client-auth", "original"):
            out = subprocess.run(
                [sys.executable, "-m", "reverse_ssl.client", "--port", port, "--mode", mode, "--key-bits", "1024",
                 "--message", "hi"], capture_output=True, text=True, timeout=60, env=_env(),
            )
            assert out.returncode == 0, out.stderr
            result = json.loads(out.stdout)
            assert result["echo"] == "hi"
            assert result["mode"] == {"puzzle": "PUZZLE", "client-auth": "CLIENT_AUTH", "original": "original"}[mode]
        assert server.wait(timeout=30) == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    stats = json.loads(stats_file.read_text())
    assert stats["handshakes"] == {"PUZZLE": 1, "CLIENT_AUTH": 1, "original": 1}
    assert stats["pool"]["taken"] == 2


def test_cli_refuses_non_loopback() -> None:
    out = subprocess.run([sys.executable, "-m", "reverse_ssl.server", "--host", "8.8.8.8"],
                         capture_output=True, text=True, timeout=60, env=_env())
    assert out.returncode == 2 and "loopback" in out.stderr


@pytest.mark.interop
@pytest.mark.timeout(60)
def test_unmodified_openssl_client_gets_the_standard_handshake() -> None:
    """Backward compatibility with a real peer: Python's ssl (OpenSSL) knows nothing of Reverse SSL."""
    import ssl

    stats = ReverseServerStats()
    cfg = server_config()

    def openssl_client(port: int) -> bytes:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        ctx.set_ciphers("AES128-SHA256:AES128-SHA:@SECLEVEL=0")
        import socket

        with socket.create_connection(("127.0.0.1", port), timeout=20) as raw:
            with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
                tls.sendall(b"openssl peer")
                return tls.recv(100)

    async def main() -> bytes:
        server = await serve(echo_handler, "127.0.0.1", 0, cfg, stats=stats)
        port = server.sockets[0].getsockname()[1]
        try:
            data = await asyncio.to_thread(openssl_client, port)
            assert await _echo(port, Mode.CLIENT_AUTH) == b"still serving"
            return data
        finally:
            server.close()
            await server.wait_closed()
            await asyncio.sleep(0.1)

    assert asyncio.run(main()) == b"openssl peer"
    assert stats.handshakes["original"] == 1 and stats.handshakes["CLIENT_AUTH"] == 1


@pytest.mark.timeout(90)
def test_cli_key_logs_of_server_and_client_agree(tmp_path: Path) -> None:
    """``--keylog`` on the server, ``SSLKEYLOGFILE`` for the client: one equal line per connection
    (a Reverse SSL puzzle handshake and the standard one), each program warning on stderr."""
    port_file, server_log, client_log = tmp_path / "port", tmp_path / "server.keys", tmp_path / "client.keys"
    env = {k: v for k, v in _env().items() if k != "SSLKEYLOGFILE"}
    server = subprocess.Popen(
        [sys.executable, "-m", "reverse_ssl.server", "--key-bits", "1024", "--puzzle-bits", "512", "--pool", "0",
         "--port-file", str(port_file), "--duration", "30", "--max-handshakes", "2", "--keylog", str(server_log)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        for _ in range(300):
            if (port_file.exists() and port_file.read_text()) or server.poll() is not None:
                break
            time.sleep(0.05)
        for mode in ("puzzle", "original"):
            out = subprocess.run(
                [sys.executable, "-m", "reverse_ssl.client", "--port", port_file.read_text(), "--mode", mode,
                 "--message", "hi"], capture_output=True, text=True, timeout=60,
                env={**env, "SSLKEYLOGFILE": str(client_log)},
            )
            assert out.returncode == 0, out.stderr
            assert out.stderr == (f"warning: writing TLS secrets to {client_log} (SSLKEYLOGFILE); "
                                  "anyone who reads it can decrypt these connections\n")
        assert server.wait(timeout=30) == 0
    finally:
        if server.poll() is None:
            server.kill()
        _, err = server.communicate(timeout=30)
    assert f"warning: writing TLS secrets to {server_log} (--keylog)" in err
    lines = client_log.read_text().splitlines()
    assert len(lines) == 2 and all(line.startswith("CLIENT_RANDOM ") for line in lines)
    assert server_log.read_text() == client_log.read_text()
