"""A real tls12 client through the cluster: no failure, owner killed at three points, controls."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sslacc_sim import Checkpoint, Cluster, ClusterParams, Origin, RelayConn

from .helpers import BODY, Kill, Run, assert_served, kill_owner, run


def test_no_failure_every_step_is_clustered_before_commit() -> None:
    r = run()
    assert_served(r)
    labels = [c[1] for c in r.conn.checkpoints]
    assert labels[:6] == ["client_hello", "client_key_exchange", "change_cipher_spec",
                          "finished", "established", "data"]           # Figures 18-20
    assert labels[-2:] == ["alert_received", "eof"]                     # close_notify, FIN
    assert labels.count("response") == -(-len(r.origin.response) // 16384)
    assert r.conn.takeovers == []
    frame = r.relay.checkpoints_frame()
    assert list(frame["label"]) == labels
    assert r.cluster.lan.bytes > frame["bytes"].sum()   # real message sizes on the wire
    before = frame["label"].isin(labels[:4])
    first = frame["bytes"].iloc[0]
    assert first > 3000                                 # the whole exported state
    # the later handshake updates are deltas against it (sslacc_sim.delta), then compact
    assert frame["bytes"][before].iloc[1:].max() < first / 2
    assert frame["bytes"][~before].max() < first


def test_without_deltas_every_handshake_update_is_the_whole_state() -> None:
    r = run(params=ClusterParams(delta_updates=False))
    assert_served(r)
    frame = r.relay.checkpoints_frame()
    before = frame["label"].isin(["client_hello", "client_key_exchange",
                                  "change_cipher_spec", "finished"])
    assert before.sum() == 4
    assert frame["bytes"][before].min() > 3000
    assert frame["bytes"][~before].max() < frame["bytes"][before].min()   # compact after


@pytest.mark.parametrize(("label", "phase", "nth"), [
    ("client_hello", "committed", 0),   # mirror has pre-ServerHello state, client has nothing
    ("client_hello", "released", 0),    # ServerHello flight already on the wire
    ("client_key_exchange", "committed", 0),
    ("change_cipher_spec", "released", 0),
    ("finished", "committed", 0),       # client Finished read, server CCS/Finished not sent
    ("finished", "released", 0),
    ("established", "committed", 0),
    ("data", "committed", 0),           # request relayed to the origin, not yet acknowledged
    ("response", "committed", 2),       # mid-response, third piece clustered but not sent
    ("response", "released", 2),        # mid-response, third piece on the wire
])
def test_owner_killed_the_mirror_finishes_byte_identically(label: str, phase: str,
                                                             nth: int) -> None:
    r = run(kill_owner(label, phase, nth))
    assert_served(r)
    (when, node, how), = r.conn.takeovers
    assert how.endswith(f"({label})")
    first_owner = r.conn.checkpoints[0][3]
    assert node != first_owner and not r.cluster.node(first_owner).alive
    assert [d[1] for d in r.cluster.deaths] == [first_owner]


@pytest.mark.parametrize("label", ["client_key_exchange", "finished", "response"])
def test_client_writing_whole_flights_is_served_too(label: str) -> None:
    r = run(kill_owner(label, "committed", 1 if label == "response" else 0), per_record=False)
    assert_served(r)
    assert len(r.conn.takeovers) == 1


def test_owner_killed_before_the_first_commit_fingered_ack_restarts_cleanly() -> None:
    r = run(kill_owner("client_hello", "prepared"))
    assert_served(r)
    assert [t[2] for t in r.conn.takeovers] == ["fingered ACK"]


def test_mirror_that_dies_under_a_pending_commit_is_replaced_without_deadlock() -> None:
    def kill_mirror(cluster: Cluster, conn: RelayConn, cp: Checkpoint, phase: str) -> None:
        mirror = cluster.mirror[conn.bucket]
        if cp.label == "finished" and phase == "prepared" and mirror is not None:
            cluster.node(mirror).kill()

    r = run(kill_mirror)
    assert_served(r)
    assert r.conn.takeovers == [] and len(r.cluster.deaths) == 1


def test_two_successive_owner_failures() -> None:
    first, second = kill_owner("client_hello", "committed"), kill_owner("response", "released", 1)

    def both(cluster: Cluster, conn: RelayConn, cp: Checkpoint, phase: str) -> None:
        first(cluster, conn, cp, phase)
        second(cluster, conn, cp, phase)

    r = run(both)
    assert_served(r)
    assert len(r.conn.takeovers) == 2 and len(r.cluster.deaths) == 2


@pytest.mark.parametrize("label", ["client_hello", "client_key_exchange", "finished"])
def test_negative_control_commit_before_cluster_makes_the_client_fail(label: str) -> None:
    """Figure 6: the owner commits (ACKs the client's flight) and dies before the update
    reaches the mirror; the mirror's state is older than what the client was told, the client
    never gets the answer to its acknowledged flight and gives up (the paper: a dangling
    connection)."""
    r = run(kill_owner(label, "released"), ClusterParams(cluster_then_commit=False))
    assert r.client.error is not None
    assert r.client.done_at is None
    assert bytes(r.client.response) != r.origin.response


def _mirror_then_owner(cluster: Cluster, conn: RelayConn, cp: Checkpoint, phase: str) -> None:
    """Kill the mirror before the first update reaches it, then the owner mid-response."""
    if cp.label == "client_hello" and phase == "prepared":
        mirror = cluster.mirror[conn.bucket]
        assert mirror is not None
        cluster.node(mirror).kill()
    dead = sum(not n.alive for n in cluster.nodes)
    if cp.label == "response" and phase == "released" and dead == 1:
        cluster.node(conn.handler).kill()


def test_mirror_then_owner_failure_the_third_node_finishes() -> None:
    r = run(_mirror_then_owner)
    assert_served(r)
    assert len(r.cluster.deaths) == 2 and len(r.conn.takeovers) == 1


def test_negative_control_unclustered_state_is_unknown_and_reset_after_2msl() -> None:
    """Without cluster-then-commit the first mirror's death loses every update: the last node
    has no state, the client's ACK no longer carries the finger, so the connection is
    unknown; the node stays silent for 2MSL (section 4.6) and then resets it."""
    params = ClusterParams(cluster_then_commit=False)
    r = run(_mirror_then_owner, params, until=200.0, timeout=None)
    (when, node, how), = r.conn.takeovers
    assert how == "unknown connection"
    assert r.client.error == "connection reset"
    (reset_at, conn_id), = r.relay.resets
    assert reset_at >= when + 2 * params.msl
    assert r.relay.guards[node].suppressed >= 1
    assert r.origin.requests and bytes(r.client.response) != r.origin.response


# -- compact updates and record-size pre-writes (sections 5.5-5.6) ------------------------

def test_compact_updates_cut_the_cluster_bytes_of_a_response() -> None:
    full = run(params=ClusterParams(compact_updates=False))
    compact = run()
    assert_served(full)
    assert_served(compact)
    before = full.relay.cluster_bytes_frame().iloc[0]
    after = compact.relay.cluster_bytes_frame().iloc[0]
    # a full update carries the queued ciphertext: more than the 16 KiB piece it covers
    assert before["bytes_per_16k_response"] > 16384
    # a compact one: progress, one record size, the origin offset
    assert after["bytes_per_16k_response"] < before["bytes_per_16k_response"] / 30
    assert after["updates"] == before["updates"]
    assert after["handshake_bytes"] == before["handshake_bytes"]   # full until established
    keys = [c for c in compact.conn.checkpoints if c[1] == "established"]
    assert keys[0][2] > 1000        # the keys travel once, with the established update


def kill_mid_record(nth: int, delay: float, seen: list[tuple[int, int, int]]) -> Kill:
    """Kill the owner ``delay`` s after the ``nth`` response piece was released, recording
    (piece start, client-acknowledged offset, piece end) in stream bytes at that moment."""

    def kill(cluster: Cluster, conn: RelayConn, cp: Checkpoint, phase: str) -> None:
        n = sum(1 for c in conn.checkpoints if c[1] == "response")
        if cp.label != "response" or phase != "released" or n != nth + 1 or seen:
            return
        owner = cluster.node(conn.handler)
        end = conn.tcp.stream_out()

        def later():  # type: ignore[no-untyped-def]
            yield cluster.env.timeout(delay)
            st = conn.tcp.b.seq
            seen.append((cp.out_start, st.snd_una - st.isn - 1, end))
            owner.kill()

        cluster.env.process(later())

    return kill


@pytest.mark.parametrize("delay", [0.016, 0.019, 0.022])
def test_failure_mid_record_the_mirror_reseals_the_tail_byte_identically(delay: float) -> None:
    seen: list[tuple[int, int, int]] = []
    r = run(kill_mid_record(2, delay, seen))
    (start, acked, end), = seen
    assert start < acked < end              # the client holds part of the record
    assert_served(r)
    assert len(r.conn.takeovers) == 1


@pytest.mark.parametrize("delay", [0.016, 0.019, 0.022])
def test_negative_control_without_record_size_prewrites_mid_record_failure_breaks(
        delay: float) -> None:
    """Section 5.6, Figures 25-26: the mirror reads the origin in chunks of its own, its
    records do not line up with the half-received one and the client's stream is garbled."""
    seen: list[tuple[int, int, int]] = []
    params = ClusterParams(record_size_prewrite=False, response_piece=4 * 4096)
    r = run(kill_mid_record(2, delay, seen), params)
    (start, acked, end), = seen
    assert start < acked < end
    assert len(r.conn.takeovers) == 1
    assert r.client.error is not None or bytes(r.client.response) != r.origin.response
    assert bytes(r.client.response) != r.origin.response


# -- the five data-transfer failure points of section 4.8, both directions ----------------

def kill_on_request_arrival(cluster: Cluster, conn: RelayConn, cp: Checkpoint,
                            phase: str) -> None:
    """Point 1 (client to server): the request's bytes have reached the owner, nothing else."""
    if cp.label != "established" or phase != "released" or conn.takeovers:
        return
    deliver = conn.tcp.a.on_data
    owner = cluster.node(conn.handler)

    def arrived(chunk: bytes) -> None:
        assert deliver is not None
        deliver(chunk)
        if chunk and owner.alive:
            owner.kill()

    conn.tcp.a.on_data = arrived


# Factories, not hooks: a kill hook remembers that it has fired, so each run builds its own
# (a table of hooks built once at import would kill nobody the second time a case runs).
CLIENT_TO_SERVER: dict[str, Callable[[], Kill]] = {
    "1 received by the relay": lambda: kill_on_request_arrival,
    "2-3 written to the origin, not clustered": lambda: kill_owner("data", "prepared"),
    "4 update sent, not acknowledged": lambda: kill_owner("data", "sent"),
    "5 update acknowledged, client not acknowledged": lambda: kill_owner("data", "committed"),
}


@pytest.mark.parametrize("point", list(CLIENT_TO_SERVER))
def test_section_4_8_client_to_server_failure_points(point: str) -> None:
    r = run(CLIENT_TO_SERVER[point]())
    assert_served(r)                         # includes: the origin saw the request once
    assert len(r.conn.takeovers) == 1


SERVER_TO_CLIENT: dict[str, Callable[[list[tuple[int, int, int]]], Kill]] = {
    "1 read from the origin, not clustered": lambda _: kill_owner("response", "prepared", 2),
    "2 on the wire, client holds part of the record": lambda s: kill_mid_record(2, 0.019, s),
    "3 client acknowledged the record": lambda s: kill_mid_record(2, 0.030, s),
    "4 update sent, not acknowledged": lambda _: kill_owner("response", "sent", 2),
    "5 update acknowledged, record not written": lambda _: kill_owner("response", "committed", 2),
}


@pytest.mark.parametrize("point", list(SERVER_TO_CLIENT))
def test_section_4_8_server_to_client_failure_points(point: str) -> None:
    seen: list[tuple[int, int, int]] = []
    r = run(SERVER_TO_CLIENT[point](seen))
    assert_served(r)
    assert len(r.conn.takeovers) == 1
    if point.startswith("3"):
        (start, acked, end), = seen
        assert acked >= end                  # the whole record was acknowledged first


# -- partial ACKs (section 5.5) ------------------------------------------------------------

POST = bytes(range(256)) * 48          # 12 KiB: one client record, larger than the first window


def assert_posted(r: Run) -> None:
    assert r.client.error is None
    assert bytes(r.client.response) == r.origin.response
    (conn, request), = r.origin.requests
    assert conn == r.conn.id and request.startswith(b"POST / HTTP/1.0\r\n")
    assert request.endswith(POST)                   # the whole body, once


def test_partial_acks_unblock_a_record_larger_than_the_clients_window() -> None:
    r = run(body=POST)
    assert_posted(r)
    assert r.conn.partial_acks >= 1
    labels = [c[1] for c in r.conn.checkpoints]
    assert "partial_ack" in labels and labels.index("partial_ack") < labels.index("data")


def test_negative_control_without_partial_acks_the_big_record_deadlocks() -> None:
    """The relay may not acknowledge part of a record and the client may not send more than
    its window: nobody moves, and the client gives up."""
    r = run(params=ClusterParams(partial_acks=False), body=POST)
    assert r.client.error == "timed out"
    assert r.origin.requests == []
    assert r.conn.partial_acks == 0


@pytest.mark.parametrize("phase", ["sent", "committed", "released"])
def test_failure_around_a_partial_ack_the_mirror_reads_the_rest_of_the_record(
        phase: str) -> None:
    r = run(kill_owner("partial_ack", phase), body=POST)
    assert_posted(r)
    assert len(r.conn.takeovers) == 1


# -- failures during close (section 5.7) ---------------------------------------------------

LAST_PIECE = -(-len(Origin(BODY).response) // 16384) - 1   # sealed with close_notify


@pytest.mark.parametrize(("label", "phase", "nth"), [
    ("response", "committed", LAST_PIECE),   # last piece + close_notify clustered, unsent
    ("response", "released", LAST_PIECE),    # on the wire; the mirror re-seals both records
    ("alert_received", "committed", 0),      # the client's close_notify read
    ("alert_received", "released", 0),
    ("eof", "prepared", 0),                  # the client's FIN read, not clustered
])
def test_failure_during_close(label: str, phase: str, nth: int) -> None:
    r = run(kill_owner(label, phase, nth))
    assert_served(r)
    assert len(r.conn.takeovers) == 1
    assert r.conn.closed


@pytest.mark.parametrize("bad", [{"iat_gain": 0.0}, {"iat_gain": 1.5}, {"iat_initial": 0.0}])
def test_inter_arrival_parameters_are_checked(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="iat"):
        ClusterParams(**bad)  # type: ignore[arg-type]
