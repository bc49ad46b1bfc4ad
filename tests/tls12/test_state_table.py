"""The transition tables are what the connections do, and the documentation is the tables.

Every state a real handshake passes through is captured (a real ECDHE
handshake fed to each side one handshake message at a time, each state
exported with :mod:`tls12.state`).  Into a fresh copy of each captured state
the tests send every input -- all 256 handshake message types, ChangeCipherSpec,
alerts, application data, each protected with the keys the connection reads
with -- and check the outcome against the table:

* an input the table does not list for the state: ``unexpected_message``;
* a listed input: accepted into one of the entry's next states, or refused
  with a typed :class:`RemoteProtocolError` (its alert queued, the connection
  closed) -- never any other exception;
* the input the real peer sent next: accepted, into a state the entry allows.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.tls12.table_helpers import (
    OTHER_INPUTS,
    Snapshot,
    capture,
    check_input,
    handshake_message,
    unique_states,
)
from tls12 import ClientConfig, ClientConnection, ServerConfig, ServerConnection
from tls12.connection import Connection, HandshakeState
from tls12.handshake_docs import markdown, ordered_states
from tls12.handshake_table import RecordInput
from tls12.messages import HandshakeType
from tls12.suites import CipherSuite
from tls12.testing import credentials, seeded_rng

SUITE = CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256
DOC = Path(__file__).resolve().parents[2] / "docs" / "tls12-state-machine.md"


def _server_config() -> ServerConfig:
    return ServerConfig(
        credentials=credentials(bits=1024), cipher_suites=(SUITE,), rng=seeded_rng("server")
    )


def _client_config() -> ClientConfig:
    return ClientConfig(cipher_suites=(SUITE,), rng=seeded_rng("client"))


SNAPSHOTS = capture(
    ServerConnection(_server_config()),
    ClientConnection(_client_config()),
    lambda blob: ServerConnection.import_state(_server_config(), blob),
    lambda blob: ClientConnection.import_state(_client_config(), blob),
)
STATES = unique_states(SNAPSHOTS)
CLASSES = {"server": ServerConnection, "client": ClientConnection}


def test_capture_covers_every_state_of_both_tables() -> None:
    for cls in (ServerConnection, ClientConnection):
        initial = (
            HandshakeState.EXPECT_SERVER_HELLO
            if cls.is_client
            else HandshakeState.EXPECT_CLIENT_HELLO
        )
        expected = [
            s for s in ordered_states(cls.TRANSITIONS, initial) if s is not HandshakeState.CLOSED
        ]
        captured = {s.state for s in STATES if CLASSES[s.role] is cls}
        assert captured == set(expected), cls.__name__


def test_committed_state_machine_doc_is_generated() -> None:
    assert DOC.read_text() == markdown(), (
        "regenerate: python -m tls12.handshake_docs --markdown > docs/..."
    )


@pytest.mark.parametrize("cls", [ServerConnection, ClientConnection])
def test_every_handler_exists_and_every_entry_is_consistent(cls: type[Connection]) -> None:
    for (_, received), entry in cls.TRANSITIONS.items():
        assert callable(getattr(cls, entry.handler)), entry.handler
        if isinstance(received, RecordInput):
            assert entry.hashed  # non-handshake records never reach the transcript anyway


@pytest.mark.parametrize("snapshot", [s for s in SNAPSHOTS if s.next_record is not None], ids=repr)
def test_the_real_next_input_follows_the_table(snapshot: Snapshot) -> None:
    conn = snapshot.restore()
    assert snapshot.next_input is not None and snapshot.next_record is not None
    entry = conn.TRANSITIONS.lookup(snapshot.state, snapshot.next_input)
    assert entry is not None
    conn.receive_data(snapshot.next_record)
    assert conn.state in entry.next_states


@pytest.mark.parametrize("snapshot", STATES, ids=repr)
def test_every_message_type_in_every_state(snapshot: Snapshot) -> None:
    """All 256 handshake types with an empty body, and the three other record types."""
    for msg_type in range(256):
        check_input(snapshot, msg_type, handshake_message(msg_type, b""))
    for received, fragment in OTHER_INPUTS:
        check_input(snapshot, received, fragment)


_INPUTS = st.one_of(
    st.sampled_from([int(t) for t in HandshakeType]),
    st.integers(0, 255),
    st.sampled_from(list(RecordInput)),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    snapshot=st.sampled_from(STATES),
    received=_INPUTS,
    body=st.one_of(st.binary(max_size=80), st.just(b"\x01"), st.binary(min_size=2, max_size=2)),
)
def test_random_inputs_get_the_documented_answer(
    snapshot: Snapshot, received: int | RecordInput, body: bytes
) -> None:
    fragment = handshake_message(received, body) if isinstance(received, int) else body
    check_input(snapshot, received, fragment)
