"""Check a connection class against its transition table, from states a real handshake reached.

:func:`capture` runs a real handshake and feeds each side one record at a
time -- a plaintext handshake record is re-cut into one record per message --
exporting the receiver (:mod:`tls12.state`) before each record, so every
state the handshake passes through becomes a :class:`Snapshot`.
:func:`check_input` restores a snapshot, sends it one input sealed with the
keys the connection reads with, and checks the outcome against the table.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from tls12.connection import Connection, HandshakeState, keys_from_json
from tls12.errors import AlertDescription, RemoteProtocolError, UnexpectedMessage
from tls12.handshake_table import SAME, RecordInput, Transition
from tls12.messages import HandshakeType
from tls12.record import ContentType, OutgoingRecord, RecordWriter, WriteProtection
from tls12.testing import seeded_rng

__all__ = [
    "Snapshot",
    "capture",
    "check_input",
    "handshake_message",
    "unique_states",
    "OTHER_INPUTS",
]

CONTENT = {
    RecordInput.CHANGE_CIPHER_SPEC: ContentType.CHANGE_CIPHER_SPEC,
    RecordInput.ALERT: ContentType.ALERT,
    RecordInput.APPLICATION_DATA: ContentType.APPLICATION_DATA,
}

OTHER_INPUTS: list[tuple[RecordInput, bytes]] = [
    (RecordInput.CHANGE_CIPHER_SPEC, b"\x01"),
    (RecordInput.ALERT, bytes([1, AlertDescription.USER_CANCELED])),
    (RecordInput.ALERT, bytes([2, AlertDescription.HANDSHAKE_FAILURE])),
    (RecordInput.ALERT, bytes([1, AlertDescription.CLOSE_NOTIFY])),
    (RecordInput.APPLICATION_DATA, b"hello"),
]
"""The non-handshake inputs every state is tried with: CCS, warning/fatal/close alerts, data."""


@dataclass(frozen=True)
class Snapshot:
    """One side of a real handshake, exported in ``state``; then it received ``next_record``."""

    role: str
    state: Enum
    blob: bytes
    restore_with: Callable[[bytes], Connection]
    next_record: bytes | None = None
    next_input: int | RecordInput | None = None

    def restore(self) -> Connection:
        return self.restore_with(self.blob)

    def __repr__(self) -> str:
        return f"{self.role}-{self.state.value}"


def _messages(fragment: bytes) -> list[bytes] | None:
    """The handshake messages a plaintext fragment holds, or None if it is not exactly that."""
    out = []
    while len(fragment) >= 4:
        size = 4 + int.from_bytes(fragment[1:4], "big")
        out.append(fragment[:size])
        fragment = fragment[size:]
    return (
        out
        if not fragment and all(len(m) == 4 + int.from_bytes(m[1:4], "big") for m in out)
        else None
    )


def _records(data: bytes, encrypted: bool) -> list[bytes]:
    """Cut a byte stream into records; a plaintext handshake record into one record per message."""
    out = []
    while data:
        length = int.from_bytes(data[3:5], "big")
        record, data = data[: 5 + length], data[5 + length :]
        messages = (
            None if encrypted or record[0] != ContentType.HANDSHAKE else _messages(record[5:])
        )
        if messages is None:
            out.append(record)
            encrypted = encrypted or record[0] == ContentType.CHANGE_CIPHER_SPEC
        else:
            out += [record[:3] + len(m).to_bytes(2, "big") + m for m in messages]
    return out


def _input_of(record: bytes, encrypted: bool) -> int | RecordInput:
    if record[0] == ContentType.HANDSHAKE:
        return HandshakeType.FINISHED if encrypted else record[5]
    return {v: k for k, v in CONTENT.items()}[ContentType(record[0])]


def capture(
    server: Connection,
    client: Connection,
    restore_server: Callable[[bytes], Connection],
    restore_client: Callable[[bytes], Connection],
) -> list[Snapshot]:
    """Run the handshake between ``client`` and ``server``; a snapshot before every record."""
    snapshots: list[Snapshot] = []
    roles = {id(server): ("server", restore_server), id(client): ("client", restore_client)}

    def feed(conn: Connection, data: bytes) -> None:
        role, restore = roles[id(conn)]
        encrypted = json.loads(conn.export_state())["reader"]["keys"] is not None
        for record in _records(data, encrypted):
            blob = conn.export_state()
            snapshots.append(
                Snapshot(role, conn.state, blob, restore, record, _input_of(record, encrypted))
            )
            conn.receive_data(record)
            encrypted = encrypted or record[0] == ContentType.CHANGE_CIPHER_SPEC

    for _ in range(4):
        feed(server, client.data_to_send())
        feed(client, server.data_to_send())
    assert server.state is client.state is HandshakeState.ESTABLISHED
    for conn in (server, client):
        role, restore = roles[id(conn)]
        snapshots.append(Snapshot(role, conn.state, conn.export_state(), restore))
    return snapshots


def unique_states(snapshots: list[Snapshot]) -> list[Snapshot]:
    """The first snapshot of every (role, state)."""
    seen: dict[tuple[str, Enum], Snapshot] = {}
    for s in snapshots:
        seen.setdefault((s.role, s.state), s)
    return list(seen.values())


def handshake_message(msg_type: int, body: bytes) -> bytes:
    return bytes([msg_type]) + len(body).to_bytes(3, "big") + body


def _protected(snapshot: Snapshot, content_type: int, fragment: bytes) -> bytes:
    """A record the restored connection can read: sealed with its read keys and sequence number."""
    reader = json.loads(snapshot.blob)["reader"]
    protection = WriteProtection(keys_from_json(reader["keys"]), seeded_rng("peer"), reader["seq"])
    return RecordWriter().write_records(
        [OutgoingRecord(content_type, 0x0303, reader["seq"], fragment)], protection
    )


def check_input(snapshot: Snapshot, received: int | RecordInput, fragment: bytes) -> None:
    """Send one input to a restored copy; the outcome must be the one the table documents.

    Not in the table (or a ChangeCipherSpec that is not the byte 1): a raised
    :class:`UnexpectedMessage`.  In the table: accepted into one of the
    entry's next states, or refused with any typed :class:`RemoteProtocolError`.
    Either way a refusal leaves the connection closed with its alert queued.
    Any other exception propagates and fails the test.
    """
    conn = snapshot.restore()
    before = conn.state
    content = ContentType.HANDSHAKE if isinstance(received, int) else CONTENT[received]
    entry: Transition | None = conn.TRANSITIONS.lookup(before, received)
    if received is RecordInput.CHANGE_CIPHER_SPEC and fragment != b"\x01":
        entry = (
            None  # documented: a malformed ChangeCipherSpec is unexpected_message in every state
        )
    try:
        conn.receive_data(_protected(snapshot, content, fragment))
    except RemoteProtocolError as exc:
        assert conn.state is HandshakeState.CLOSED
        assert conn.data_to_send(), "the fatal alert is queued"
        if entry is None:
            assert isinstance(exc, UnexpectedMessage), f"{received!r} in {before.value}: {exc!r}"
            assert exc.description is AlertDescription.UNEXPECTED_MESSAGE
        return
    assert entry is not None, (
        f"{received!r} accepted in {before.value} but the table does not list it"
    )
    allowed = {before if s is SAME else s for s in entry.next_states}
    assert conn.state in allowed
