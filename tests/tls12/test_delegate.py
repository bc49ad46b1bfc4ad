"""Seam 5: a server whose session secrets live in a delegate (tls12.delegate).

The reference is the non-delegated server: under the same seeded RNGs a delegated handshake,
its data, its resumption and its close must put the same bytes on the wire in both directions.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tls12 import prf
from tls12.certs import Credentials
from tls12.client_connection import ClientConnection
from tls12.config import ClientConfig, ServerConfig
from tls12.delegate import (
    DelegatedStateError,
    DelegateError,
    EventDelegate,
    KeyHandle,
    LocalDelegate,
    SessionDelegate,
)
from tls12.errors import BadRecordMAC, DecryptError, HandshakeFailure, LocalProtocolError
from tls12.events import ApplicationData, HandshakeComplete
from tls12.messages import TLS12, push_client_key_exchange_rsa
from tls12.record import OutgoingRecord
from tls12.server_connection import ServerConnection
from tls12.session import InMemorySessionStore
from tls12.suites import SUITES, CipherSuite, KeyExchange
from tls12.testing import AnsweringServer, credentials, pipe, seeded_rng

CBC_RSA = [s for s, p in SUITES.items() if p.block_size and p.key_exchange is KeyExchange.RSA]
CBC_ECDHE = [s for s, p in SUITES.items() if p.block_size and p.key_exchange is KeyExchange.ECDHE_RSA]
OPENSSL_NAMES = {s: SUITES[s].openssl_name for s in CBC_RSA}


class RecordingClient(ClientConnection):
    """A client whose RSA encryption is deterministic and that remembers its premasters.

    PKCS#1 v1.5 encryption pads with random bytes, which ``cryptography`` draws from the OS;
    this client draws them from its seeded RNG instead (RFC 8017 §7.2.1, EME-PKCS1-v1_5), so
    two runs send the same ClientKeyExchange and the whole transcripts can be compared.
    """

    premasters: list[bytes]

    def _premaster_and_client_key_exchange(self) -> tuple[bytes, bytes]:
        if SUITES[self.cipher_suite].key_exchange is KeyExchange.ECDHE_RSA:
            return super()._premaster_and_client_key_exchange()  # deterministic already
        premaster = TLS12.to_bytes(2, "big") + self.config.rng(46)
        key = self.context.server_public_key
        assert key is not None
        numbers = key.public_numbers()
        k = (numbers.n.bit_length() + 7) // 8
        pad = bytes(b % 255 + 1 for b in self.config.rng(k - 3 - len(premaster)))  # nonzero
        em = b"\x00\x02" + pad + b"\x00" + premaster
        c = pow(int.from_bytes(em, "big"), numbers.e, numbers.n).to_bytes(k, "big")
        self.premasters = [*getattr(self, "premasters", []), premaster]
        return premaster, push_client_key_exchange_rsa(c)


def _server(suite: CipherSuite, store: InMemorySessionStore, seed: int, delegated: bool | str
            ) -> tuple[ServerConnection, LocalDelegate | None]:
    """``delegated``: False, True (asked inline) or ``"events"`` (asked by event, answered at
    once by :class:`tls12.testing.AnsweringServer`)."""
    config = ServerConfig(credentials=credentials(), cipher_suites=(suite,), session_store=store,
                          rng=seeded_rng(seed))
    if not delegated:
        return ServerConnection(config), None
    delegate = LocalDelegate(config.credentials.private_key, rng=config.rng)
    return _delegated(config, delegate, delegated), delegate


def _delegated(config: ServerConfig, delegate: LocalDelegate, mode: bool | str) -> ServerConnection:
    if mode == "events":
        return AnsweringServer(ServerConnection(config, delegate=EventDelegate()), delegate)  # type: ignore[return-value]
    return ServerConnection(config, delegate=delegate)


def _session_on_wire(suite: CipherSuite, ems: bool, delegated: bool | str) -> list[tuple[str, bytes]]:
    """Every byte in flight of a full handshake, data, a resumption, more data and closes."""
    wire: list[tuple[str, bytes]] = []

    def up(b: bytes) -> bytes:
        wire.append(("c->s", b))
        return b

    def down(b: bytes) -> bytes:
        wire.append(("s->c", b))
        return b

    store = InMemorySessionStore()
    delegate: LocalDelegate | None = None
    client_config = ClientConfig(cipher_suites=(suite,), offer_extended_master_secret=ems,
                                 rng=seeded_rng(2))
    client = RecordingClient(client_config)
    server, delegate = _server(suite, store, 1, delegated)
    c_events, s_events = pipe(client, server, to_server=up, to_client=down)
    assert isinstance(s_events[0], HandshakeComplete) and not s_events[0].resumed
    assert s_events[0].extended_master_secret is ems
    big = bytes(range(256)) * 200  # 51,200 bytes: several records sealed in one batch
    client.send_data(big)
    server.send_data(big[::-1])
    c_events, s_events = pipe(client, server, to_server=up, to_client=down)
    assert b"".join(e.data for e in s_events if isinstance(e, ApplicationData)) == big
    assert b"".join(e.data for e in c_events if isinstance(e, ApplicationData)) == big[::-1]

    client2 = ClientConnection(ClientConfig(cipher_suites=(suite,), offer_extended_master_secret=ems,
                                            session=client.session, rng=seeded_rng(3)))
    if delegated:
        assert delegate is not None
        server2 = _delegated(server.config, delegate, delegated)
    else:
        server2 = ServerConnection(server.config)
    c_events, s_events = pipe(client2, server2, to_server=up, to_client=down)
    assert s_events[0].resumed and c_events[0].resumed  # type: ignore[attr-defined]
    client2.send_data(b"resumed request")
    server2.send_data(b"resumed answer")
    c_events, s_events = pipe(client2, server2, to_server=up, to_client=down)
    assert s_events == [ApplicationData(b"resumed request")]
    assert c_events == [ApplicationData(b"resumed answer")]
    client2.close()
    pipe(client2, server2, to_server=up, to_client=down)
    assert server2.closed
    return wire


@pytest.mark.parametrize("mode", [True, "events"], ids=["inline", "events"])
@pytest.mark.parametrize("ems", [True, False], ids=["ems", "no-ems"])
@pytest.mark.parametrize("suite", CBC_RSA + CBC_ECDHE[:2],
                         ids=[SUITES[s].openssl_name for s in CBC_RSA + CBC_ECDHE[:2]])
def test_delegated_session_is_byte_identical(suite: CipherSuite, ems: bool, mode: bool | str) -> None:
    """Asked inline or by event, RSA or ECDHE (the delegate makes and signs the ephemeral
    key): the same bytes as the server that holds every secret itself."""
    plain = _session_on_wire(suite, ems, delegated=False)
    delegated = _session_on_wire(suite, ems, delegated=mode)
    assert len(plain) > 6
    assert delegated == plain


def _leaves(obj: object, seen: set[int], skip: object) -> Iterator[bytes]:
    """Every bytes-like value reachable from ``obj`` (attributes, slots, containers, closures)."""
    if id(obj) in seen or obj is skip:
        return
    seen.add(id(obj))
    if isinstance(obj, (bytes, bytearray, memoryview)):
        yield bytes(obj)
        return
    if isinstance(obj, (str, int, float, bool, type(None), type)):
        return
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _leaves(k, seen, skip)
            yield from _leaves(v, seen, skip)
        return
    if isinstance(obj, (list, tuple, set, frozenset)):
        for v in obj:
            yield from _leaves(v, seen, skip)
        return
    if callable(obj) and getattr(obj, "__closure__", None):
        for cell in obj.__closure__:  # type: ignore[union-attr]
            yield from _leaves(cell.cell_contents, seen, skip)
    for name in getattr(obj, "__dict__", {}):
        yield from _leaves(getattr(obj, name), seen, skip)
    for cls in type(obj).__mro__:
        for name in getattr(cls, "__slots__", ()):
            if hasattr(obj, name):
                yield from _leaves(getattr(obj, name), seen, skip)
    if hasattr(obj, "__dataclass_fields__"):
        for name in obj.__dataclass_fields__:  # type: ignore[union-attr]
            yield from _leaves(getattr(obj, name, None), seen, skip)


def _delegate_secrets(delegate: LocalDelegate, client: RecordingClient) -> list[bytes]:
    values = list(client.premasters)
    for s in delegate._secrets.values():
        values.append(s.master_secret)
        for keys in (s.client, s.server):
            values += [keys.enc_key, keys.mac_key, keys.iv, keys.iv_key]
    return [v for v in values if v]


@pytest.mark.parametrize("suite", CBC_RSA, ids=[SUITES[s].openssl_name for s in CBC_RSA])
def test_server_holds_no_secret(suite: CipherSuite) -> None:
    store = InMemorySessionStore()
    server, delegate = _server(suite, store, 1, delegated=True)
    assert delegate is not None
    client = RecordingClient(ClientConfig(cipher_suites=(suite,), rng=seeded_rng(2)))
    pipe(client, server)
    client.send_data(b"x" * 40000)
    server.send_data(b"y" * 40000)
    pipe(client, server)
    assert server.handshake_complete
    secrets = _delegate_secrets(delegate, client)
    # the ground truth is right: the delegate holds the client's master secret
    assert client.master_secret in secrets and len(secrets) >= 9
    # everything reachable from the connection and the store, except the delegate itself
    # (the trust boundary: in WebALPS a proxy to the guardian process)
    held = list(_leaves((server, store), set(), skip=delegate))
    assert held, "the walk found nothing: it is broken"
    assert any(server.server_random in h for h in held)  # the walk reaches the context
    for secret in secrets:
        assert not any(secret in h for h in held), "a delegate secret is held outside it"
    assert server.master_secret in (None, b"")
    session = store.get(server.session_id)
    assert session is not None and session.master_secret == b"" and isinstance(session.handle, KeyHandle)


def test_non_delegated_walk_finds_the_master_secret() -> None:
    """The secret search can fail: without a delegate the same walk finds the master secret."""
    suite = CBC_RSA[0]
    server, _ = _server(suite, InMemorySessionStore(), 1, delegated=False)
    client = ClientConnection(ClientConfig(cipher_suites=(suite,), rng=seeded_rng(2)))
    pipe(client, server)
    held = list(_leaves(server, set(), skip=None))
    assert any(client.master_secret in h for h in held)


def test_export_refused_and_raw_keys_unavailable() -> None:
    suite = CBC_RSA[0]
    server, _ = _server(suite, InMemorySessionStore(), 1, delegated=True)
    client = ClientConnection(ClientConfig(cipher_suites=(suite,), rng=seeded_rng(2)))
    pipe(client, server)
    with pytest.raises(DelegatedStateError):
        server.export_state()
    with pytest.raises(DelegatedStateError):
        server.export_keys()
    with pytest.raises(DelegateError):
        _ = server.write_protection.enc_key
    assert server.write_protection.encrypted


def test_bad_premaster_fails_at_finished_not_earlier() -> None:
    """§7.4.7.1 inside the delegate: a garbled EncryptedPreMasterSecret gives a random
    premaster, so the ClientKeyExchange is accepted and the handshake fails only at the
    client's Finished, whose record the wrong keys cannot open (bad_record_mac)."""
    suite = CBC_RSA[0]
    server, _ = _server(suite, InMemorySessionStore(), 1, delegated=True)
    client = ClientConnection(ClientConfig(cipher_suites=(suite,), rng=seeded_rng(2)))
    server.receive_data(client.data_to_send())
    client.receive_data(server.data_to_send())
    flight = bytearray(client.data_to_send())
    flight[20] ^= 0x01  # inside the encrypted premaster of the ClientKeyExchange
    cke_end = 5 + int.from_bytes(flight[3:5], "big")
    assert server.receive_data(bytes(flight[:cke_end])) == []  # accepted: no oracle
    ccs_end = cke_end + 6
    assert server.receive_data(bytes(flight[cke_end:ccs_end])) == []
    with pytest.raises(BadRecordMAC):
        server.receive_data(bytes(flight[ccs_end:]))


def test_tampered_record_is_bad_record_mac() -> None:
    suite = CBC_RSA[0]
    server, _ = _server(suite, InMemorySessionStore(), 1, delegated=True)
    client = ClientConnection(ClientConfig(cipher_suites=(suite,), rng=seeded_rng(2)))
    pipe(client, server)
    client.send_data(b"hello")
    record = bytearray(client.data_to_send())
    record[-1] ^= 0x80
    with pytest.raises(BadRecordMAC):
        server.receive_data(bytes(record))


class _RSAOnlyDelegate:
    """A delegate that makes no ephemeral keys (it has no ``ephemeral``)."""

    def __init__(self, inner: LocalDelegate) -> None:
        self._inner = inner
        for op in ("derive", "resume", "verify_data", "check_finished", "seal", "open"):
            setattr(self, op, getattr(inner, op))


def test_a_delegate_without_ephemeral_keys_skips_ecdhe() -> None:
    config = ServerConfig(credentials=credentials(), cipher_suites=(*CBC_ECDHE, *CBC_RSA),
                          rng=seeded_rng(1))
    delegate = _RSAOnlyDelegate(LocalDelegate(config.credentials.private_key, rng=config.rng))
    server = ServerConnection(config, delegate=delegate)  # type: ignore[arg-type]
    client = ClientConnection(ClientConfig(rng=seeded_rng(2)))
    _, s_events = pipe(client, server)
    assert s_events[0].cipher_suite in CBC_RSA  # type: ignore[attr-defined]
    only_ecdhe = ServerConnection(config, delegate=delegate)  # type: ignore[arg-type]
    ecdhe_client = ClientConnection(ClientConfig(cipher_suites=tuple(CBC_ECDHE), rng=seeded_rng(3)))
    with pytest.raises(HandshakeFailure):
        pipe(ecdhe_client, only_ecdhe)
    # the same delegate with ephemeral keys serves the ECDHE client
    full = ServerConnection(config, delegate=LocalDelegate(config.credentials.private_key, rng=config.rng))
    _, s_events = pipe(ClientConnection(ClientConfig(cipher_suites=tuple(CBC_ECDHE), rng=seeded_rng(3))), full)
    assert s_events[0].cipher_suite in CBC_ECDHE  # type: ignore[attr-defined]


def test_sessions_do_not_cross_the_delegate_boundary() -> None:
    """A delegated server does not resume a master-secret session, nor a plain one a handle."""
    suite = CBC_RSA[0]
    store = InMemorySessionStore()
    plain, _ = _server(suite, store, 1, delegated=False)
    client = ClientConnection(ClientConfig(cipher_suites=(suite,), rng=seeded_rng(2)))
    pipe(client, plain)
    delegated, _ = _server(suite, store, 4, delegated=True)
    client2 = ClientConnection(ClientConfig(cipher_suites=(suite,), session=client.session,
                                            rng=seeded_rng(3)))
    _, s_events = pipe(client2, delegated)
    assert not s_events[0].resumed  # type: ignore[attr-defined]
    plain2, _ = _server(suite, store, 5, delegated=False)
    client3 = ClientConnection(ClientConfig(cipher_suites=(suite,), session=client2.session,
                                            rng=seeded_rng(6)))
    _, s_events = pipe(client3, plain2)
    assert not s_events[0].resumed  # type: ignore[attr-defined]


def test_local_delegate_contract() -> None:
    delegate = LocalDelegate(credentials().private_key, rng=seeded_rng(9))
    assert isinstance(delegate, SessionDelegate)
    with pytest.raises(TypeError):
        LocalDelegate(b"not a key", rng=seeded_rng(9))  # type: ignore[arg-type]
    with pytest.raises(DelegateError):
        delegate.verify_data(KeyHandle(12345, int(CBC_RSA[0])), False, b"\x00" * 32)
    handle = delegate.derive(b"\x00" * 256, 0x0303, b"c" * 32, b"s" * 32, int(CBC_RSA[0]), None)
    hash_ = prf.transcript_hash(b"transcript")
    vd = delegate.verify_data(handle, True, hash_)
    assert len(vd) == 12
    assert delegate.check_finished(handle, True, hash_, vd)
    assert not delegate.check_finished(handle, False, hash_, vd)
    delegate.release(handle)
    with pytest.raises(DelegateError):
        delegate.verify_data(handle, True, hash_)


@pytest.mark.parametrize("suite", CBC_RSA, ids=[SUITES[s].openssl_name for s in CBC_RSA])
def test_python_ssl_client_through_delegate(suite: CipherSuite) -> None:
    """Python's ssl (OpenSSL) as the client, over memory BIOs, fetches bytes in both directions."""
    config = ServerConfig(credentials=credentials(), cipher_suites=(suite,))
    server = ServerConnection(config, delegate=LocalDelegate(config.credentials.private_key,
                                                             rng=config.rng))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers(SUITES[suite].openssl_name + ":@SECLEVEL=0")
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ctx.wrap_bio(incoming, outgoing, server_hostname="localhost")

    def shuttle() -> list[object]:
        events: list[object] = []
        for _ in range(20):
            up = outgoing.read()
            if up:
                events += server.receive_data(up)
            down = server.data_to_send()
            if down:
                incoming.write(down)
            if not up and not down:
                break
        return events

    for _ in range(10):
        try:
            tls.do_handshake()
            break
        except ssl.SSLWantReadError:
            shuttle()
    shuttle()
    assert server.handshake_complete and tls.cipher()[0] == SUITES[suite].openssl_name  # type: ignore[index]
    request = b"GET / HTTP/1.1\r\n\r\n" * 1000
    tls.write(request)
    got = b"".join(e.data for e in shuttle() if isinstance(e, ApplicationData))  # type: ignore[attr-defined]
    assert got == request
    body = bytes(range(256)) * 300
    server.send_data(body)
    shuttle()
    received = b""
    while len(received) < len(body):
        received += tls.read(65536)
    assert received == body


class WrongFinishedClient(ClientConnection):
    """Sends a Finished whose verify_data is off by one bit."""

    def _finished_body(self, from_client: bool) -> bytes:
        body = super()._finished_body(from_client)
        return bytes([body[0] ^ 1]) + body[1:]


def test_wrong_finished_is_decrypt_error() -> None:
    """The delegate checks the client's Finished: a wrong verify_data is decrypt_error."""
    suite = CBC_RSA[0]
    server, _ = _server(suite, InMemorySessionStore(), 1, delegated=True)
    client = WrongFinishedClient(ClientConfig(cipher_suites=(suite,), rng=seeded_rng(2)))
    with pytest.raises(DecryptError):
        pipe(client, server)


class CountingDelegate(LocalDelegate):
    """A LocalDelegate that records how many records each seal/open call carried."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.opens: list[int] = []
        self.seals: list[int] = []

    def open(self, handle: KeyHandle, from_client: bool,
             records: Sequence[tuple[int, int, int, bytes]]) -> list[bytes]:
        self.opens.append(len(records))
        return super().open(handle, from_client, records)

    def seal(self, handle: KeyHandle, from_client: bool, records: Sequence[OutgoingRecord]) -> bytes:
        self.seals.append(len(records))
        return super().seal(handle, from_client, records)


def _counting_pair() -> tuple[ClientConnection, ServerConnection, CountingDelegate]:
    suite = CBC_RSA[0]
    config = ServerConfig(credentials=credentials(), cipher_suites=(suite,), rng=seeded_rng(1))
    delegate = CountingDelegate(config.credentials.private_key, rng=config.rng)
    server = ServerConnection(config, delegate=delegate)
    client = ClientConnection(ClientConfig(cipher_suites=(suite,), rng=seeded_rng(2)))
    pipe(client, server)
    delegate.opens.clear()
    delegate.seals.clear()
    return client, server, delegate


def test_records_are_batched_both_ways() -> None:
    client, server, delegate = _counting_pair()
    data = bytes(range(256)) * 256  # 65,536 bytes: four full records
    for chunk in (data[:20000], data[20000:]):
        client.send_data(chunk)  # two calls: 2 + 3 records on the wire, one burst
    events = server.receive_data(client.data_to_send())
    assert b"".join(e.data for e in events if isinstance(e, ApplicationData)) == data
    assert delegate.opens == [5]
    server.send_data(data)
    assert delegate.seals == [4]
    got = client.receive_data(server.data_to_send())
    assert b"".join(e.data for e in got if isinstance(e, ApplicationData)) == data


def test_bad_record_in_a_batch_delivers_the_good_ones_first() -> None:
    client, server, _ = _counting_pair()
    for part in (b"one", b"two", b"three", b"four"):
        client.send_data(part)
    records = client.data_to_send_records()
    bad = bytearray(records[2])
    bad[-1] ^= 0x80
    with pytest.raises(BadRecordMAC) as info:
        server.receive_data(records[0] + records[1] + bytes(bad) + records[3])
    assert info.value.events == [ApplicationData(b"one"), ApplicationData(b"two")]


def test_state_module_export_is_refused_too() -> None:
    """The refusal is in the machinery export, so the module functions cannot bypass it."""
    from tls12.state import export_connection, export_keys

    suite = CBC_RSA[0]
    server, _ = _server(suite, InMemorySessionStore(), 1, delegated=True)
    client = ClientConnection(ClientConfig(cipher_suites=(suite,), rng=seeded_rng(2)))
    pipe(client, server)
    for export in (export_connection, export_keys):
        with pytest.raises(DelegatedStateError, match="held by its delegate"):
            export(server)


def test_a_delegated_server_needs_the_chain_only() -> None:
    """ServerConfig takes a chain without a key; only a delegated connection accepts it."""
    creds = credentials()
    config = ServerConfig(credentials=Credentials.chain_only(creds.chain), cipher_suites=(CBC_RSA[0],),
                          rng=seeded_rng(1))
    assert config.key_operations is None and config.credentials.private_key is None
    with pytest.raises(ValueError, match="no private key"):
        ServerConnection(config)
    with pytest.raises(ValueError):
        Credentials.chain_only(())
    server = ServerConnection(config, delegate=LocalDelegate(creds.private_key, rng=config.rng))
    client = ClientConnection(ClientConfig(cipher_suites=(CBC_RSA[0],), rng=seeded_rng(2)))
    pipe(client, server)
    assert server.handshake_complete


def test_queue_sealed_keeps_the_write_sequence() -> None:
    """Records a delegate sealed by itself go out in order and count in the sequence numbers."""
    client, server, delegate = _counting_pair()
    before = server.write_protection.seq
    handle = server._key_handle
    assert handle is not None
    own = delegate.seal(handle, False, [OutgoingRecord(23, TLS12, before, b"from the delegate")])
    server.queue_sealed(own, 1)
    server.send_data(b"from the host")
    events = client.receive_data(server.data_to_send())
    assert events == [ApplicationData(b"from the delegate"), ApplicationData(b"from the host")]
    assert server.write_protection.seq == before + 2
    plain, _ = _server(CBC_RSA[0], InMemorySessionStore(), 1, delegated=False)
    with pytest.raises(LocalProtocolError):
        plain.queue_sealed(b"", 0)


def test_connection_module_stays_under_700_lines() -> None:
    import tls12.connection

    assert len(Path(tls12.connection.__file__).read_text().splitlines()) <= 700


class SeparateCallsDelegate(LocalDelegate):
    """A LocalDelegate without the one-call flight: the server makes the separate calls."""

    derive_finish = None  # type: ignore[assignment]


class CallLog:
    """Wraps a delegate and records the name of every method the connection calls on it."""

    def __init__(self, inner: LocalDelegate) -> None:
        self.inner = inner
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> object:
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        def call(*args: object) -> object:
            self.calls.append(name)
            return attr(*args)

        return call


def _handshake_calls(delegate_cls: type[LocalDelegate], split: bool) -> tuple[list[str], list[bytes]]:
    """The delegate methods a full handshake calls, and the server's bytes on the wire."""
    suite = CBC_RSA[0]
    config = ServerConfig(credentials=credentials(), cipher_suites=(suite,), rng=seeded_rng(1))
    log = CallLog(delegate_cls(config.credentials.private_key, rng=config.rng))
    server = ServerConnection(config, delegate=log)  # type: ignore[arg-type]
    client = RecordingClient(ClientConfig(cipher_suites=(suite,), rng=seeded_rng(2)))
    wire = []
    server.receive_data(client.data_to_send())
    wire.append(server.data_to_send())
    client.receive_data(wire[-1])
    flight = client.data_to_send_records()
    for chunk in ([flight[0], b"".join(flight[1:])] if split else [b"".join(flight)]):
        server.receive_data(chunk)
    wire.append(server.data_to_send())
    client.receive_data(wire[-1])
    assert server.handshake_complete and client.handshake_complete
    return log.calls, wire


def test_whole_flight_takes_one_delegate_call() -> None:
    """ClientKeyExchange + ChangeCipherSpec + Finished together: ``derive_finish`` does keys,
    the client's Finished and ours; the only other call seals our Finished.  Split, or with a
    delegate that lacks it: the separate calls.  The bytes are the same on every path."""
    calls, wire = _handshake_calls(LocalDelegate, split=False)
    assert calls == ["derive_finish", "seal"]
    split_calls, split_wire = _handshake_calls(LocalDelegate, split=True)
    assert split_calls == ["derive", "open", "finish", "seal"]
    separate_calls, separate_wire = _handshake_calls(SeparateCallsDelegate, split=False)
    assert separate_calls == ["derive", "open", "finish", "seal"]
    assert wire == split_wire == separate_wire


@pytest.mark.parametrize("fault", ["wrong verify_data", "tampered Finished record",
                                   "garbled premaster"])
def test_a_bad_flight_fails_closed_and_keeps_nothing(fault: str) -> None:
    """In the one-call flight a wrong Finished is decrypt_error, a record that does not open
    (tampered, or keys from a garbled premaster) bad_record_mac, sent in the clear (our keys
    are not in use yet); the delegate keeps no handle of the attempt."""
    suite = CBC_RSA[0]
    config = ServerConfig(credentials=credentials(), cipher_suites=(suite,), rng=seeded_rng(1))
    delegate = LocalDelegate(config.credentials.private_key, rng=config.rng)
    server = ServerConnection(config, delegate=delegate)
    cls = WrongFinishedClient if fault == "wrong verify_data" else ClientConnection
    client = cls(ClientConfig(cipher_suites=(suite,), rng=seeded_rng(2)))
    server.receive_data(client.data_to_send())
    client.receive_data(server.data_to_send())
    flight = bytearray(client.data_to_send())
    if fault == "tampered Finished record":
        flight[-1] ^= 0x01
    elif fault == "garbled premaster":
        flight[20] ^= 0x01
    error = DecryptError if fault == "wrong verify_data" else BadRecordMAC
    with pytest.raises(error):
        server.receive_data(bytes(flight))
    alert = server.data_to_send()
    assert alert == bytes([21, 3, 3, 0, 2, 2, 51 if error is DecryptError else 20])
    assert server.closed and delegate._secrets == {}
