"""The four seams later protocols build on, exercised now (see ``tls12.connection``)."""

from __future__ import annotations

import multiprocessing as mp
from multiprocessing.connection import Connection as Pipe

import pytest
from cryptography.hazmat.primitives import serialization

from tls12 import (
    ApplicationData,
    ClientConfig,
    ClientConnection,
    HandshakeComplete,
    ServerConfig,
    ServerConnection,
)
from tls12.errors import BadRecordMAC
from tls12.keys import LocalKey
from tls12.messages import ClientHello
from tls12.record import OutgoingRecord, RecordWriter, WriteProtection, record_header
from tls12.recordcrypto import RecordCipher
from tls12.suites import SUITES, CipherSuite
from tls12.testing import credentials, pipe, seeded_rng

# --- seam 1: private-key operations in another process -------------------------


def _guardian(pem: bytes, pipe: Pipe) -> None:
    key = LocalKey(serialization.load_pem_private_key(pem, None))  # type: ignore[arg-type]
    while True:
        op, *args = pipe.recv()
        if op == "stop":
            return
        pipe.send(key.decrypt_premaster(*args) if op == "decrypt" else key.sign(*args))


class RemoteKey:
    """Premaster decryption and signing done by a separate process that holds the key."""

    def __init__(self, pipe: Pipe) -> None:
        self.pipe = pipe
        self.calls: list[str] = []

    def decrypt_premaster(self, encrypted: bytes) -> bytes | None:
        self.calls.append("decrypt")
        self.pipe.send(("decrypt", encrypted))
        return self.pipe.recv()

    def sign(self, data: bytes, scheme: int) -> bytes:
        self.calls.append("sign")
        self.pipe.send(("sign", data, scheme))
        return self.pipe.recv()


def test_key_operations_in_another_process() -> None:
    pem = credentials().private_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    ours, theirs = mp.Pipe()
    proc = mp.get_context("spawn").Process(target=_guardian, args=(pem, theirs), daemon=True)
    proc.start()
    try:
        remote = RemoteKey(ours)
        for suite in (CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA, CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256):
            server = ServerConnection(ServerConfig(credentials=credentials(), cipher_suites=(suite,), key_operations=remote))
            client = ClientConnection(ClientConfig(cipher_suites=(suite,)))
            c_events, s_events = pipe(client, server)
            assert isinstance(s_events[0], HandshakeComplete) and isinstance(c_events[0], HandshakeComplete)
        assert remote.calls == ["decrypt", "sign"]
    finally:
        ours.send(("stop",))
        proc.join(10)


# --- seam 2: the record writer: stubs, MAC without encryption, key exposure -------


class StubWriter(RecordWriter):
    """An SSL-splitting-like writer: emits (header, MAC) stubs for application data, keeps payloads aside."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, int, bytes, bytes]] = []

    def write_records(self, records: list[OutgoingRecord], protection: WriteProtection) -> bytes:
        out = b""
        for r in records:
            mac = protection.compute_mac(r)
            self.seen.append((r.content_type, r.seq, r.plaintext, mac))
            if r.content_type == 23:
                out += b"STUB" + r.seq.to_bytes(8, "big") + len(r.plaintext).to_bytes(2, "big") + mac
            else:
                out += protection.seal(r)
        return out


@pytest.mark.parametrize("suite", [CipherSuite.TLS_RSA_WITH_NULL_SHA, CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA256])
def test_record_writer_stubs_and_key_exposure(suite: CipherSuite) -> None:
    """A 'proxy' holding only the payloads, the MACs and the exposed write key rebuilds records the client accepts."""
    writer = StubWriter()
    server = ServerConnection(ServerConfig(credentials=credentials(), cipher_suites=(suite,)), record_writer=writer)
    client = ClientConnection(ClientConfig(cipher_suites=(suite,)))
    pipe(client, server)
    params = SUITES[suite]
    exposed_key = server.write_protection.enc_key  # what a key-expose message carries; never the MAC key
    assert len(exposed_key) == params.key_length
    assert len(server.write_protection.iv) == params.block_size
    payloads = [b"first payload", b"x" * 16384, b""]
    for p in payloads:
        server.send_data(p)
    stubs = server.data_to_send()
    # the proxy: it knows the payload bytes (cached) and reads (seq, length, mac) from each stub
    proxy = RecordCipher(params.cipher, params.mac, exposed_key, b"")
    wire = b""
    pos = 0
    for payload in payloads:
        assert stubs[pos : pos + 4] == b"STUB"
        length = int.from_bytes(stubs[pos + 12 : pos + 14], "big")
        mac = stubs[pos + 14 : pos + 14 + params.mac_length]
        pos += 14 + params.mac_length
        assert length == len(payload)
        body = proxy.seal_with_mac(payload, mac, bytes(16) if params.block_size else b"")
        wire += record_header(23, 0x0303, len(body)) + body
    assert [e.data for e in client.receive_data(wire)] == [payloads[0], payloads[1]]  # empty record: no event
    # the writer saw every outgoing record in order with its MAC
    assert [s[1] for s in writer.seen if s[0] == 23] == [1, 2, 3]  # seq 0 was the Finished


def test_proxy_altering_payload_is_caught() -> None:
    suite = CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA
    writer = StubWriter()
    server = ServerConnection(ServerConfig(credentials=credentials(), cipher_suites=(suite,)), record_writer=writer)
    client = ClientConnection(ClientConfig(cipher_suites=(suite,)))
    pipe(client, server)
    server.send_data(b"genuine")
    stub = server.data_to_send()
    params = SUITES[suite]
    proxy = RecordCipher(params.cipher, params.mac, server.write_protection.enc_key, b"")
    body = proxy.seal_with_mac(b"forgery", stub[14 : 14 + params.mac_length], bytes(16))
    with pytest.raises(BadRecordMAC):
        client.receive_data(record_header(23, 0x0303, len(body)) + body)


# --- seam 3: export/import ---------------------------------------------------------


@pytest.mark.parametrize("suite", list(SUITES), ids=lambda s: s.name)
def test_export_import_mid_handshake_and_mid_stream(suite: CipherSuite) -> None:
    config = ServerConfig(credentials=credentials(), cipher_suites=(suite,), rng=seeded_rng(9))
    server = ServerConnection(config)
    client = ClientConnection(ClientConfig(cipher_suites=(suite,)))
    server.receive_data(client.data_to_send())
    # hand over after the server's first flight was queued but before it was sent
    server = ServerConnection.import_state(config, server.export_state())
    client.receive_data(server.data_to_send())
    partial = client.data_to_send()
    server.receive_data(partial[:7])  # a partial record travels in the state too
    server = ServerConnection.import_state(config, server.export_state())
    events = server.receive_data(partial[7:])
    assert isinstance(events[0], HandshakeComplete)
    client.receive_data(server.data_to_send())
    for i in range(3):
        server.send_data(b"chunk%d" % i)
        blob = server.export_state()
        server = ServerConnection.import_state(config, blob)
        assert client.receive_data(server.data_to_send()) == [ApplicationData(b"chunk%d" % i)]
    # the client side moves too
    cconfig = client.config
    client = ClientConnection.import_state(cconfig, client.export_state())
    client.send_data(b"up")
    assert server.receive_data(client.data_to_send()) == [ApplicationData(b"up")]


def test_import_rejects_wrong_role_and_garbage() -> None:
    config = ServerConfig(credentials=credentials())
    client = ClientConnection(ClientConfig())
    with pytest.raises(ValueError):
        ServerConnection.import_state(config, client.export_state())
    with pytest.raises(ValueError):
        ServerConnection.import_state(config, b"\xffnot json")


# --- seam 4: handshake customisation -------------------------------------------------


class ClientPreferenceServer(ServerConnection):
    """Picks the client's most preferred suite instead of the server's."""

    def _select_cipher_suite(self, hello: ClientHello) -> int:
        for suite in hello.cipher_suites:
            if suite in self.config.cipher_suites:
                return suite
        return super()._select_cipher_suite(hello)


class FixedPremasterServer(ServerConnection):
    """Replaces the key exchange: the premaster is agreed out of band (as a protocol variant would)."""

    def _premaster_from_client_key_exchange(self, body: bytes) -> bytes:
        return body[2:50]


def test_handshake_customisation_points() -> None:
    suites = (CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA, CipherSuite.TLS_RSA_WITH_AES_256_CBC_SHA)
    server = ClientPreferenceServer(ServerConfig(credentials=credentials(), cipher_suites=suites))
    client = ClientConnection(ClientConfig(cipher_suites=tuple(reversed(suites))))
    pipe(client, server)
    assert server.cipher_suite == CipherSuite.TLS_RSA_WITH_AES_256_CBC_SHA == client.cipher_suite

    class FixedPremasterClient(ClientConnection):
        def _premaster_and_client_key_exchange(self) -> tuple[bytes, bytes]:
            secret = b"\x03\x03" + b"k" * 46
            return secret, (48).to_bytes(2, "big") + secret

    server = FixedPremasterServer(ServerConfig(credentials=credentials(), cipher_suites=suites))
    client = FixedPremasterClient(ClientConfig(cipher_suites=suites))
    c_events, s_events = pipe(client, server)
    assert isinstance(s_events[0], HandshakeComplete) and server.master_secret == client.master_secret
