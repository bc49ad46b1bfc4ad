"""Hypothesis fuzzing of the record layer and handshake parsers through whole connections.

Random and mutated inputs must give a typed :class:`RemoteProtocolError` (with
its fatal alert queued) or be absorbed -- never another exception, a hang or
unbounded buffering.
"""

from __future__ import annotations

from functools import cache

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tls12 import ClientConfig, ClientConnection, ServerConfig, ServerConnection
from tls12.errors import RemoteProtocolError
from tls12.messages import max_handshake_body
from tls12.record import MAX_CIPHERTEXT
from tls12.suites import SUITES, CipherSuite
from tls12.testing import credentials, seeded_rng

FUZZ = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _server() -> ServerConnection:
    return ServerConnection(ServerConfig(credentials=credentials(), cipher_suites=tuple(SUITES), rng=seeded_rng(5)))


@cache
def _flights(suite: CipherSuite) -> tuple[bytes, bytes, bytes]:
    """(client hello, server first flight, client second flight) of a real handshake."""
    server = ServerConnection(ServerConfig(credentials=credentials(), cipher_suites=(suite,), rng=seeded_rng(5)))
    client = ClientConnection(ClientConfig(cipher_suites=(suite,), rng=seeded_rng(6)))
    hello = client.data_to_send()
    server.receive_data(hello)
    flight1 = server.data_to_send()
    client.receive_data(flight1)
    return hello, flight1, client.data_to_send()


def _feed(conn: ServerConnection | ClientConnection, data: bytes, chunk: int = 0) -> None:
    try:
        if chunk:
            for i in range(0, len(data), chunk):
                conn.receive_data(data[i : i + chunk])
        else:
            conn.receive_data(data)
    except RemoteProtocolError:
        out = conn.data_to_send()
        assert out[:1] == b"\x15" and conn.closed  # a fatal alert record, then closed
        return
    # absorbed: nothing buffered beyond one partial record and one partial handshake message
    assert len(conn._reader.pending) < 5 + MAX_CIPHERTEXT
    if conn._hs_buffer:
        assert len(conn._hs_buffer) < 4 + max_handshake_body(conn._hs_buffer[0])


@FUZZ
@given(data=st.binary(max_size=2000))
def test_server_random_bytes(data: bytes) -> None:
    _feed(_server(), data)


@FUZZ
@given(payload=st.binary(max_size=600), ctype=st.sampled_from([20, 21, 22, 23]))
def test_server_random_records(payload: bytes, ctype: int) -> None:
    _feed(_server(), bytes([ctype, 3, 3]) + len(payload).to_bytes(2, "big") + payload)


@FUZZ
@given(
    suite=st.sampled_from(list(SUITES)),
    pos=st.integers(min_value=0),
    value=st.integers(0, 255),
    chunk=st.integers(0, 50),
)
def test_server_mutated_client_hello(suite: CipherSuite, pos: int, value: int, chunk: int) -> None:
    hello = bytearray(_flights(suite)[0])
    hello[pos % len(hello)] = value
    _feed(_server(), bytes(hello), chunk)


@FUZZ
@given(suite=st.sampled_from(list(SUITES)), pos=st.integers(min_value=0), value=st.integers(0, 255))
def test_client_mutated_server_flight(suite: CipherSuite, pos: int, value: int) -> None:
    flight = bytearray(_flights(suite)[1])
    flight[pos % len(flight)] ^= value or 1
    client = ClientConnection(ClientConfig(cipher_suites=(suite,), rng=seeded_rng(6)))
    client.data_to_send()
    _feed(client, bytes(flight))


@FUZZ
@given(suite=st.sampled_from(list(SUITES)), pos=st.integers(min_value=0), value=st.integers(1, 255))
def test_server_mutated_key_exchange_flight(suite: CipherSuite, pos: int, value: int) -> None:
    hello, _, flight2 = _flights(suite)
    server = ServerConnection(ServerConfig(credentials=credentials(), cipher_suites=(suite,), rng=seeded_rng(5)))
    server.receive_data(hello)
    server.data_to_send()
    mutated = bytearray(flight2)
    mutated[pos % len(mutated)] ^= value
    _feed(server, bytes(mutated))
