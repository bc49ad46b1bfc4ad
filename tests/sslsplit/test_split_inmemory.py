"""Splitting server -> splicer -> unmodified tls12 client, in memory: correctness and tampering."""

from __future__ import annotations

import os

import pytest

from sslsplit.splicer import PayloadMismatch
from sslsplit.wire import IDEncoding, KeyExpose, Message, MessageReader, Stub
from tests.sslsplit.split_helpers import Chain
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
    c_events, s_events = chain.pipe()
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
    chain.pipe()
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
    chain.pipe()
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
    chain.pipe()
    chain.server.send_data(b"x" * 50_000)
    events = chain.client.receive_data(chain.to_client(chain.server.data_to_send()))
    assert b"".join(e.data for e in events) == b"x" * 50_000
    assert chain.writer.stats.verbatim > 0 and not chain.writer.stats.key_exposed


@pytest.mark.parametrize("expose_keys", [True, False], ids=["key-expose", "no-expose"])
@pytest.mark.parametrize("suite", SPLIT_SUITES, ids=lambda s: s.name)
def test_server_never_sends_mac_or_client_keys(suite: CipherSuite, expose_keys: bool) -> None:
    """Everything the proxy gets -- the message stream and every payload it looks up -- holds no secret.

    The interop counterpart (``tests/interop/test_sslsplit_keyleak.py``) taps real sockets.
    """
    chain = Chain(suite, expose_keys=expose_keys)
    streams: list[bytes] = []  # the server's message stream to the proxy
    payloads: list[bytes] = []  # what the proxy looked up on the server's record store
    original = chain.to_client

    def lookup(ident: bytes) -> bytes:
        payload = chain.store.get(ident)
        assert payload is not None
        payloads.append(payload)
        return payload

    def capture(stream: bytes, lookup_: object = None) -> bytes:
        streams.append(stream)
        return original(stream, lookup)

    chain.to_client = capture  # type: ignore[method-assign]
    chain.pipe()
    chain.server.send_data(b"HTTP/1.1 200 OK\r\nContent-Length: 40000\r\n\r\n")
    chain.server.send_data(_body(40_000))
    chain.client.receive_data(chain.to_client(chain.server.data_to_send()))
    server_keys, client_keys = chain.server.write_protection.keys, chain.server._reader.keys
    assert server_keys is not None and client_keys is not None
    secrets = [chain.server.master_secret, server_keys.mac_key, client_keys.mac_key, client_keys.enc_key, client_keys.iv]
    if not (expose_keys or server_keys.params.cipher == "null"):
        secrets += [server_keys.enc_key, server_keys.iv]  # nothing is exposed: records travel sealed
    for secret in filter(None, secrets):
        for i in range(len(secret) - 7):  # no 8-byte window of any secret, anywhere
            assert not any(secret[i : i + 8] in c for c in streams + payloads)
    exposed = [m for c in streams for m in _messages(c) if isinstance(m, KeyExpose)]
    if expose_keys or server_keys.params.cipher == "null":
        assert [(m.key, m.iv) for m in exposed] == [(server_keys.enc_key, server_keys.iv)]
        assert len(payloads) == 4  # the certificate and the three body records came from the store
    else:
        assert exposed == [] and len(payloads) == 1  # only the (plaintext) certificate was split


def _messages(stream: bytes) -> list[Message]:
    reader = MessageReader()
    reader.feed(stream)
    out = []
    while (m := reader.next_message()) is not None:
        out.append(m)
    return out


@pytest.mark.parametrize("forgery", ["modify", "wrong-keys"])
@pytest.mark.parametrize("suite", SPLIT_SUITES, ids=lambda s: s.name)
def test_proxy_cannot_forge_a_client_record(suite: CipherSuite, forgery: str) -> None:
    """The best client-direction forgeries a proxy can build reach the server's MAC check and fail it.

    ``modify`` retargets the genuine request (CBC: flip explicit-IV bits, which flip the same bits of
    the first plaintext block; NULL: edit the visible plaintext, keep the genuine MAC).  ``wrong-keys``
    seals the retargeted request under keys the proxy has or invents -- the exposed server-write key,
    a made-up MAC key -- and, for CBC, keeps the genuine last two blocks so the padding stays valid.
    With the MAC check disabled every case here fails (no BadRecordMAC).  Real sockets and clients:
    ``tests/interop/test_sslsplit_forgery.py``.
    """
    from tls12.recordcrypto import RecordCipher

    chain = Chain(suite)
    chain.pipe()
    params = SUITES[suite]
    chain.client.send_data(b"GET /file_200000.bin HTTP/1.1\r\nHost: localhost\r\n\r\n")
    genuine = chain.client.data_to_send()
    head, fragment = genuine[:5], genuine[5:]
    known, target = b"GET /file_200000", b"GET /file_100000"
    if forgery == "modify" and params.block_size:
        iv = bytes(x ^ a ^ b for x, a, b in zip(fragment[:16], known, target, strict=True))
        forged = iv + fragment[16:]
    elif forgery == "modify":
        forged = target + fragment[16:]
    else:
        mac_key = os.urandom(params.mac_length)
        exposed = chain.server.write_protection.enc_key  # all the proxy holds: the server-write key
        length = len(fragment) - params.block_size - params.mac_length - (1 if params.block_size else 0)
        plaintext = target + fragment[16:length] if not params.block_size else target + bytes(length - 16)
        cipher = RecordCipher(params.cipher, params.mac, exposed, mac_key)
        forged = cipher.seal(1, 23, 0x0303, plaintext, os.urandom(params.block_size))
        if params.block_size:
            forged = forged[:-32] + fragment[-32:]
    assert len(forged) == len(fragment) and forged != fragment
    with pytest.raises(BadRecordMAC):
        chain.server.receive_data(head + forged)
    alert = _messages(chain.server.data_to_send())
    assert alert == [Stub(21, 0x0303, IDEncoding.LITERAL, b"\x02\x14", alert[0].mac)]  # fatal bad_record_mac
    assert len(alert[0].mac) == params.mac_length


def _tampered_session() -> Chain:
    chain = Chain(CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA)
    chain.pipe()
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
