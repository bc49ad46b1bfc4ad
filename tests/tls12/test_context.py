"""The handshake context is exported generically: subclass fields, codecs, states of any enum."""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from typing import ClassVar

import pytest

from tls12 import ClientConfig, ClientConnection, ServerConfig, ServerConnection
from tls12.connection import HandshakeState
from tls12.context import (
    INT_TUPLE,
    ClientHandshakeContext,
    ContextAttribute,
    ServerHandshakeContext,
    codec_field,
    context_from_json,
    context_to_json,
)
from tls12.events import HandshakeComplete
from tls12.handshake_table import Transition
from tls12.messages import HandshakeType
from tls12.state import register_state_enum
from tls12.testing import credentials, pipe, seeded_rng


class LabState(Enum):
    """A variant's own state, as Reverse SSL has them."""

    EXPECT_NOTE = "expect_note"


register_state_enum(LabState)


@dataclass(eq=False)
class LabContext(ServerHandshakeContext):
    EXPORT_SECTION: ClassVar[str | None] = "lab"

    note: bytes = b""
    counters: tuple[int, ...] = codec_field(INT_TUPLE, default=())


class LabServer(ServerConnection):
    """A server that, after the ClientHello, waits in its own state (for the test only)."""

    CONTEXT = LabContext
    context: LabContext
    note = ContextAttribute()
    TRANSITIONS = ServerConnection.TRANSITIONS.extend(
        more_next_states={
            (HandshakeState.EXPECT_CLIENT_HELLO, HandshakeType.CLIENT_HELLO): (
                LabState.EXPECT_NOTE,
            )
        }
    )

    def _handle_client_hello(self, raw: bytes) -> Enum:
        super()._handle_client_hello(raw)
        self.note = b"seen " + self.client_random[:4]
        self.context.counters = (1, 2, 3)
        return LabState.EXPECT_NOTE


def _server_config() -> ServerConfig:
    return ServerConfig(credentials=credentials(bits=1024), rng=seeded_rng("lab"))


def test_subclass_fields_and_own_state_survive_export() -> None:
    server = LabServer(_server_config())
    server.receive_data(ClientConnection(ClientConfig(rng=seeded_rng("c"))).data_to_send())
    assert server.state is LabState.EXPECT_NOTE
    blob = server.export_state()
    doc = json.loads(blob)
    assert doc["lab"] == {"note": server.note.hex(), "counters": [1, 2, 3]}
    assert doc["server"]["client_version"] == 0x0303  # the base class's section is unchanged
    copy = LabServer.import_state(_server_config(), blob)
    assert copy.state is LabState.EXPECT_NOTE
    assert copy.note == server.note and copy.context.counters == (1, 2, 3)
    assert copy.context.transcript == server.context.transcript
    assert copy.data_to_send() == server.data_to_send()


def test_unregistered_state_enum_is_refused_on_export() -> None:
    class Unregistered(Enum):
        SOMEWHERE = "somewhere"

    server = ServerConnection(_server_config())
    server.state = Unregistered.SOMEWHERE
    with pytest.raises(TypeError, match="register_state_enum"):
        server.export_state()


def test_unknown_state_enum_or_value_is_refused_on_import() -> None:
    blob = json.loads(ServerConnection(_server_config()).export_state())
    for patch in ({"state_enum": "nowhere.State"}, {"state": "no_such_state"}):
        with pytest.raises(ValueError):
            ServerConnection.import_state(_server_config(), json.dumps({**blob, **patch}).encode())


def test_a_field_without_codec_is_named_on_export() -> None:
    @dataclass(eq=False)
    class Careless(ClientHandshakeContext):
        EXPORT_SECTION: ClassVar[str | None] = "careless"
        things: object = None

    context = Careless(things=object())
    with pytest.raises(TypeError, match="Careless.things"):
        context_to_json(context)


def test_a_missing_field_is_refused_on_import() -> None:
    sections = context_to_json(ServerHandshakeContext())
    del sections["server"]["group"]
    with pytest.raises(ValueError, match="group"):
        context_from_json(ServerHandshakeContext(), sections)


def test_client_key_is_derived_again_from_the_certificate_chain() -> None:
    server = ServerConnection(ServerConfig(credentials=credentials(bits=1024), rng=seeded_rng("s")))
    client = ClientConnection(ClientConfig(rng=seeded_rng("c")))
    server.receive_data(client.data_to_send())
    client.receive_data(server.data_to_send())
    assert client.context.server_public_key is not None
    copy = ClientConnection.import_state(client.config, client.export_state())
    assert "server_public_key" not in json.loads(client.export_state())["client"]
    assert copy.context.server_public_key is not None
    assert (
        copy.context.server_public_key.public_numbers()
        == client.context.server_public_key.public_numbers()
    )
    client_events, _ = pipe(copy, server)
    assert any(isinstance(e, HandshakeComplete) for e in client_events)


def test_a_handler_choosing_a_state_outside_its_entry_is_a_bug() -> None:
    entry = Transition("_handle_x", (HandshakeState.ESTABLISHED,))
    assert entry.resolve(None, HandshakeState.EXPECT_FINISHED) is HandshakeState.ESTABLISHED
    with pytest.raises(ValueError, match="allows"):
        entry.resolve(HandshakeState.CLOSED, HandshakeState.EXPECT_FINISHED)
    two = Transition("_handle_y", (HandshakeState.ESTABLISHED, HandshakeState.CLOSED))
    with pytest.raises(ValueError, match="must return"):
        two.resolve(None, HandshakeState.EXPECT_FINISHED)
