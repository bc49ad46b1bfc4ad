"""Handshake-update deltas: byte-exact rebuilds, smaller updates, typed failures."""

from __future__ import annotations

import json

import pytest

from sslacc_sim import Checkpoint, Cluster, ClusterParams, RelayConn
from sslacc_sim.delta import DeltaError, DeltaReader, DeltaWriter, apply_delta, make_delta
from tls12 import ServerConnection
from tls12.state import export_connection, import_connection

from .helpers import assert_served, kill_owner, run, server_configs

HANDSHAKE = ("client_hello", "client_key_exchange", "change_cipher_spec", "finished")


def _full_states() -> list[tuple[str, bytes]]:
    """(label, exported state) of every full checkpoint of one failure-free connection."""
    got: list[tuple[str, bytes]] = []

    def hook(cluster: Cluster, conn: RelayConn, cp: Checkpoint, phase: str) -> None:
        if phase == "prepared" and not cp.compact:
            got.append((cp.label, cp.tls_state))

    assert_served(run(kill=hook))
    return got


def test_a_delta_rebuilds_each_handshake_state_byte_for_byte_and_is_smaller() -> None:
    states = _full_states()
    assert [label for label, _ in states] == list(HANDSHAKE)
    writer, reader = DeltaWriter(states[0][1]), DeltaReader(states[0][1])
    for (_, old), (label, new) in zip(states[:-1], states[1:], strict=True):
        delta = writer.delta(new)
        assert reader.apply(delta) == new                   # the reader holds the chain
        assert make_delta(old, new) == delta                # stateless form, same bytes
        assert apply_delta(old, delta) == new
        assert len(delta) < len(new) / 2, label
    # the transcript travels as the appended part only
    ops = json.loads(make_delta(states[0][1], states[1][1]))["ops"]
    assert ["transcript"] in [op[1] for op in ops if op[0] == "a"]


def test_a_delta_refuses_another_base_and_damage() -> None:
    states = [s for _, s in _full_states()]
    delta = make_delta(states[1], states[2])
    with pytest.raises(DeltaError, match="another base"):
        apply_delta(states[0], delta)
    doc = json.loads(delta)
    doc["ops"] = doc["ops"][:-1]                            # an operation lost on the way
    with pytest.raises(DeltaError, match="differs"):
        apply_delta(states[1], json.dumps(doc).encode())
    with pytest.raises(DeltaError, match="version"):
        apply_delta(states[1], json.dumps({**doc, "v": 99}).encode())
    for style in (1.0, True, "1", None, -1):  # 1.0 passed `in range` and then raised TypeError
        with pytest.raises(DeltaError, match="malformed"):
            apply_delta(states[1], json.dumps({**doc, "style": style}).encode())
    with pytest.raises(DeltaError, match="not JSON"):
        make_delta(b"\xff", states[1])
    with pytest.raises(DeltaError, match="serialisation"):
        make_delta(b'{"a":1, "b":2}', states[1])            # no writer we know emits this
    # deletions and new keys, nested
    old, new = b'{"a": {"b": "x", "c": 1}, "d": [1]}', b'{"a": {"b": "xy", "e": 2}, "d": [2]}'
    assert apply_delta(old, make_delta(old, new)) == new


@pytest.mark.parametrize("kill", [None, ("client_key_exchange", "committed"),
                                  ("change_cipher_spec", "released")])
def test_the_mirror_holds_the_owners_export_at_every_checkpoint(
        kill: tuple[str, str] | None) -> None:
    """At every committed full checkpoint -- before and after a takeover mid-handshake --
    the state the mirror rebuilt from deltas, imported into a fresh server and exported
    again, is the owner's export byte for byte."""
    checked: list[tuple[str, int]] = []
    killer = kill_owner(*kill) if kill is not None else None
    configs = server_configs()

    def hook(cluster: Cluster, conn: RelayConn, cp: Checkpoint, phase: str) -> None:
        if phase == "committed" and not cp.compact:
            mirror = cluster.mirror[conn.bucket]
            if mirror is not None:
                held = conn.mirrored[mirror]
                assert (held.number, held.base) == (cp.number, -1)
                assert held.tls_state == cp.tls_state
                fresh = ServerConnection(configs(mirror, conn.id))
                import_connection(fresh, held.tls_state)
                assert export_connection(fresh) == cp.tls_state
                checked.append((cp.label, conn.handler))
        if killer is not None:
            killer(cluster, conn, cp, phase)

    r = run(kill=hook)
    assert_served(r)
    assert {label for label, _ in checked} >= set(HANDSHAKE[1:])   # delta-borne states
    sizes = r.relay.checkpoints_frame().set_index("label")["bytes"]
    assert sizes["change_cipher_spec"].max() < sizes["client_hello"].min() / 2
    if kill is not None:
        assert r.conn.takeovers and len({node for _, node in checked}) == 2


def test_handshake_bytes_fall_with_deltas() -> None:
    on = run().relay.cluster_bytes_frame().iloc[0]
    off = run(params=ClusterParams(delta_updates=False)).relay.cluster_bytes_frame().iloc[0]
    assert on["handshake_bytes"] < 0.6 * off["handshake_bytes"]
    assert on["updates"] == off["updates"]                  # the same steps, smaller messages
