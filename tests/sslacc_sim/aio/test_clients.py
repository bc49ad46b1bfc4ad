"""The four unmodified HTTPS clients of the fault campaign, against real TLS servers on loopback.

The good server is the project's own (:class:`testbed.apps.harness.BackgroundServer`, session
cache on, a self-signed certificate for ``sacc.test``); each client fetches a 1 KiB and a
3 MiB pseudo-random file and must report success over exact bytes, and the server's own record
of each connection confirms what the client claims (suite, resumption, SNI). The bad servers
are small and stdlib-only: one promises 1000 bytes and sends 10 (closing with or without
close_notify), one never answers. Every client must then fail *loudly* -- a non-empty error,
never ``silently_wrong`` -- while a body that is whole but not the expected file is exactly what
``silently_wrong`` marks. Uploads and keep-alive run against a stdlib reference server that
speaks the campaign's contract (:mod:`.reference_server`: POST receipts, persistent and
pipelined connections, counted): each client uploads 1 KiB and 3 MiB byte-exact and makes three
requests on one connection; a wrong second body or a wrong receipt is never ok, and silent
exactly when the client said all was well. Hypothesis feeds the response parsers arbitrary bytes.
"""

from __future__ import annotations

import os
import random
import socket
import ssl
import subprocess
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sslacc_sim.aio.linux import clients
from sslacc_sim.aio.linux.clients import (
    CLIENTS,
    GNUTLS_PRIORITIES,
    MAX_REPEAT,
    RESUMING_CLIENTS,
    Outcome,
    Request,
    client_error_text,
    expected_body,
    finish,
    first_difference,
    judge_body,
    openssl_resumed,
    split_response,
    split_responses,
    start,
    upload_receipt,
)
from sslacc_sim.aio.linux.docroot import receipt
from testbed.apps.harness import BackgroundServer
from testbed.apps.stats import ConnectionRecord
from tls12.certs import generate_self_signed, write_credentials
from tls12.config import ServerConfig
from tls12.session import InMemorySessionStore
from tls12.suites import SUITES, BulkCipher
from tls12.testing import credentials

from .reference_server import ReferenceServer

pytestmark = pytest.mark.interop

HOST = "sacc.test"
SIZES = {"/f1": 1024, "/f3": 3 * 1024 * 1024}
FILES = {path: random.Random(size).randbytes(size) for path, size in SIZES.items()}
#: every suite the server speaks that is not NULL (clients refuse NULL at default security)
SERVER_SUITES = tuple(s for s, p in SUITES.items() if p.cipher is not BulkCipher.NULL)


@dataclass(frozen=True)
class Site:
    server: BackgroundServer
    cert: Path
    key: Path
    wrong_ca: Path


def _serve(root: Path, cache: bool) -> Iterator[BackgroundServer]:
    config = ServerConfig(credentials=credentials(common_name=HOST), cipher_suites=SERVER_SUITES,
                          session_store=InMemorySessionStore() if cache else None)  # fmt: skip
    with BackgroundServer(root, config) as server:
        yield server


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path, Path]:
    """The document root, the server's certificate and key, and an unrelated CA for ``sacc.test``."""
    base = tmp_path_factory.mktemp("clients")
    root = base / "www"
    root.mkdir()
    for path, data in FILES.items():
        (root / path.lstrip("/")).write_bytes(data)
    write_credentials(credentials(common_name=HOST), base / "cert.pem", base / "key.pem")
    write_credentials(generate_self_signed(HOST), base / "wrong-ca.pem", base / "wrong-key.pem")
    return root, base / "cert.pem", base / "key.pem", base / "wrong-ca.pem"


@pytest.fixture(scope="module")
def site(files: tuple[Path, Path, Path, Path]) -> Iterator[Site]:
    root, cert, key, wrong = files  # the key: for the stdlib servers below
    for server in _serve(root, cache=True):
        yield Site(server, cert, key, wrong)


def fetch(site: Site, client: str, path: str, out: Path, expected: bytes | None = None,
          **kw: object) -> tuple[Outcome, list[ConnectionRecord]]:  # fmt: skip
    """One fetch from the good server; the outcome and the server's records of its connections."""
    server = site.server
    req = Request(client, HOST, "127.0.0.1", server.port, path, site.cert, out, timeout=30, **kw)  # type: ignore[arg-type]
    before = server.wait_idle()
    outcome = finish(start(req), req, FILES[path] if expected is None else expected)
    server.wait_idle()
    return outcome, list(server.stats.connections)[before:]


# --- the good server ---------------------------------------------------------------------


@pytest.mark.parametrize("path", SIZES)
@pytest.mark.parametrize("client", CLIENTS)
def test_each_client_fetches_byte_exact(site: Site, client: str, path: str, tmp_path: Path) -> None:
    outcome, records = fetch(site, client, path, tmp_path / "out")
    assert outcome == Outcome(client, path, 0, "", True, SIZES[path], None, False)
    assert outcome.ok
    [record] = records
    assert (record.cipher_suite, record.resumed, record.error) == (0x002F, False, None)  # AES128-SHA
    assert record.server_name == HOST  # every client sent the name it verified, not the address


@pytest.mark.parametrize("client", sorted(RESUMING_CLIENTS))
def test_a_resumed_fetch_resumes_and_both_bodies_are_exact(site: Site, client: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    outcome, records = fetch(site, client, "/f3", out, resume=True)
    assert outcome == Outcome(client, "/f3", 0, "", True, SIZES["/f3"], True, False)
    assert [r.resumed for r in records] == [False, True]  # the server agrees
    assert out.with_name("out.first").stat().st_size > SIZES["/f3"]  # the first response, kept
    # a first body that is wrong is reported even when the second is right
    broken = out.with_name("out.first")
    data = bytearray(broken.read_bytes())
    data[-1] ^= 1
    broken.write_bytes(bytes(data))
    assert "first response: body differs" in finish(_exited(), _request(site, client, out, resume=True),
                                                            FILES["/f3"]).error  # fmt: skip


def _request(site: Site, client: str, out: Path, **kw: object) -> Request:
    return Request(client, HOST, "127.0.0.1", site.server.port, "/f3", site.cert, out, **kw)  # type: ignore[arg-type]


def _exited() -> subprocess.Popen[bytes]:
    """A process that has already exited 0 (finish() then judges the files as they are)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc


@pytest.mark.parametrize("client", sorted(RESUMING_CLIENTS))
def test_a_server_without_session_cache_is_reported_as_not_resumed(
    files: tuple[Path, Path, Path, Path], client: str, tmp_path: Path
) -> None:
    root, cert, _, _ = files
    for server in _serve(root, cache=False):
        req = Request(client, HOST, "127.0.0.1", server.port, "/f1", cert, tmp_path / "o", resume=True)
        outcome = finish(start(req), req, FILES["/f1"])
        server.wait_idle()
        assert outcome == Outcome(client, "/f1", 0, "", True, 1024, False, False)
        assert [r.resumed for r in server.stats.connections] == [False, False]


@pytest.mark.parametrize("client", CLIENTS)
def test_whole_but_wrong_bytes_are_silently_wrong(site: Site, client: str, tmp_path: Path) -> None:
    wrong = bytearray(FILES["/f1"])
    wrong[700] ^= 0xFF
    outcome, _ = fetch(site, client, "/f1", tmp_path / "out", expected=bytes(wrong))
    assert outcome == Outcome(client, "/f1", 0, "body differs at byte 700", False, 1024, None, True)
    # a different file of another length: the client saw a complete response all the same
    longer, _ = fetch(site, client, "/f1", tmp_path / "out", expected=FILES["/f1"] + b"!")
    assert (longer.error, longer.silently_wrong) == ("short body: got 1024 of 1025 bytes", True)


@pytest.mark.parametrize("client", CLIENTS)
def test_an_unknown_ca_makes_every_client_fail(site: Site, client: str, tmp_path: Path) -> None:
    req = Request(client, HOST, "127.0.0.1", site.server.port, "/f1", site.wrong_ca, tmp_path / "o")
    (tmp_path / "o").write_bytes(FILES["/f1"])  # a stale output, which start() must remove
    outcome = finish(start(req), req, FILES["/f1"])
    assert outcome.exit != 0 and "certificate" in outcome.error.lower() and not outcome.body_ok
    assert (outcome.got, outcome.silently_wrong) == (0, False)
    site.server.wait_idle()


@pytest.mark.parametrize("client", CLIENTS)
def test_a_name_the_certificate_lacks_makes_every_client_fail(site: Site, client: str, tmp_path: Path) -> None:
    # the right CA and address, but the name verified is not in the certificate
    req = Request(client, "other.test", "127.0.0.1", site.server.port, "/f1", site.cert, tmp_path / "o")
    outcome = finish(start(req), req, FILES["/f1"])
    assert outcome.exit != 0 and outcome.error and not outcome.body_ok, outcome
    assert (outcome.got, outcome.silently_wrong) == (0, False)
    site.server.wait_idle()


@pytest.mark.parametrize("suite", sorted(GNUTLS_PRIORITIES))
def test_gnutls_priority_strings_name_exactly_their_suite(site: Site, suite: str, tmp_path: Path) -> None:
    outcome, [record] = fetch(site, "gnutls", "/f1", tmp_path / "out", suite=suite)
    assert outcome.ok, outcome
    assert SUITES[record.cipher_suite].openssl_name == suite  # type: ignore[index]


def test_wrap_prefixes_the_command(site: Site, tmp_path: Path) -> None:
    seen: list[list[str]] = []

    def wrap(argv: list[str]) -> list[str]:
        seen.append(argv)
        return ["env", "LC_ALL=C", *argv]

    req = _request(site, "curl", tmp_path / "out")
    assert finish(start(req, wrap), req, FILES["/f3"]).ok
    [argv] = seen
    assert argv[0] == "curl" and f"{HOST}:{site.server.port}:127.0.0.1" in argv
    assert f"https://{HOST}:{site.server.port}/f3" in argv


def test_requests_are_checked_at_construction(tmp_path: Path) -> None:
    ok = {"host": HOST, "address": "127.0.0.1", "port": 443, "path": "/f", "cacert": tmp_path, "out": tmp_path}
    for bad, message in [
        ({"client": "wget"}, "unknown client"),
        ({"client": "curl", "resume": True}, "resume is supported"),
        ({"client": "gnutls", "resume": True}, "resume is supported"),
        ({"client": "gnutls", "suite": "NULL-SHA"}, "no gnutls priority"),
        ({"client": "curl", "path": "/a b"}, "path"),
        ({"client": "curl", "address": "sacc.test"}, "IP"),
        ({"client": "curl", "port": 0}, "port"),
        ({"client": "curl", "timeout": 0.0}, "timeout"),
        ({"client": "openssl", "suite": "AES128-SHA; reboot"}, "cipher"),
        ({"client": "curl", "repeat": 0}, "repeat"),
        ({"client": "gnutls", "repeat": MAX_REPEAT + 1}, "repeat"),
        ({"client": "python", "repeat": True}, "repeat"),
        ({"client": "openssl", "repeat": 2, "resume": True}, "resume and repeat"),
    ]:
        with pytest.raises(ValueError, match=message):
            Request(**{**ok, **bad})  # type: ignore[arg-type]
    assert Request("curl", HOST, "::1", 443, "/f", tmp_path, tmp_path).bracketed_address == "[::1]"


# --- servers that fail -------------------------------------------------------------------


class CuttingServer:
    """A stdlib TLS server that answers with ``Content-Length: 1000`` and 10 body bytes, then closes.

    ``clean``: close with close_notify (the response looks ended to TLS, short to HTTP);
    otherwise drop the TCP connection without it (a truncated TLS stream).
    """

    BODY = bytes(range(10))

    def __init__(self, cert: Path, key: Path, clean: bool) -> None:
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(cert, key)
        self.ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        self.ctx.set_ciphers("AES128-SHA")
        self.clean = clean
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        conn.settimeout(10)
        try:
            with self.ctx.wrap_socket(conn, server_side=True) as tls:
                data = b""
                while b"\r\n\r\n" not in data and (chunk := tls.recv(4096)):
                    data += chunk
                tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nConnection: close\r\n\r\n" + self.BODY)
                if self.clean:
                    tls.unwrap()
        except (OSError, ssl.SSLError):
            pass  # the clients hang up as they please
        finally:
            conn.close()


@pytest.mark.parametrize("clean", [False, True], ids=["tcp-close", "close-notify"])
def test_a_body_cut_short_fails_loudly_in_every_client(site: Site, clean: bool, tmp_path: Path) -> None:
    server = CuttingServer(site.cert, site.key, clean)
    try:
        reqs = [Request(c, HOST, "127.0.0.1", server.port, "/f", site.cert, tmp_path / c, timeout=20) for c in CLIENTS]
        outcomes = [finish(p, r, bytes(1000)) for r, p in [(r, start(r)) for r in reqs]]
    finally:
        server.listener.close()
    for outcome in outcomes:
        assert outcome.error and not outcome.body_ok and not outcome.silently_wrong, outcome
        assert outcome.got == 10, outcome
    raw_clients = [o for o in outcomes if o.client != "curl"]
    if clean:  # TLS ended properly: only the HTTP length tells, and the judgement says so
        assert all(o.error.endswith("short body: got 10 of 1000 bytes") for o in raw_clients), raw_clients
    else:  # every client notices the missing close_notify or the missing bytes itself
        assert all(o.exit != 0 for o in outcomes), outcomes


def test_a_silent_server_is_killed_after_its_timeout(site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(clients, "KILL_MARGIN", 0.5)
    with socket.create_server(("127.0.0.1", 0)) as listener:  # accepts nothing, answers nothing
        port = listener.getsockname()[1]
        reqs = [Request(c, HOST, "127.0.0.1", port, "/f", site.cert, tmp_path / c, timeout=1.0) for c in CLIENTS]
        started = [(r, start(r)) for r in reqs]
        outcomes = {r.client: (finish(p, r, b"x"), p) for r, p in started}
    assert outcomes["curl"][0].exit == 28  # curl's own --max-time
    assert outcomes["python"][0].exit == 1 and "timed out" in outcomes["python"][0].error
    for client in ("gnutls", "openssl"):  # no timeout of their own: killed with their group
        outcome, proc = outcomes[client]
        assert outcome.exit == -1 and outcome.error.startswith("killed after 1.5 s"), outcome
        with pytest.raises(ProcessLookupError):
            os.killpg(proc.pid, 0)
    assert not any(o.silently_wrong or o.body_ok for o, _ in outcomes.values())


# --- uploads and keep-alive, against the reference server ---------------------------------

KEPT = random.Random(7).randbytes(200_000)  # served as /k, three times per connection


def _transfer(server: ReferenceServer, cert: Path, client: str, out: Path, path: str, data: bytes,
              **kw: object) -> Outcome:  # fmt: skip
    """One transfer to the reference server; ``data`` is the file served (or uploaded)."""
    req = Request(client, HOST, "127.0.0.1", server.port, path, cert, out, timeout=30, **kw)  # type: ignore[arg-type]
    return finish(start(req), req, expected_body(req, data))


def _said(out: Path) -> str:
    """What the client wrote as its own error (its stderr, gnutls-cli's log)."""
    def text(path: Path) -> str:
        return path.read_text(errors="replace") if path.exists() else ""
    return client_error_text(text(out.with_name(out.name + ".stderr")), text(out.with_name(out.name + ".log")))


@pytest.mark.parametrize("size", [1024, 3 * 1024 * 1024], ids=["1KiB", "3MiB"])
@pytest.mark.parametrize("client", CLIENTS)
def test_each_client_uploads_byte_exact(files: tuple[Path, Path, Path, Path], client: str, size: int,
                                        tmp_path: Path) -> None:  # fmt: skip
    _, cert, key, _ = files
    data = random.Random(size + 1).randbytes(size)
    (tmp_path / "up").write_bytes(data)
    with ReferenceServer(cert, key, {}) as server:
        outcome = _transfer(server, cert, client, tmp_path / "out", "/up", data, upload=tmp_path / "up")
    assert outcome == Outcome(client, "/up", 0, "", True, len(upload_receipt(data)), None, False)
    assert [(s.method, s.path, s.size, s.crc, s.expect) for s in server.seen] == [
        ("POST", "/up", size, zlib.crc32(data), "")]  # fmt: skip
    assert (server.connections, server.errors) == (1, [])


@pytest.mark.parametrize("method", ["GET", "POST"])
@pytest.mark.parametrize("client", CLIENTS)
def test_each_client_makes_three_requests_on_one_connection(files: tuple[Path, Path, Path, Path], client: str,
                                                            method: str, tmp_path: Path) -> None:  # fmt: skip
    _, cert, key, _ = files
    kw: dict[str, object] = {"repeat": 3}
    data = KEPT
    if method == "POST":
        data = KEPT[:65536]
        kw["upload"] = tmp_path / "up"
        (tmp_path / "up").write_bytes(data)
    with ReferenceServer(cert, key, {"/k": KEPT}) as server:
        outcome = _transfer(server, cert, client, tmp_path / "out", "/k", data, **kw)
    each = len(KEPT) if method == "GET" else len(upload_receipt(data))
    assert outcome == Outcome(client, "/k", 0, "", True, 3 * each, None, False)
    assert (server.connections, server.errors) == (1, [])
    assert [(s.connection, s.method, s.size, s.expect) for s in server.seen] == [(1, method, len(data) * (method == "POST"), "")] * 3
    # the raw clients' last request asks the server to close; curl's own say nothing of it
    closing = [s.connection_header.lower() for s in server.seen]
    assert closing == (["", "", ""] if client == "curl" else ["", "", "close"])


@pytest.mark.parametrize("cut", [False, True], ids=["whole", "then-tcp-close"])
@pytest.mark.parametrize("client", CLIENTS)
def test_a_wrong_second_body_is_silent_exactly_when_the_client_says_ok(
    files: tuple[Path, Path, Path, Path], client: str, cut: bool, tmp_path: Path
) -> None:
    _, cert, key, _ = files
    with ReferenceServer(cert, key, {"/k": KEPT}, wrong_body_at=2, cut_after=2 if cut else None) as server:
        outcome = _transfer(server, cert, client, tmp_path / "out", "/k", KEPT, repeat=3)
    assert not outcome.ok and not outcome.body_ok, outcome
    assert f"response 2: body differs at byte {len(KEPT) // 2}" in outcome.error
    reported_ok = outcome.exit == 0 and not _said(tmp_path / "out")
    assert outcome.silently_wrong == reported_ok, outcome
    if not cut:  # a whole, well-formed response: every client takes it
        assert reported_ok and server.connections == 1, outcome
    elif client != "curl":  # the raw clients see the TCP close and the missing third response
        assert outcome.exit != 0 and outcome.error.endswith("1 of 3 responses missing"), outcome
    elif reported_ok:  # curl asks again on a new connection, and only -w tells
        assert "curl reported 2 connections for 3 requests" in outcome.error and server.connections == 2


@pytest.mark.parametrize("client", CLIENTS)
def test_a_wrong_receipt_is_never_ok(files: tuple[Path, Path, Path, Path], client: str, tmp_path: Path) -> None:
    _, cert, key, _ = files
    data = random.Random(5).randbytes(100_000)
    (tmp_path / "up").write_bytes(data)
    with ReferenceServer(cert, key, {}, wrong_receipt=True) as server:
        outcome = _transfer(server, cert, client, tmp_path / "out", "/up", data, upload=tmp_path / "up")
    wrong = receipt(len(data), zlib.crc32(data) ^ 1)
    error = f"body differs at byte {first_difference(wrong, upload_receipt(data))}"
    assert outcome == Outcome(client, "/up", 0, error, False, len(wrong), None, True)


@pytest.mark.parametrize("client", sorted(RESUMING_CLIENTS))
def test_a_resumed_upload_posts_twice(files: tuple[Path, Path, Path, Path], client: str, tmp_path: Path) -> None:
    _, cert, key, _ = files
    (tmp_path / "up").write_bytes(KEPT)
    with ReferenceServer(cert, key, {}) as server:
        outcome = _transfer(server, cert, client, tmp_path / "out", "/up", KEPT, upload=tmp_path / "up", resume=True)
    assert outcome.ok and outcome.got == len(upload_receipt(KEPT)), outcome
    assert [(s.connection, s.method, s.size) for s in server.seen] == [(1, "POST", len(KEPT)), (2, "POST", len(KEPT))]


def test_requests_are_pipelined_with_close_on_the_last(tmp_path: Path) -> None:
    data = b"\x00\r\n\r\nHTTP/1.1"
    (tmp_path / "up").write_bytes(data)
    get = Request("python", HOST, "127.0.0.1", 8443, "/k", tmp_path, tmp_path / "o", repeat=3)
    one = b"GET /k HTTP/1.1\r\nHost: sacc.test:8443\r\n"
    assert get.request_bytes == one + b"\r\n" + one + b"\r\n" + one + b"Connection: close\r\n\r\n"
    post = Request("openssl", HOST, "127.0.0.1", 443, "/u", tmp_path, tmp_path / "o", upload=tmp_path / "up", repeat=2)
    head = (b"POST /u HTTP/1.1\r\nHost: sacc.test\r\nContent-Type: application/octet-stream\r\n"
            b"Content-Length: %d\r\n" % len(data))  # fmt: skip
    assert post.request_bytes == head + b"\r\n" + data + head + b"Connection: close\r\n\r\n" + data
    assert expected_body(post, data) == upload_receipt(data) == b"%d %08x\n" % (len(data), zlib.crc32(data))
    assert expected_body(get, data) == data


_OK = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: keep-alive\r\n\r\nabc"
_WRONG, _SHORT = _OK.replace(b"abc", b"abd"), _OK.replace(b"abc", b"ab")


@pytest.mark.parametrize("stream, error, silent", [
    (_OK * 3, "", False),
    (_OK * 2, "1 of 3 responses missing", False),
    (b"", "response 1: no HTTP response head; 2 of 3 responses missing", False),
    (_OK + _WRONG + _OK, "response 2: body differs at byte 2", True),
    # the wrong body was whole, and a reader had taken it before the third broke visibly
    (_OK + _WRONG + _SHORT, "response 2: body differs at byte 2; response 3: short body: got 2 of 3 bytes", True),
    (_OK * 3 + b"x", "response 3: long body: got 4 bytes, Content-Length 3", False),
    (_OK + _OK.replace(b"200 OK", b"404 No") + _OK, "response 2: status line 'HTTP/1.1 404 No', not HTTP/1.1 200; "
     "1 of 3 responses missing", False),
])  # fmt: skip
@pytest.mark.parametrize("client", ["python", "gnutls", "openssl"])
def test_a_raw_stream_of_three_responses_is_judged_each(client: str, stream: bytes, error: str, silent: bool,
                                                       tmp_path: Path) -> None:  # fmt: skip
    req = Request(client, HOST, "127.0.0.1", 443, "/k", tmp_path, tmp_path / "out", repeat=3)
    (tmp_path / "out").write_bytes(stream)
    outcome = finish(_exited(), req, b"abc")
    assert (outcome.error, outcome.body_ok, outcome.silently_wrong) == (error, not error, silent)
    assert outcome.got == sum(len(r.body) for r in split_responses(stream, 3))


def test_curl_bodies_and_connections_are_judged_each(tmp_path: Path) -> None:
    req = Request("curl", HOST, "127.0.0.1", 443, "/k", tmp_path, tmp_path / "out", repeat=3)
    for name, body in [("out", b"abc"), ("out.2", b"abd"), ("out.3", b"abc")]:
        (tmp_path / name).write_bytes(body)
    (tmp_path / "out.stdout").write_text("1\n0\n0\n")
    outcome = finish(_exited(), req, b"abc")
    assert outcome == Outcome("curl", "/k", 0, "response 2: body differs at byte 2", False, 9, None, True)
    (tmp_path / "out.2").write_bytes(b"abc")
    (tmp_path / "out.stdout").write_text("1\n1\n0\n")
    outcome = finish(_exited(), req, b"abc")
    assert outcome == Outcome("curl", "/k", 0, "curl reported 2 connections for 3 requests, not one", True, 9, None, False)
    (tmp_path / "out.3").unlink()
    (tmp_path / "out.stdout").write_text("1\n0\n0\n")
    assert finish(_exited(), req, b"abc").error == "response 3: no body received"


# --- the judgement, as pure functions -----------------------------------------------------


@given(st.binary(max_size=4096))
def test_any_bytes_split_into_a_judgement(raw: bytes) -> None:
    response = split_response(raw)
    assert raw.endswith(response.body)
    assert (response.problem == "") == (response.length is not None)
    if not response.problem:
        assert raw.startswith(b"HTTP/1.1 200")


@given(st.binary(max_size=4096), st.lists(st.sampled_from(["Server: x", "X-A: 1", "content-type: a/b"])),
       st.sampled_from(["Content-Length", "content-length", "CONTENT-LENGTH"]))  # fmt: skip
def test_well_formed_responses_split_exactly(body: bytes, headers: list[str], name: str) -> None:
    head = "\r\n".join(["HTTP/1.1 200 OK", *headers, f"{name}: {len(body)}"]).encode()
    response = split_response(head + b"\r\n\r\n" + body)
    assert (response.problem, response.length, response.body) == ("", len(body), body)


@pytest.mark.parametrize("raw, problem", [
    (b"", "no HTTP response head"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n", "no HTTP response head"),
    (b"HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\n\r\nabc", "not HTTP/1.1 200"),
    (b"HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\nabc", "not HTTP/1.1 200"),
    (b"HTTP/1.1 200 OK\r\n\r\nabc", "Content-Length"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: -3\r\n\r\nabc", "Content-Length"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc", "Content-Length"),
])  # fmt: skip
def test_bad_heads_are_named(raw: bytes, problem: str) -> None:
    assert problem in split_response(raw).problem


@given(st.binary(max_size=300), st.binary(max_size=300))
def test_judge_body_names_the_first_difference(body: bytes, expected: bytes) -> None:
    verdict = judge_body(body, expected)
    assert (verdict == "") == (body == expected)
    i = next((k for k, (a, b) in enumerate(zip(body, expected, strict=False)) if a != b), None)
    if i is not None:
        assert verdict == f"body differs at byte {i}"
    elif len(body) < len(expected):
        assert verdict == f"short body: got {len(body)} of {len(expected)} bytes"
    elif len(body) > len(expected):
        assert verdict == f"long body: got {len(body)} of {len(expected)} bytes"


def test_first_difference_past_the_first_block() -> None:
    a = FILES["/f3"]
    for at in (0, 65535, 65536, 200_001, len(a) - 1):
        b = bytearray(a)
        b[at] ^= 1
        assert first_difference(a, bytes(b)) == at
    assert first_difference(a, a[:100_000]) == 100_000


def test_openssl_message_logs_tell_full_from_abbreviated_handshakes() -> None:
    full = "<<< TLS 1.2, Handshake [length 0055], ServerHello\n<<< TLS 1.2, Handshake [length 02fe], Certificate\n"
    short = "<<< TLS 1.2, Handshake [length 0055], ServerHello\n<<< TLS 1.2, Handshake [length 0010], Finished\n"
    assert (openssl_resumed(full), openssl_resumed(short), openssl_resumed("")) == (False, True, False)


def test_the_clients_own_words_are_kept_without_the_noise() -> None:
    curl = ("curl: (60) SSL certificate problem: self-signed certificate\n"
            "More details here: https://curl.se/docs/sslcerts.html\n\nadvice\nmore advice\n")  # fmt: skip
    assert client_error_text(curl) == "curl: (60) SSL certificate problem: self-signed certificate"
    assert client_error_text("depth=0 CN = sacc.test\nverify return:1\n") == ""
    gnutls_log = "- Status: The certificate is NOT trusted.\n*** PKI verification failed\n"
    assert client_error_text("", gnutls_log) == "*** PKI verification failed"
    long = client_error_text("x" * 1000 + "the reason")
    assert len(long) == 300 and long.endswith("the reason")


def _response(body: bytes, length: int) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: keep-alive\r\n\r\n%s" % (length, body)


# pieces of a stream: arbitrary bytes, or responses whose Content-Length may be a lie
_PIECES = st.one_of(st.binary(max_size=64), st.builds(_response, st.binary(max_size=64), st.integers(0, 80)))


@given(st.lists(_PIECES, max_size=8).map(b"".join) | st.binary(max_size=2048), st.integers(1, MAX_REPEAT))
def test_any_bytes_split_into_responses(raw: bytes, limit: int) -> None:
    responses = split_responses(raw, limit)
    assert 1 <= len(responses) <= limit
    assert all(r.problem == "" and len(r.body) == r.length for r in responses[:-1])
    assert (responses[-1].problem == "") == (responses[-1].length is not None)
    assert sum(len(r.body) for r in responses) <= len(raw)
    assert split_responses(raw, 1) == [split_response(raw)]


@given(st.lists(st.binary(max_size=300), min_size=1, max_size=MAX_REPEAT), st.binary(max_size=50))
def test_back_to_back_responses_split_exactly(bodies: list[bytes], tail: bytes) -> None:
    raw = b"".join(_response(body, len(body)) for body in bodies)
    assert split_responses(raw, len(bodies)) == [clients.RawResponse("", len(b), b) for b in bodies]
    # bytes after the last one: the limit-th response takes them (a long body)
    more = split_responses(raw + tail, len(bodies))
    assert more[:-1] == split_responses(raw, len(bodies))[:-1] and more[-1].body == bodies[-1] + tail


def test_split_responses_wants_a_positive_limit() -> None:
    with pytest.raises(ValueError, match="limit"):
        split_responses(b"", 0)
