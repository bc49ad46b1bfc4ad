"""Compact post-handshake state and per-record progress, for mirrors (issue 11 §1).

A mirror takes :meth:`Connection.export_keys` once, then a few-byte
:class:`tls12.state.Progress` per checkpoint; it learns record boundaries of
what was sent (:meth:`Connection.data_to_send_records`) and consumes input
one record at a time (:meth:`Connection.receive_record`), so it can be told
exactly which records the peer acknowledged.
"""

from __future__ import annotations

import json

import pytest

from tls12 import ClientConfig, ClientConnection, ServerConfig, ServerConnection
from tls12.errors import LocalProtocolError
from tls12.events import ApplicationData
from tls12.record import MAX_PLAINTEXT, OutgoingRecord, RecordWriter, WriteProtection
from tls12.state import PROGRESS_SIZE, Progress
from tls12.suites import SUITES, CipherSuite
from tls12.testing import credentials, pipe, seeded_rng

BODY = bytes(range(251)) * 200  # 50,200 bytes: three full records and a partial one


def _pair(suite: CipherSuite) -> tuple[ClientConnection, ServerConnection]:
    server = ServerConnection(
        ServerConfig(credentials=credentials(), cipher_suites=(suite,), rng=seeded_rng(3))
    )
    client = ClientConnection(ClientConfig(cipher_suites=(suite,), rng=seeded_rng(4)))
    pipe(client, server)
    assert server.handshake_complete
    return client, server


def _backup(keys: bytes, progress: Progress | bytes) -> ServerConnection:
    """A fresh server continuing from a keys document and a progress delta (own RNG)."""
    config = ServerConfig(credentials=credentials(), rng=seeded_rng("backup"))
    backup = ServerConnection.import_state(config, keys)
    backup.import_progress(progress)
    return backup


def _data(events: list[object]) -> bytes:
    return b"".join(e.data for e in events if isinstance(e, ApplicationData))


@pytest.mark.parametrize("suite", list(SUITES), ids=lambda s: SUITES[s].openssl_name)
def test_compact_form_sizes(suite: CipherSuite) -> None:
    """The measured sizes the tls12.state docstring quotes."""
    _, server = _pair(suite)
    full, keys = server.export_state(), server.export_keys()
    delta = server.export_progress().to_bytes()
    assert 3500 < len(full) < 4500
    assert 1200 < len(keys) < 1700 and len(keys) < len(full) / 2
    assert len(delta) == PROGRESS_SIZE == 18
    assert "transcript" in json.loads(full) and json.loads(keys)["transcript"] == ""


@pytest.mark.parametrize(
    "suite",
    [
        CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA,
        CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256,
        CipherSuite.TLS_RSA_WITH_NULL_SHA,
        CipherSuite.TLS_RSA_WITH_AES_128_GCM_SHA256,
    ],
    ids=lambda s: SUITES[s].openssl_name,
)
@pytest.mark.parametrize("acked_in_last", [0, 1, 700, -1])
def test_partially_acknowledged_output_is_resent_by_a_backup(
    suite: CipherSuite, acked_in_last: int
) -> None:
    """Records 0..k-1 acknowledged, record k up to byte j: the backup sends the same tail."""
    client, server = _pair(suite)
    keys = server.export_keys()  # once, right after the handshake
    server.send_data(BODY)
    records = server.data_to_send_records()
    assert len(records) == 4
    assert [int.from_bytes(r[3:5], "big") + 5 for r in records] == [len(r) for r in records]
    k = 2  # the peer acknowledged records 0 and 1 and part of record 2
    j = acked_in_last % len(records[k])
    acked = b"".join(records[:k]) + records[k][:j]
    now = server.export_progress()
    progress = Progress(now.read_seq, now.write_seq - (len(records) - k))
    backup = _backup(keys, progress.to_bytes())
    backup.send_data(BODY[k * MAX_PLAINTEXT :])  # the plaintext from record k on, read again
    resent = backup.data_to_send()
    assert resent == b"".join(records[k:])
    assert _data(client.receive_data(acked + resent[j:])) == BODY
    # the backup carries on in both directions
    backup.send_data(b"next")
    assert _data(client.receive_data(backup.data_to_send())) == b"next"
    client.send_data(b"reply")
    assert _data(backup.receive_data(client.data_to_send())) == b"reply"


@pytest.mark.parametrize(
    "suite",
    [CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA, CipherSuite.TLS_RSA_WITH_AES_128_GCM_SHA256],
    ids=lambda s: SUITES[s].openssl_name,
)
def test_input_one_record_at_a_time_and_a_checkpoint_between(suite: CipherSuite) -> None:
    client, server = _pair(suite)
    keys = server.export_keys()
    messages = [b"first", b"second" * 50, b"third"]
    wire = b""
    for message in messages:
        client.send_data(message)
        wire += client.data_to_send()
    assert server.receive_data(wire, max_records=0) == []
    progress = server.export_progress()
    steps = []
    while (step := server.receive_record()) is not None:
        steps.append(step)
        if len(steps) == 2:
            progress = server.export_progress()  # checkpoint after the second record
    assert [_data(s.events) for s in steps] == messages
    assert sum(s.wire_length for s in steps) == len(wire)
    assert [s.read_seq for s in steps] == [progress.read_seq - 1, progress.read_seq, progress.read_seq + 1]
    assert server.receive_record() is None
    # a backup at the checkpoint reads the third record (the peer retransmits what it was
    # not acknowledged for) and nothing else
    backup = _backup(keys, progress)
    third = wire[len(wire) - steps[2].wire_length :]
    assert _data(backup.receive_data(third)) == b"third"


def test_receive_data_with_a_limit_leaves_the_rest_buffered() -> None:
    client, server = _pair(CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA)
    for message in (b"a", b"b", b"c"):
        client.send_data(message)
    wire = client.data_to_send()
    assert _data(server.receive_data(wire[:-3], max_records=1)) == b"a"
    assert _data(server.receive_data(wire[-3:])) == b"bc"
    with pytest.raises(ValueError, match="max_records"):
        server.receive_data(b"x", max_records=-1)


class _StubWriter(RecordWriter):
    """Emits something other than TLS records (as the SSL-splitting writer does)."""

    def write_records(self, records: list[OutgoingRecord], protection: WriteProtection) -> bytes:
        return b"\xff" + super().write_records(records, protection)


def test_data_to_send_records_refuses_output_that_is_not_records() -> None:
    server = ServerConnection(
        ServerConfig(credentials=credentials(), rng=seeded_rng(1)), record_writer=_StubWriter()
    )
    client = ClientConnection(ClientConfig(rng=seeded_rng(2)))
    server.receive_data(client.data_to_send())
    with pytest.raises(LocalProtocolError, match="not whole TLS records"):
        server.data_to_send_records()
    assert server.data_to_send()[:1] == b"\xff"  # nothing was taken by the failed call


def test_export_keys_needs_a_quiet_established_connection() -> None:
    server = ServerConnection(ServerConfig(credentials=credentials(), rng=seeded_rng(1)))
    with pytest.raises(LocalProtocolError, match="established"):
        server.export_keys()
    with pytest.raises(LocalProtocolError, match="past its handshake"):
        server.import_progress(Progress(0, 0))
    _, server = _pair(CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA)
    server.send_data(b"queued")
    with pytest.raises(LocalProtocolError, match="data_to_send"):
        server.export_keys()


def test_progress_round_trip_and_close_flags() -> None:
    client, server = _pair(CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA)
    keys = server.export_keys()
    server.close()
    client.receive_data(server.data_to_send())
    progress = server.export_progress()
    assert progress.close_sent and not progress.closed
    blob = progress.to_bytes()
    assert Progress.from_bytes(blob) == progress
    backup = _backup(keys, blob)
    with pytest.raises(LocalProtocolError):
        backup.send_data(b"after close_notify")
    assert backup.export_progress() == progress


@pytest.mark.parametrize(
    "blob",
    [b"", bytes(17), b"\x02" + bytes(17), b"\x01" + bytes(16) + b"\x08"],
    ids=["empty", "short", "version", "flags"],
)
def test_bad_progress_blobs_are_refused(blob: bytes) -> None:
    with pytest.raises(ValueError):
        Progress.from_bytes(blob)


def test_progress_sequence_numbers_are_checked() -> None:
    with pytest.raises(ValueError, match="write_seq"):
        Progress(0, 1 << 64)
    with pytest.raises(ValueError, match="read_seq"):
        Progress(-1, 0)
