"""A proxy cannot forge what the client says: the origin's MAC check refuses every forgery it can build.

In key-expose mode the proxy holds the server-write encryption key and IV,
sees every MAC the origin sends and every record the client sends -- and
never the client-write MAC key nor the client-write encryption key (paper
§3.4).  With a NULL suite it reads the client's requests in the clear.  The
tap used here (:mod:`split_taps`) sits where the proxy sits and replaces the
client's first request, an unmodified Python ``ssl`` client's
``GET /file_200000.bin``, by the best forgeries that position allows:

``modify``
    the genuine record, changed to ask for ``/file_100000.bin``: for AES-CBC
    by flipping bits of the explicit IV, which flips exactly those bits of the
    first plaintext block (CBC malleability; padding and MAC bytes untouched);
    for NULL by editing the visible plaintext and keeping the genuine MAC.
``wrong-keys``
    a fresh record for that request, MAC'd under a key the proxy made up; for
    AES-CBC encrypted under the *exposed server-write key* used as if it were
    the client's, and ending in the genuine record's last two cipher blocks so
    that the padding still decrypts correctly under the real client key.
``replay``
    the client's own Finished record, a genuine record of this connection
    under the right keys, replayed in the request's place (wrong sequence
    number and content type).

Every forgery is correctly framed, decrypts to well-formed padding under the
real key, and reaches the MAC check.  With that check disabled (tried locally,
not kept) every case here fails: ``modify`` and the NULL ``wrong-keys`` are
served -- another file than the client asked for --, the AES ``wrong-keys``
reaches HTTP as garbage and the connection just drops, and ``replay`` is
refused as an unexpected message: never with ``bad_record_mac``.
The test asserts, for every suite the splitting origin accepts and in both
of its modes (NULL, key-expose) and ``auto``: the origin answers with a fatal
``bad_record_mac`` alert (seen in its stub stream and by the client), closes,
and serves nothing -- not one application-data byte leaves it.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sslsplit.aio import BackgroundLoop
from sslsplit.wire import IDEncoding, KeyExpose, Stub
from sslsplit.writer import ENCRYPTING_SUITES, NULL_SUITES
from testbed.apps.stats import ConnectionRecord
from tests.interop.split_taps import (
    KeyRecordingServer,
    TapConnection,
    TappedProxy,
    close_tapped,
    tapped_proxy,
)
from tests.interop.tls_peers import make_docroot, python_ssl_get, suite_id
from tls12.certs import Credentials
from tls12.errors import AlertDescription, AlertLevel
from tls12.record import ContentType
from tls12.recordcrypto import RecordCipher
from tls12.suites import SUITES, CipherSuite, SuiteParams

pytestmark = pytest.mark.interop

REQUESTED, FORGED_TARGET = 200_000, 100_000
KNOWN_BLOCK = b"GET /file_200000"  # the first 16 plaintext bytes of the client's request
TARGET_BLOCK = b"GET /file_100000"  # what the forger wants the origin to read instead
CASES = [("null", s) for s in NULL_SUITES] + [("key-expose", s) for s in ENCRYPTING_SUITES]
CASES += [("auto", s) for s in NULL_SUITES + ENCRYPTING_SUITES]
FORGERIES = ["modify", "wrong-keys", "replay"]


@pytest.fixture(scope="module")
def forgery_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("forgery-www")
    make_docroot(root, [REQUESTED, FORGED_TARGET])
    return root


@pytest.fixture(scope="module")
def origins(credentials: Credentials, forgery_root: Path) -> Iterator[tuple[BackgroundLoop, dict[str, KeyRecordingServer]]]:
    """One splitting origin per mode, on one background loop."""
    with BackgroundLoop() as loop:
        servers = {mode: KeyRecordingServer(forgery_root, credentials, mode=mode, idle_timeout=10.0) for mode in ("null", "key-expose", "auto")}
        for server in servers.values():
            loop.run(server.start())
        try:
            yield loop, servers
        finally:
            for server in servers.values():
                loop.run(server.close())


# --- the forgeries: each gets the tap's view of the connection and the genuine request record ---------


def _modify(conn: TapConnection, record: bytes, params: SuiteParams) -> bytes:
    head, fragment = record[:5], record[5:]
    if params.block_size:  # P1 = D(C1) xor IV: flipping IV bits flips the same plaintext bits
        delta = bytes(a ^ b for a, b in zip(KNOWN_BLOCK, TARGET_BLOCK, strict=True))
        return head + bytes(x ^ d for x, d in zip(fragment[:16], delta, strict=True)) + fragment[16:]
    assert fragment.startswith(KNOWN_BLOCK), "a NULL-suite request is readable by the proxy"
    return head + TARGET_BLOCK + fragment[16:]  # the genuine MAC, over the genuine plaintext


def _wrong_keys(conn: TapConnection, record: bytes, params: SuiteParams) -> bytes:
    head, fragment = record[:5], record[5:]
    version = int.from_bytes(head[1:3], "big")
    made_up_mac_key = os.urandom(params.mac_length)  # the proxy never learns client_write_MAC_key
    if not params.block_size:
        plaintext = TARGET_BLOCK + fragment[16 : len(fragment) - params.mac_length]
        sealed = RecordCipher("null", params.mac, b"", made_up_mac_key).seal(1, ContentType.APPLICATION_DATA, version, plaintext, b"")
        assert len(sealed) == len(fragment)
        return head + sealed
    exposed = [m for m in conn.messages(complete=False) if isinstance(m, KeyExpose)]
    assert len(exposed) == 1 and exposed[0].key, "key-expose mode: the proxy holds the server-write key"
    length = len(fragment) - 16 - params.mac_length - 1  # fills the same number of blocks
    request = b"GET /file_100000.bin HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: "
    plaintext = request.ljust(length - 4, b"a") + b"\r\n\r\n"
    cipher = RecordCipher(params.cipher, params.mac, exposed[0].key, made_up_mac_key)
    sealed = cipher.seal(1, ContentType.APPLICATION_DATA, version, plaintext, os.urandom(16))
    assert len(sealed) == len(fragment)
    # The genuine last two blocks decrypt (under the real client-write key) to the genuine last
    # plaintext block: valid padding, so only the MAC check is left to refuse the record.
    return head + sealed[:-32] + fragment[-32:]


def _replay(conn: TapConnection, record: bytes, params: SuiteParams) -> bytes:
    return conn.state["finished"]


FORGE: dict[str, Callable[[TapConnection, bytes, SuiteParams], bytes]] = {
    "modify": _modify,
    "wrong-keys": _wrong_keys,
    "replay": _replay,
}


def forger(forgery: str, params: SuiteParams) -> Callable[[TapConnection, bytes], bytes]:
    """A tap rewrite: pass the handshake through, replace the first application-data record."""

    def rewrite(conn: TapConnection, record: bytes) -> bytes:
        state = conn.state
        if record[0] == ContentType.CHANGE_CIPHER_SPEC:
            state["ccs"] = True
        elif record[0] == ContentType.HANDSHAKE and state.get("ccs") and "finished" not in state:
            state["finished"] = record
        elif record[0] == ContentType.APPLICATION_DATA and "forged" not in state:
            state["genuine"] = record
            state["forged"] = FORGE[forgery](conn, record, params)
            return state["forged"]
        return record

    return rewrite


def _server_record(server: KeyRecordingServer, port: int, timeout: float = 10.0) -> ConnectionRecord:
    """The origin's record of the connection that came from the tap's ``port``, once it ended."""
    deadline = time.monotonic() + timeout
    while True:
        found = [r for r in list(server.stats.connections) if r.peer == f"127.0.0.1:{port}"]
        if found:
            return found[0]
        assert time.monotonic() < deadline, "the origin recorded no end of the forged connection"
        time.sleep(0.01)


@pytest.mark.parametrize("forgery", FORGERIES)
@pytest.mark.parametrize(("mode", "suite"), CASES, ids=[f"{m}-{suite_id(s)}" for m, s in CASES])
def test_origin_refuses_forged_client_record(
    origins: tuple[BackgroundLoop, dict[str, KeyRecordingServer]], mode: str, suite: CipherSuite, forgery: str
) -> None:
    loop, servers = origins
    server = servers[mode]
    params = SUITES[suite]
    tapped: TappedProxy = tapped_proxy(loop, server, forger(forgery, params))
    try:
        with pytest.raises(ssl.SSLError) as info:
            python_ssl_get(tapped.port, f"/file_{REQUESTED}.bin", suite, timeout=20)
        # the client read the origin's fatal alert, relayed (and re-encrypted) by the proxy
        assert "BAD_RECORD_MAC" in str(info.value).upper().replace(" ", "_"), info.value
        conn = tapped.stubs.connections[0]
        loop.run(asyncio.wait_for(conn.origin_closed.wait(), 10))
    finally:
        close_tapped(loop, tapped)
    assert not tapped.stubs.errors

    genuine, forged = conn.state["genuine"], conn.state["forged"]
    assert forged != genuine and forged.startswith(bytes([forged[0], 3, 3]))  # a well-framed TLS 1.2 record
    if forgery != "replay":
        assert len(forged) == len(genuine) and forged[0] == ContentType.APPLICATION_DATA
    if params.block_size:
        assert (len(forged) - 5) % 16 == 0

    messages = conn.messages()
    alert = messages[-1]
    assert isinstance(alert, Stub) and alert.content_type == ContentType.ALERT
    assert alert.encoding is IDEncoding.LITERAL and alert.ident == bytes((AlertLevel.FATAL, AlertDescription.BAD_RECORD_MAC))
    assert len(alert.mac) == params.mac_length  # a genuine, authenticated alert
    assert not any(isinstance(m, Stub) and m.content_type == ContentType.APPLICATION_DATA for m in messages)
    # the only payload a proxy could have fetched from the record store is the certificate's
    assert all(m.content_type == ContentType.HANDSHAKE for m in messages if isinstance(m, Stub) and m.encoding is not IDEncoding.LITERAL)

    record = _server_record(server, conn.local_port)
    assert record.error == "BadRecordMAC" and record.requests == 0
    assert record.cipher_suite == suite
