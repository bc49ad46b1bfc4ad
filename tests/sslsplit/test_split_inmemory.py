"""Splitting server -> splicer -> unmodified tls12 client, in memory: correctness and tampering."""

from __future__ import annotations

import pytest
from split_helpers import Chain

from sslsplit.splicer import PayloadMismatch
from sslsplit.wire import IDEncoding, MessageReader, Stub
from tls12.errors import BadRecordMAC
from tls12.events import ApplicationData, HandshakeComplete
from tls12.record import OutgoingRecord
from tls12.suites import SUITES, CipherSuite

SPLIT_SUITES = [s for s, p in SUITES.items() if not p.aead]


def _body(n: int, seed: int = 0) -> bytes:
    import random

    return random.Random(seed).randbytes(n)


@pytest.mark.parametrize("suite", SPLIT_SUITES, ids=lambda s: s.name)
def test_client_receives_spliced_stream(suite: CipherSuite) -> None:
    chain = Chain(suite)
    s_events, c_events = chain.pump()
    assert isinstance(c_events[0], HandshakeComplete)
    body = _body(100_000)
    chain.server.send_data(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
    chain.server.send_data(body)
    events = chain.client.receive_data(chain.to_client(chain.server.data_to_send()))
    assert b"".join(e.data for e in events if isinstance(e, ApplicationData)).endswith(body)
    assert chain.writer.stats.digest_stubs >= 7  # the certificate and the six full body records
    if SUITES[suite].cipher != "null":
        assert chain.writer.stats.key_exposed


def test_warm_proxy_server_sends_little() -> None:
    suite = CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA
    body = _body(1 << 20)
    chain = Chain(suite)
    chain.pump()
    before = chain.server_wire
    chain.server.send_data(body)
    out = chain.server.data_to_send()
    events = chain.client.receive_data(chain.to_client(out))
    assert b"".join(e.data for e in events if isinstance(e, ApplicationData)) == body
    stub_bytes = chain.server_wire - before
    assert stub_bytes < 0.01 * len(body)  # 64 stubs of ~70 bytes instead of 1 MiB


def test_aead_suites_cannot_be_split() -> None:
    """With AES-GCM the tag covers the ciphertext: the server can only relay whole records."""
    chain = Chain(CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)
    chain.pump()
    assert chain.client.handshake_complete
    body = _body(100_000, 3)
    chain.server.send_data(body)
    events = chain.client.receive_data(chain.to_client(chain.server.data_to_send()))
    assert b"".join(e.data for e in events if isinstance(e, ApplicationData)) == body
    assert chain.writer.stats.verbatim >= 7 and not chain.writer.stats.key_exposed
    assert chain.server_wire > len(body)  # nothing saved
    with pytest.raises(ValueError, match="AEAD"):
        chain.server.write_protection.compute_mac(OutgoingRecord(23, 0x0303, 99, b"payload"))


def test_key_expose_off_sends_verbatim_records() -> None:
    chain = Chain(CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA, expose_keys=False)
    chain.pump()
    chain.server.send_data(b"x" * 50_000)
    events = chain.client.receive_data(chain.to_client(chain.server.data_to_send()))
    assert b"".join(e.data for e in events) == b"x" * 50_000
    assert chain.writer.stats.verbatim > 0 and not chain.writer.stats.key_exposed


def test_server_never_sends_mac_or_client_keys() -> None:
    suite = CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA256
    chain = Chain(suite)
    captured = b""
    original = chain.to_client

    def capture(stream: bytes, lookup=None) -> bytes:
        nonlocal captured
        captured += stream
        return original(stream, lookup)

    chain.to_client = capture  # type: ignore[method-assign]
    chain.pump()
    chain.server.send_data(_body(40_000))
    chain.client.receive_data(chain.to_client(chain.server.data_to_send()))
    server_keys = chain.server.write_protection.keys
    client_keys = chain.server._reader.keys
    assert server_keys is not None and client_keys is not None
    assert server_keys.enc_key in captured  # the exposed key, by design
    for secret in (server_keys.mac_key, client_keys.mac_key, client_keys.enc_key, chain.server.master_secret):
        assert secret not in captured


@pytest.mark.parametrize("suite", [CipherSuite.TLS_RSA_WITH_NULL_SHA, CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA])
def test_proxy_cannot_forge_a_client_record(suite: CipherSuite) -> None:
    """With everything the proxy sees (the exposed server-write key, all MACs), a forged request fails."""
    from tls12.record import record_header
    from tls12.recordcrypto import RecordCipher

    chain = Chain(suite)
    chain.pump()
    params = SUITES[suite]
    exposed = chain.server.write_protection.enc_key
    cipher = RecordCipher(params.cipher, params.mac, exposed, b"")
    forged_mac = bytes(params.mac_length)  # the proxy never learns a MAC key
    body = cipher.seal_with_mac(b"GET /secret HTTP/1.1\r\n\r\n", forged_mac, bytes(16) if params.block_size else b"")
    with pytest.raises(BadRecordMAC):
        chain.server.receive_data(record_header(23, 0x0303, len(body)) + body)


def _tampered_session() -> Chain:
    chain = Chain(CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA)
    chain.pump()
    chain.server.send_data(_body(50_000, 1))
    return chain


def test_flipped_payload_from_cache_is_refused_by_digest_check() -> None:
    chain = _tampered_session()
    stream = chain.server.data_to_send()
    with pytest.raises(PayloadMismatch):
        chain.to_client(stream, lookup=lambda ident: bytes([chain.store.get(ident)[0] ^ 1]) + chain.store.get(ident)[1:])


def test_malicious_splicer_flipping_a_byte_fails_the_client() -> None:
    chain = _tampered_session()
    stream = chain.server.data_to_send()
    chain.splicer.feed(stream)
    out = b""
    while (msg := chain.splicer.next_message()) is not None:
        data = chain.splicer.handle(msg)
        if data is None:
            payload = bytearray(chain.store.get(msg.ident))  # type: ignore[union-attr]
            payload[10] ^= 0x01
            data = chain.splicer._build(msg, bytes(payload))  # a malicious proxy skips its own digest check
        out += data
    with pytest.raises(BadRecordMAC):
        chain.client.receive_data(out)


def test_swapped_payloads_fail_the_client() -> None:
    chain = _tampered_session()
    reader = MessageReader()
    reader.feed(chain.server.data_to_send())
    stubs = []
    while (m := reader.next_message()) is not None:
        stubs.append(m)
    digests = [i for i, m in enumerate(stubs) if isinstance(m, Stub) and m.encoding is not IDEncoding.LITERAL]
    a, b = digests[0], digests[1]
    payload_a, payload_b = chain.store.get(stubs[a].ident), chain.store.get(stubs[b].ident)
    out = b""
    for i, m in enumerate(stubs):
        if i == a:
            out += chain.splicer._build(m, payload_b)  # type: ignore[arg-type]
        elif i == b:
            out += chain.splicer._build(m, payload_a)  # type: ignore[arg-type]
        else:
            data = chain.splicer.handle(m)
            out += data if data is not None else chain.splicer.rebuild(m, chain.store.get(m.ident))  # type: ignore[arg-type, union-attr]
    with pytest.raises(BadRecordMAC):
        chain.client.receive_data(out)
