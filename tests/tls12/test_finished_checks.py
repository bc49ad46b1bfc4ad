"""Finished verification on every path a connection can take to it.

A wrong ``verify_data`` must end the handshake with decrypt_error whichever side checks it and
however the key is held: by the connection itself, or by a session delegate, checked with
``check_finished`` (resumption), ``finish`` (the separate calls of a full handshake) or the
one-call flight.  The error message names the failure on each path (the mutation run of group
``tls12`` found the messages unpinned).  Peers that send a wrong Finished are real connections
whose ``_finished_body`` flips one bit: an adversary, not a stand-in for the code under test.
"""

from __future__ import annotations

import pytest

from tls12.client_connection import ClientConnection
from tls12.config import ClientConfig, ServerConfig
from tls12.delegate import LocalDelegate
from tls12.errors import DecryptError
from tls12.server_connection import ServerConnection
from tls12.session import InMemorySessionStore
from tls12.suites import SUITES, KeyExchange
from tls12.testing import credentials, pipe, seeded_rng

SUITE = next(s for s, p in SUITES.items() if p.block_size and p.key_exchange is KeyExchange.RSA)
MISMATCH = "^Finished verify_data mismatch$"
ALERT_DECRYPT_ERROR = bytes([21, 3, 3, 0, 2, 2, 51])


def _flip(body: bytes) -> bytes:
    return bytes([body[0] ^ 1]) + body[1:]


class WrongFinishedClient(ClientConnection):
    """Sends a Finished whose verify_data is off by one bit."""

    def _finished_body(self, from_client: bool) -> bytes:
        return _flip(super()._finished_body(from_client))


class WrongFinishedServer(ServerConnection):
    """Sends a Finished whose verify_data is off by one bit (non-delegated server)."""

    def _finished_body(self, from_client: bool) -> bytes:
        return _flip(super()._finished_body(from_client))


class SeparateCallsDelegate(LocalDelegate):
    """A LocalDelegate without the one-call flight: the server calls ``finish``."""

    derive_finish = None  # type: ignore[assignment]


def _server_config(store: InMemorySessionStore | None = None) -> ServerConfig:
    return ServerConfig(credentials=credentials(), cipher_suites=(SUITE,), rng=seeded_rng(1),
                        session_store=store)


def _client_config(**kwargs: object) -> ClientConfig:
    return ClientConfig(cipher_suites=(SUITE,), rng=seeded_rng(2), **kwargs)  # type: ignore[arg-type]


def test_server_refuses_a_wrong_client_finished() -> None:
    server = ServerConnection(_server_config())
    with pytest.raises(DecryptError, match=MISMATCH):
        pipe(WrongFinishedClient(_client_config()), server)
    assert server.closed and not server.handshake_complete


def test_client_refuses_a_wrong_server_finished() -> None:
    client = ClientConnection(_client_config())
    with pytest.raises(DecryptError, match=MISMATCH):
        pipe(client, WrongFinishedServer(_server_config()))
    alert = client.data_to_send()  # encrypted: the client's ChangeCipherSpec went first
    assert alert[:3] == bytes([21, 3, 3]) and client.closed
    assert not client.handshake_complete


def test_delegate_finish_path_refuses_a_wrong_client_finished() -> None:
    """The full handshake's separate delegate calls: ``finish`` returns None, the server
    raises decrypt_error."""
    config = _server_config()
    server = ServerConnection(config, delegate=SeparateCallsDelegate(config.credentials.private_key,
                                                                     rng=config.rng))
    with pytest.raises(DecryptError, match=MISMATCH):
        pipe(WrongFinishedClient(_client_config()), server)
    assert server.data_to_send() == ALERT_DECRYPT_ERROR


def test_delegated_resumption_refuses_a_wrong_client_finished() -> None:
    """In an abbreviated handshake the server's Finished goes first and the client's is
    checked with the delegate's ``check_finished``."""
    store = InMemorySessionStore()
    config = _server_config(store)
    delegate = LocalDelegate(config.credentials.private_key, rng=config.rng)
    first = ClientConnection(_client_config(server_name="example.com"))
    pipe(first, ServerConnection(config, delegate=delegate))
    assert first.session is not None
    # An honest resumption completes...
    honest = ClientConnection(_client_config(server_name="example.com", session=first.session))
    server = ServerConnection(config, delegate=delegate)
    pipe(honest, server)
    assert honest.resumed and server.handshake_complete
    # ...and one bit off in the client's Finished is refused.
    client = WrongFinishedClient(_client_config(server_name="example.com", session=first.session))
    server = ServerConnection(config, delegate=delegate)
    with pytest.raises(DecryptError, match=MISMATCH):
        pipe(client, server)
    assert client.resumed and not server.handshake_complete


def test_client_session_remembers_the_server_name() -> None:
    """The session a client keeps for resumption records which server it was made with."""
    store = InMemorySessionStore()
    client = ClientConnection(_client_config(server_name="www.example.org"))
    pipe(client, ServerConnection(_server_config(store)))
    assert client.session is not None
    assert client.session.server_name == "www.example.org"
    assert client.session.session_id == client.session_id
