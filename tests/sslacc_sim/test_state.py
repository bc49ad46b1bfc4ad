"""SSLACC's state machines (:mod:`sslacc_sim.state`): labels from the core, phases by the table."""

from __future__ import annotations

import json

import pytest

from sslacc_sim import Checkpoint
from sslacc_sim.errors import SslaccError
from sslacc_sim.state import (
    PHASE_TRANSITIONS,
    CheckpointLabel,
    HandshakeProgress,
    UpdateOrderError,
    UpdatePhase,
    label_for_record,
    next_phase,
    next_progress,
)
from tls12 import ClientConfig, ClientConnection, ServerConfig, ServerConnection
from tls12.connection import ReceivedRecord
from tls12.testing import credentials, seeded_rng

from .helpers import SUITES, assert_served, run

P = UpdatePhase
H = HandshakeProgress


def test_the_relays_phase_orders_are_in_the_table() -> None:
    for order in ([P.PREPARED, P.SENT, P.COMMITTED, P.RELEASED],   # mirrored, cluster-then-commit
                  [P.PREPARED, P.COMMITTED, P.RELEASED],           # no mirror
                  [P.PREPARED, P.SENT, P.RELEASED],                # cluster-then-commit off
                  [P.PREPARED, P.RELEASED]):                       # neither
        now = P.RELEASED
        for phase in order * 2:                                    # and the next update
            now = next_phase(now, phase)
        assert now is P.RELEASED
    assert len(PHASE_TRANSITIONS) == 7


@pytest.mark.parametrize(("now", "announced"), [
    (P.RELEASED, P.COMMITTED),      # committed with nothing prepared
    (P.PREPARED, P.PREPARED),       # a second update before the first was released
    (P.SENT, P.SENT),
    (P.COMMITTED, P.SENT),          # sent after the acknowledgement
    (P.RELEASED, P.RELEASED),       # output released twice
])
def test_an_out_of_order_phase_raises_a_typed_error(now: UpdatePhase, announced: UpdatePhase) -> None:
    with pytest.raises(UpdateOrderError, match="cannot follow") as info:
        next_phase(now, announced)
    assert isinstance(info.value, SslaccError) and isinstance(info.value, RuntimeError)


def test_the_relay_checks_every_phase_it_announces() -> None:
    seen: list[tuple[str, str]] = []
    r = run(kill=lambda cluster, conn, cp, phase: seen.append((cp.label, phase)))
    assert_served(r)
    assert [p for _, p in seen[:4]] == ["prepared", "sent", "committed", "released"]
    assert set(r.conn.phases.values()) == {P.RELEASED}
    node = r.cluster.node(r.conn.handler)
    cp = Checkpoint(r.conn.id, 99, "response", 0, 0, 0, 0, b"")
    with pytest.raises(UpdateOrderError):       # release with nothing prepared: refused
        r.relay._fire(r.conn, cp, P.RELEASED, node)


def read_records(server: ServerConnection, data: bytes) -> list[ReceivedRecord]:
    server.receive_data(data, max_records=0)
    out = []
    while (got := server.receive_record()) is not None:
        out.append(got)
    return out


def test_labels_come_from_what_the_core_read() -> None:
    client = ClientConnection(ClientConfig(cipher_suites=SUITES, rng=seeded_rng(1)))
    server = ServerConnection(ServerConfig(credentials=credentials(), cipher_suites=SUITES,
                                           rng=seeded_rng(2)))
    records = read_records(server, client.data_to_send())
    client.receive_data(server.data_to_send())
    records += read_records(server, client.data_to_send())
    client.receive_data(server.data_to_send())
    client.send_data(b"GET / HTTP/1.0\r\n\r\n")
    client.close()
    records += read_records(server, client.data_to_send())
    assert [label_for_record(r) for r in records] == [
        "client_hello", "client_key_exchange", "change_cipher_spec", "finished", "data",
        "alert_received"]
    assert all(isinstance(label_for_record(r), CheckpointLabel) for r in records)


def test_checkpoint_label_is_the_enum_and_encodes_as_before() -> None:
    cp = Checkpoint(1, 0, "client_hello", 0, 0, 0, 0, b"")
    assert cp.label is CheckpointLabel.CLIENT_HELLO
    head = json.loads(cp.encode().partition(b"\n")[0])
    assert head["label"] == "client_hello" and type(head["label"]) is str
    assert Checkpoint.decode(cp.encode()).label is CheckpointLabel.CLIENT_HELLO
    assert cp.encode() == Checkpoint(1, 0, CheckpointLabel.CLIENT_HELLO, 0, 0, 0, 0, b"").encode()
    with pytest.raises(ValueError):
        Checkpoint(1, 0, "no_such_label", 0, 0, 0, 0, b"")


@pytest.mark.parametrize("labels", [
    ["client_hello", "client_key_exchange", "change_cipher_spec", "finished", "established",
     "data", "response", "response", "alert_received", "eof"],                   # full
    ["client_hello", "change_cipher_spec", "finished", "established", "data"],   # resumed
    ["client_hello", "client_hello", "takeover", "client_key_exchange"],          # restarts
    ["client_hello", "alert"], ["eof"],
])
def test_the_handshake_orders_the_relay_makes_are_in_the_table(labels: list[str]) -> None:
    now = H.START
    for label in labels:
        now = next_progress(now, label)
    assert now in H


@pytest.mark.parametrize(("labels", "bad"), [
    ([], "established"),                                        # before anything
    (["client_hello"], "finished"),                             # Finished before CCS
    (["client_hello", "client_key_exchange"], "established"),   # established before finished
    (["client_hello", "client_key_exchange"], "client_key_exchange"),
    (["client_hello"], "data"),                                 # request data mid-handshake
    ([], "response"),
])
def test_an_out_of_order_label_raises_a_typed_error(labels: list[str], bad: str) -> None:
    now = H.START
    for label in labels:
        now = next_progress(now, label)
    with pytest.raises(UpdateOrderError, match="cannot follow"):
        next_progress(now, bad)


def test_the_relay_checks_the_order_of_its_labels() -> None:
    r = run()
    assert_served(r)
    assert r.conn.progress is H.ESTABLISHED
    assert [r.conn.progress_at[n] for n in range(5)] == [
        H.HELLO, H.KEY_EXCHANGE, H.CHANGE_CIPHER_SPEC, H.FINISHED, H.ESTABLISHED]
    node = r.cluster.node(r.conn.handler)
    with pytest.raises(UpdateOrderError):        # a Finished once established: refused
        next(r.relay._checkpoint(r.conn, node, CheckpointLabel.FINISHED, 0, 0))
