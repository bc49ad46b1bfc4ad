"""Reverse SSL's extended transition tables are what its connections do.

The same check as ``tests/tls12/test_state_table.py``, on the states only
Reverse SSL has: every handshake message type (Reverse SSL's own included),
ChangeCipherSpec, alerts and application data, in every state a real reverse
handshake of each flavour passes through.  An input the table does not list
is ``unexpected_message``; a listed one is accepted into an allowed state or
refused with a typed alert -- never an uncaught exception.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reverse_ssl.client_connection import ReverseClientConnection
from reverse_ssl.config import ReverseClientConfig, ReverseServerConfig
from reverse_ssl.messages import Mode, ReverseHandshakeType
from reverse_ssl.puzzle import PuzzleParams
from reverse_ssl.server_connection import ReverseServerConnection
from reverse_ssl.state import CLIENT_TRANSITIONS, SERVER_TRANSITIONS, ReverseState
from tests.reverse_ssl.rssl_helpers import KEY_BITS, SUITES
from tests.tls12.table_helpers import (
    OTHER_INPUTS,
    Snapshot,
    capture,
    check_input,
    handshake_message,
    unique_states,
)
from tls12 import ClientConfig, ServerConfig
from tls12.connection import HandshakeState
from tls12.errors import UnexpectedMessage
from tls12.handshake_table import RecordInput
from tls12.messages import HandshakeType
from tls12.testing import credentials, seeded_rng


def _snapshots(mode: Mode) -> list[Snapshot]:
    # no signature pool: the server signs with the RSA fallback, so a restore costs no token
    server_cfg = ReverseServerConfig(
        ServerConfig(
            credentials=credentials(bits=KEY_BITS), cipher_suites=SUITES, rng=seeded_rng("s")
        ),
        puzzle=PuzzleParams(n_bits=512),
    )
    client_cfg = ReverseClientConfig(
        ClientConfig(server_name="localhost", cipher_suites=SUITES, rng=seeded_rng("c")),
        modes=(mode,),
        credentials=credentials(bits=KEY_BITS, common_name="client"),
    )
    return capture(
        ReverseServerConnection(server_cfg),
        ReverseClientConnection(client_cfg),
        lambda blob: ReverseServerConnection.import_state(server_cfg, blob),
        lambda blob: ReverseClientConnection.import_state(client_cfg, blob),
    )


SNAPSHOTS = unique_states(_snapshots(Mode.CLIENT_AUTH) + _snapshots(Mode.PUZZLE))


def test_every_reverse_state_is_captured() -> None:
    captured = {s.state for s in SNAPSHOTS}
    assert set(ReverseState) <= captured


def test_the_connections_use_the_tables_of_the_state_module() -> None:
    assert ReverseServerConnection.TRANSITIONS is SERVER_TRANSITIONS
    assert ReverseClientConnection.TRANSITIONS is CLIENT_TRANSITIONS
    assert SERVER_TRANSITIONS.lookup(ReverseState.EXPECT_PUZZLE_REPLY, HandshakeType.CERTIFICATE) is None


def test_a_certificate_instead_of_the_puzzle_reply_is_unexpected_message() -> None:
    """A wrong transition: the server waits for the puzzle reply and gets a Certificate."""
    snapshot = next(s for s in SNAPSHOTS if s.state is ReverseState.EXPECT_PUZZLE_REPLY)
    conn = snapshot.restore()
    with pytest.raises(UnexpectedMessage):
        message = handshake_message(HandshakeType.CERTIFICATE, b"\x00\x00\x00")
        # before the client's ChangeCipherSpec the server reads plaintext records
        conn.receive_data(b"\x16\x03\x03" + len(message).to_bytes(2, "big") + message)
    assert conn.state is HandshakeState.CLOSED


@pytest.mark.parametrize("snapshot", SNAPSHOTS, ids=repr)
def test_every_message_type_in_every_state(snapshot: Snapshot) -> None:
    for msg_type in range(256):
        check_input(snapshot, msg_type, handshake_message(msg_type, b""))
    for received, fragment in OTHER_INPUTS:
        check_input(snapshot, received, fragment)


_INPUTS = st.one_of(
    st.sampled_from([int(t) for t in (*HandshakeType, *ReverseHandshakeType)]),
    st.sampled_from(list(RecordInput)),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshot=st.sampled_from(SNAPSHOTS), received=_INPUTS, body=st.binary(max_size=80))
def test_random_inputs_get_the_documented_answer(
    snapshot: Snapshot, received: int | RecordInput, body: bytes
) -> None:
    fragment = handshake_message(received, body) if isinstance(received, int) else body
    check_input(snapshot, received, fragment)
