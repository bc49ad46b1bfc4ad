"""Continuing an exported connection byte for byte: deterministic CBC IVs (issue 11 §1).

An SSLACC mirror must be able to resend the tail of a record the peer has
acknowledged only in part.  That needs two imports of one exported state, and
the original connection, to seal a plaintext into the *same* bytes -- which
they do only because explicit CBC IVs come from exported state
(``IV = AES-ECB_k'(seq)``, :mod:`tls12.record`), not from the RNG.
"""

from __future__ import annotations

import json
import ssl

import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from tests.interop.tls_peers import python_ssl_context
from tls12 import ClientConfig, ClientConnection, ServerConfig, ServerConnection
from tls12.events import ApplicationData
from tls12.record import MAX_PLAINTEXT, DirectionKeys, OutgoingRecord, WriteProtection
from tls12.recordcrypto import PyRecordCipher
from tls12.suites import SUITES, CipherSuite
from tls12.testing import credentials, pipe, seeded_rng

CBC_SUITES = [s for s, p in SUITES.items() if p.block_size]
BODY = bytes(range(256)) * 100  # 25,600 bytes: two records, the second partial


def _established(suite: CipherSuite, seed: int = 1) -> tuple[ClientConnection, ServerConnection]:
    server = ServerConnection(
        ServerConfig(credentials=credentials(), cipher_suites=(suite,), rng=seeded_rng(seed))
    )
    client = ClientConnection(ClientConfig(cipher_suites=(suite,), rng=seeded_rng(seed + 100)))
    pipe(client, server)
    assert client.handshake_complete and server.handshake_complete
    return client, server


def _copy(server: ServerConnection, seed: str) -> ServerConnection:
    """An imported copy whose RNG differs from the original's: IVs must not depend on it."""
    config = ServerConfig(credentials=credentials(), rng=seeded_rng(seed))
    return ServerConnection.import_state(config, server.export_state())


@pytest.mark.parametrize("suite", list(SUITES), ids=lambda s: SUITES[s].openssl_name)
def test_two_imports_and_the_original_seal_identical_bytes(suite: CipherSuite) -> None:
    client, server = _established(suite)
    server.send_data(b"before the export")
    client.receive_data(server.data_to_send())
    first, second = _copy(server, "copy one"), _copy(server, "copy two")
    sent = []
    for conn in (server, first, second):
        conn.send_data(BODY)
        sent.append(conn.data_to_send())
    assert sent[0] == sent[1] == sent[2]
    events = client.receive_data(sent[1])
    assert b"".join(e.data for e in events if isinstance(e, ApplicationData)) == BODY


@pytest.mark.parametrize("suite", CBC_SUITES, ids=lambda s: SUITES[s].openssl_name)
def test_cbc_ivs_are_fresh_per_record_and_per_connection(suite: CipherSuite) -> None:
    ivs = []
    for seed in (1, 2):
        _, server = _established(suite, seed)
        for _ in range(3):
            server.send_data(b"x")
            ivs.append(server.data_to_send()[5:21])  # the explicit IV follows the header
    assert len(set(ivs)) == len(ivs)


@pytest.mark.parametrize("suite", CBC_SUITES, ids=lambda s: SUITES[s].openssl_name)
def test_iv_key_is_not_what_a_splitting_proxy_receives(suite: CipherSuite) -> None:
    """k' is none of the exposed values, and the IVs are not ECB of the seq under any of them."""
    _, server = _established(suite)
    keys = server.write_protection.keys
    assert keys is not None and len(keys.iv_key) == 16
    exposed = [server.write_protection.enc_key, server.write_protection.iv]  # a KeyExpose message
    assert keys.iv_key not in exposed + [keys.mac_key[:16], server.master_secret[:16]]
    seq = server.write_protection.seq
    server.send_data(b"payload")
    iv = server.data_to_send()[5:21]
    block = seq.to_bytes(16, "big")
    for key in exposed:
        guess = Cipher(algorithms.AES(key), modes.ECB()).encryptor().update(block)
        assert guess != iv
    own = Cipher(algorithms.AES(keys.iv_key), modes.ECB()).encryptor().update(block)
    assert own == iv  # the documented construction, so the check above is not vacuous


@pytest.mark.parametrize("suite", CBC_SUITES, ids=lambda s: SUITES[s].openssl_name)
def test_write_protection_records_match_the_python_twin(suite: CipherSuite) -> None:
    """Whatever backend seals, the Python twin given the same IV produces the same fragment."""
    _, server = _established(suite)
    keys = server.write_protection.keys
    assert keys is not None
    twin = PyRecordCipher(keys.params.cipher, keys.params.mac, keys.enc_key, keys.mac_key)
    protection = WriteProtection(keys, seeded_rng("unused"), seq=7)
    plaintexts = [b"a" * n for n in (0, 1, 100, MAX_PLAINTEXT)]
    records = [OutgoingRecord(23, 0x0303, 7 + i, p) for i, p in enumerate(plaintexts)]
    batch = protection.seal_many(records)
    singles = b"".join(protection.seal(r) for r in records)
    assert batch == singles
    pos = 0
    for record in records:
        length = int.from_bytes(batch[pos + 3 : pos + 5], "big")
        fragment = batch[pos + 5 : pos + 5 + length]
        expected = twin.seal(record.seq, 23, 0x0303, record.plaintext, fragment[:16])
        assert fragment == expected
        pos += 5 + length
    assert pos == len(batch)


def test_keys_without_iv_key_still_draw_ivs_from_the_rng() -> None:
    """Hand-built keys (no k') keep the old behaviour: IVs from the injected RNG."""
    params = SUITES[CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA]
    keys = DirectionKeys(params, bytes(16), bytes(20), bytes(16))
    record = OutgoingRecord(23, 0x0303, 0, b"data")
    one = WriteProtection(keys, seeded_rng(1)).seal(record)
    two = WriteProtection(keys, seeded_rng(2)).seal(record)
    assert one[5:21] == seeded_rng(1)(16) and one[5:21] != two[5:21]
    with pytest.raises(ValueError, match="iv_key"):
        DirectionKeys(params, bytes(16), bytes(20), bytes(16), b"short")


def test_documents_without_iv_key_still_import() -> None:
    """An export made before k' existed imports (its IVs then come from the RNG)."""
    client, server = _established(CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA)
    doc = json.loads(server.export_state())
    for section in (doc["reader"], doc["writer"]):
        del section["keys"]["iv_key"]
    copy = ServerConnection.import_state(
        ServerConfig(credentials=credentials(), rng=seeded_rng(5)), json.dumps(doc).encode()
    )
    copy.send_data(b"old format")
    events = client.receive_data(copy.data_to_send())
    assert [e.data for e in events if isinstance(e, ApplicationData)] == [b"old format"]


def _python_ssl_client(
    suite: CipherSuite, server: ServerConnection
) -> tuple[ssl.SSLObject, ssl.MemoryBIO, ssl.MemoryBIO]:
    """Python's ``ssl`` (OpenSSL) as the client of ``server``, in memory."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = python_ssl_context(suite).wrap_bio(incoming, outgoing)
    for _ in range(10):
        try:
            tls.do_handshake()
            break
        except ssl.SSLWantReadError:
            server.receive_data(outgoing.read())  # never b"" (end of file) here
            incoming.write(server.data_to_send())
    else:  # pragma: no cover - a handshake takes two rounds
        raise AssertionError("handshake with Python ssl did not finish")
    assert not outgoing.pending  # the client's Finished went out in the loop
    return tls, incoming, outgoing


def _read_all(tls: ssl.SSLObject, size: int) -> bytes:
    out = b""
    while len(out) < size:
        out += tls.read(size - len(out))
    return out


@pytest.mark.parametrize(
    "suite",
    [CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA, CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256],
    ids=lambda s: SUITES[s].openssl_name,
)
def test_python_ssl_accepts_records_resealed_by_an_import(suite: CipherSuite) -> None:
    server = ServerConnection(
        ServerConfig(credentials=credentials(), cipher_suites=(suite,), rng=seeded_rng(9))
    )
    tls, incoming, outgoing = _python_ssl_client(suite, server)
    tls.write(b"GET / HTTP/1.0\r\n\r\n")
    events = server.receive_data(outgoing.read())
    assert [e.data for e in events if isinstance(e, ApplicationData)] == [b"GET / HTTP/1.0\r\n\r\n"]
    first, second = _copy(server, "a"), _copy(server, "b")
    sent = []
    for conn in (server, first, second):
        conn.send_data(BODY)
        sent.append(conn.data_to_send())
    assert sent[0] == sent[1] == sent[2]
    incoming.write(sent[2])
    assert _read_all(tls, len(BODY)) == BODY
    # and the copy goes on: a second message, then the client's answer to the copy
    second.send_data(b"more")
    incoming.write(second.data_to_send())
    assert _read_all(tls, 4) == b"more"
    tls.write(b"thanks")
    events = second.receive_data(outgoing.read())
    assert [e.data for e in events if isinstance(e, ApplicationData)] == [b"thanks"]
