"""Checks of the guardian that the other tests left unguarded (found by mutating them).

Each test below failed on a one-line change to a guardian check that every other test of
``tests/webalps_sim/`` let pass; the docstrings name the property and the change.

* **record channel** (:mod:`webalps_sim.service`): the guardian opens client records only --
  else a host could have it decrypt the answers its application sealed for the client; no
  client application data is opened before the client's Finished was checked *right*, whether
  the host asks ``CHECK_FINISHED`` or ``FINISH`` with a wrong one;
* **sealed state** (:mod:`webalps_sim.sealed`): a blob two versions ahead of the counter is a
  rolled-back counter, not a crash to repair; a failed save changes nothing; the counter in a
  blob's header is authenticated; every seal draws a fresh nonce; a corrupt counter is refused;
* **e-voting** (:mod:`webalps_sim.evoting`): a vote whose sealing failed is neither counted nor
  used up; a form of exactly the largest accepted size is accepted.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest
from cryptography import x509

from tests.webalps_sim.guardian_helpers import InProcessGuardian, provision
from tls12.certs import Credentials
from tls12.client_connection import ClientConnection
from tls12.config import ClientConfig, ServerConfig
from tls12.delegate import KeyHandle
from tls12.events import ApplicationData
from tls12.record import OutgoingRecord
from tls12.testing import pipe
from webalps_sim import protocol as p
from webalps_sim.aio.host import WEBALPS_SUITES
from webalps_sim.aio.remote import (
    GuardianRefused,
    RecordRejected,
    RemoteDelegate,
    WebALPSServerConnection,
)
from webalps_sim.app import Headers, Response
from webalps_sim.evoting import MAX_BODY, EvotingApp, write_election
from webalps_sim.sealed import MAGIC, RollbackError, SealedStateError, SealedStore, TamperedError

SECRET = b"the guardian's answer, for the client's eyes only\n"
APPLICATION_DATA, HANDSHAKE = 23, 22


BIG = bytes(range(256)) * 160  # 40 960 bytes: three records


class SecretApp:
    """Claims ``/secret`` and ``/big`` and answers them inside the guardian."""

    def handle(self, method: str, target: str, headers: Headers, body: bytes) -> Response | None:
        if target == "/secret":
            return 200, [(b"content-type", b"text/plain")], SECRET
        if target == "/big":
            return 200, [(b"content-type", b"application/octet-stream")], BIG
        return None


class TwoStepHost(RemoteDelegate):
    """A host that completes a split handshake with ``CHECK_FINISHED`` and ``VERIFY_DATA``
    (two requests) instead of ``FINISH``, and keeps what it asked."""

    finish_args: tuple[bytes, bytes, bytes] = (b"", b"", b"")

    def finish(self, handle: KeyHandle, client_hash: bytes, client_verify_data: bytes,
               server_hash: bytes) -> bytes | None:
        self.finish_args = (client_hash, client_verify_data, server_hash)
        if not self.check_finished(handle, True, client_hash, client_verify_data):
            return None
        return self.verify_data(handle, False, server_hash)


@pytest.fixture()
def sock(tmp_path: Path) -> Iterator[Path]:
    """The socket of a certified guardian (on a thread here) running :class:`SecretApp`."""
    prov = provision(tmp_path)
    with InProcessGuardian(prov.state_dir, tmp_path / "g.sock", app=SecretApp()):
        yield tmp_path / "g.sock"


@pytest.fixture()
def remote(sock: Path) -> Iterator[RemoteDelegate]:
    """A host's channel to that guardian."""
    channel = RemoteDelegate(sock)
    yield channel
    channel.close()


def _hellos_done(remote: RemoteDelegate) -> tuple[ClientConnection, WebALPSServerConnection]:
    """A client and the WebALPS host after the hello messages (the client's flight is queued)."""
    chain = tuple(x509.load_der_x509_certificate(c) for c in remote.chain())
    config = ServerConfig(credentials=Credentials.chain_only(chain), cipher_suites=WEBALPS_SUITES)
    server = WebALPSServerConnection(config, delegate=remote)
    client = ClientConnection(ClientConfig(cipher_suites=(WEBALPS_SUITES[0],)))
    server.receive_data(client.data_to_send())
    client.receive_data(server.data_to_send())
    return client, server


def _fields(record: bytes) -> tuple[int, int, bytes]:
    """(content type, version, fragment) of one whole record."""
    assert len(record) == 5 + int.from_bytes(record[3:5], "big"), "expected exactly one record"
    return record[0], int.from_bytes(record[1:3], "big"), record[5:]


def _data(events: list[object]) -> bytes:
    return b"".join(e.data for e in events if isinstance(e, ApplicationData))


# -- the record channel ------------------------------------------------------------------------


def test_the_host_cannot_have_the_guardian_open_its_own_answers(remote: RemoteDelegate) -> None:
    """``OPEN`` in the server's direction is refused, even at the expected sequence number.

    The guardian's application answers a request inside the guardian and seals the answer for
    the client; if ``OPEN`` accepted server records (mutant: the ``from_client`` check of
    ``GuardianService._open`` dropped) the host would hand that record back and read it.
    """
    client, server = _hellos_done(remote)
    pipe(client, server)
    assert server.handshake_complete
    handle = server.key_handle
    assert handle is not None
    # The host first sends one record of its own (server record 1), so that the guardian's
    # answer below is server record 2 -- the number the guardian expects next from the client.
    server.send_data(b"the host's own greeting\n")
    client.receive_data(server.data_to_send())
    client.send_data(b"GET /secret HTTP/1.1\r\nHost: x\r\n\r\n")  # client record 1
    server.receive_data(client.data_to_send())
    answer = server.data_to_send()  # the guardian sealed it; the host only relays it
    content_type, version, fragment = _fields(answer)
    assert content_type == APPLICATION_DATA
    assert _data(client.receive_data(answer)).endswith(SECRET)  # the client reads it
    with pytest.raises(GuardianRefused, match="opens client records only") as refused:
        remote.open(handle, False, [(2, content_type, version, fragment)])
    assert refused.value.code == p.ErrorCode.UNSUPPORTED


def test_no_application_data_is_opened_before_the_clients_finished_is_right(
        remote: RemoteDelegate) -> None:
    """A valid client record of application data waits for a right client Finished.

    The host holds the client's Finished back (``DERIVE`` only) and asks the guardian to open
    the Finished record and a valid application-data record behind it, in one batch at the
    expected sequence numbers: refused, and nothing advances.  A wrong client Finished,
    checked alone (``CHECK_FINISHED``) or with the server's (``FINISH``), changes nothing
    (mutants: ``_check_finished`` recording any answer as checked, ``_finish`` going on
    after a wrong one, ``_open`` skipping the order check).  Once the real Finished went
    through, the very same record opens: it was refused for its order, not its bytes.
    """
    client, server = _hellos_done(remote)
    flight = client.data_to_send_records()  # ClientKeyExchange, ChangeCipherSpec, Finished
    assert server.receive_data(flight[0]) == []  # DERIVE: the guardian has keys, no Finished
    handle = server.key_handle
    assert handle is not None
    request = b"GET /ballot HTTP/1.1\r\nHost: x\r\n\r\n"  # a request for the host
    early = client.write_protection.seal(  # client record 1, right after its Finished (0)
        OutgoingRecord(APPLICATION_DATA, 0x0303, 1, request))
    fin_type, fin_version, fin_fragment = _fields(flight[2])
    assert fin_type == HANDSHAKE
    app_type, app_version, app_fragment = _fields(early)
    batch = [(0, fin_type, fin_version, fin_fragment), (1, app_type, app_version, app_fragment)]

    def refused() -> None:
        with pytest.raises(GuardianRefused, match="before the client's Finished") as info:
            remote.open(handle, True, batch)
        assert info.value.code == p.ErrorCode.UNSUPPORTED

    refused()
    assert remote.check_finished(handle, True, b"t" * 32, b"v" * 12) is False
    refused()
    assert remote.finish(handle, b"t" * 32, b"v" * 12, b"s" * 32) is None
    refused()
    # the real Finished (the host's OPEN of record 0, then FINISH): the handshake completes
    server.receive_data(b"".join(flight[1:]))
    client.receive_data(server.data_to_send())
    assert server.handshake_complete and client.handshake_complete
    opened = remote.open(handle, True, [(1, app_type, app_version, app_fragment)])
    assert opened == [request]


def test_a_right_finished_checked_alone_unlocks_the_channel(sock: Path) -> None:
    """``CHECK_FINISHED`` with the right verify_data answers True and lets application data
    flow (mutants: its answer or the unlocking dropped, the wrong label or direction checked);
    a replayed ``FINISH`` afterwards seals the server's Finished at a fresh sequence number
    each time, never one already used (mutant: ``write_seq = 1`` for ``+= 1``)."""
    remote = TwoStepHost(sock)
    try:
        client, server = _hellos_done(remote)
        flight = client.data_to_send_records()
        server.receive_data(flight[0])  # DERIVE
        handle = server.key_handle
        assert handle is not None
        request = b"GET /ballot HTTP/1.1\r\nHost: x\r\n\r\n"
        early = client.write_protection.seal(
            OutgoingRecord(APPLICATION_DATA, 0x0303, 1, request))
        server.receive_data(b"".join(flight[1:]))  # OPEN, CHECK_FINISHED, VERIFY_DATA, SEAL
        client.receive_data(server.data_to_send())
        assert server.handshake_complete and client.handshake_complete
        _, version, fragment = _fields(early)
        assert remote.open(handle, True, [(1, APPLICATION_DATA, version, fragment)]) == [request]
        client_hash, client_verify, server_hash = remote.finish_args
        seqs = []
        for _ in range(2):
            reply = remote.request(p.Finish(handle.id, handle.cipher_suite, client_hash,
                                            client_verify, server_hash, 0x0303))
            assert isinstance(reply, p.FinishReply) and reply.ok
            seqs.append(reply.seq)
        assert seqs == [1, 2]  # server record 0 was the first Finished
    finally:
        remote.close()


def test_empty_batches_get_empty_answers(remote: RemoteDelegate) -> None:
    """``SEAL`` or ``OPEN`` of no records returns nothing (mutants: bytes or None instead)."""
    client, server = _hellos_done(remote)
    pipe(client, server)
    handle = server.key_handle
    assert handle is not None
    assert remote.seal(handle, False, []) == b""
    assert remote.open(handle, True, []) == []


def test_a_tampered_record_is_refused_and_nothing_advances(remote: RemoteDelegate) -> None:
    """A client record with one flipped bit: ``BAD_RECORD`` (the host's ``RecordRejected``),
    and the guardian still expects that sequence number -- the intact record opens next."""
    client, server = _hellos_done(remote)
    pipe(client, server)
    handle = server.key_handle
    assert handle is not None
    request = b"GET /index.html HTTP/1.1\r\nHost: x\r\n\r\n"
    client.send_data(request)
    _, version, fragment = _fields(client.data_to_send())
    bad = fragment[:-1] + bytes([fragment[-1] ^ 1])
    with pytest.raises(RecordRejected):
        remote.open(handle, True, [(1, APPLICATION_DATA, version, bad)])
    assert remote.open(handle, True, [(1, APPLICATION_DATA, version, fragment)]) == [request]


def test_every_claimed_request_of_a_batch_is_answered_in_order(remote: RemoteDelegate) -> None:
    """Two claimed requests in two records that reach the host together (one ``OPEN``) get
    two answers, back to back (mutants: the first answer dropped or joined with filler); an
    answer of three records is numbered on from the channel's next server record."""
    client, server = _hellos_done(remote)
    pipe(client, server)
    client.send_data(b"GET /secret HTTP/1.1\r\nHost: x\r\n\r\n")
    one, _ = pipe(client, server)
    single = _data(one)
    assert single.startswith(b"HTTP/1.1 200 OK\r\n") and single.endswith(SECRET)
    client.send_data(b"GET /secret HTTP/1.1\r\nHost: x\r\n\r\n")
    client.send_data(b"GET /secret HTTP/1.1\r\nHost: x\r\n\r\n")
    both, host_events = pipe(client, server)
    assert _data(both) == single * 2 and _data(host_events) == b""
    client.send_data(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
    big, _ = pipe(client, server)
    assert _data(big).endswith(b"\r\n\r\n" + BIG)


# -- sealed state ------------------------------------------------------------------------------


def test_a_blob_two_versions_ahead_means_the_counter_was_rolled_back(tmp_path: Path) -> None:
    """Only *one* version ahead is a crash between the blob and the counter write.

    A blob two ahead means the guardian's counter went back (mutant: ``counter > self.counter
    + 1`` loosened); accepting it would also accept a blob whose intermediate version is lost.
    """
    store = SealedStore(tmp_path, "tally")
    store.save(b"v1")
    store.blob_path.write_bytes(store.seal(b"v3", 3))
    with pytest.raises(RollbackError, match="counter was rolled back"):
        SealedStore(tmp_path, "tally").load()
    store.blob_path.write_bytes(store.seal(b"v2", 2))  # the control: one ahead is repaired
    assert SealedStore(tmp_path, "tally").load() == b"v2"


def _break_next_write(path: Path) -> Path:
    """Make the next :func:`webalps_sim.sealed.write_atomically` of ``path`` from this process
    fail before anything is renamed: a directory stands where its temporary file goes."""
    blocker = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    blocker.mkdir()
    return blocker


def test_a_failed_save_changes_nothing(tmp_path: Path) -> None:
    """A save that fails leaves the previous version loadable and the counter where it was.

    Blob first, counter second: were the counter advanced first (mutant: the two writes of
    ``save`` swapped, or the in-memory counter bumped before the blob is written) the guardian
    would take its own unchanged blob for a replayed one and never start again.
    """
    store = SealedStore(tmp_path, "tally")
    store.save(b"v1")
    blocker = _break_next_write(store.blob_path)
    with pytest.raises(OSError):
        store.save(b"v2")
    assert store.counter == 1
    restarted = SealedStore(tmp_path, "tally")
    assert restarted.load() == b"v1" and restarted.counter == 1
    blocker.rmdir()
    assert store.save(b"v2") == 2  # the disk recovered: the next save is version 2
    assert SealedStore(tmp_path, "tally").load() == b"v2"


def test_an_old_blob_with_a_forged_counter_does_not_open(tmp_path: Path) -> None:
    """The counter in a blob's header is authenticated (part of the AES-GCM associated data).

    The host replays version 1 with its header's counter rewritten to the current version 2:
    it must not open (mutant: the counter left out of ``_aad``), or the rollback check, which
    reads that counter, would be fooled.
    """
    store = SealedStore(tmp_path, "tally")
    store.save(b"ann has not voted")
    old = store.blob_path.read_bytes()
    store.save(b"ann has voted")
    magic, counter, nonce = struct.unpack_from(">9sQ12s", old)
    assert (magic, counter) == (MAGIC, 1)
    forged = struct.pack(">9sQ12s", magic, 2, nonce) + old[29:]
    store.blob_path.write_bytes(forged)
    with pytest.raises(TamperedError, match="authentication failed"):
        SealedStore(tmp_path, "tally").load()


def test_every_seal_draws_a_fresh_nonce(tmp_path: Path) -> None:
    """AES-GCM under one key must never reuse a nonce: the same state at the same version
    sealed again gives another nonce and another ciphertext (mutant: a constant nonce)."""
    store = SealedStore(tmp_path, "tally")
    blobs = [store.seal(b"the same state", 1) for _ in range(3)]
    nonces = {struct.unpack_from(">9sQ12s", b)[2] for b in blobs}
    assert len(nonces) == 3 and len({b[29:] for b in blobs}) == 3
    assert all(store.unseal(b) == (1, b"the same state") for b in blobs)


def test_an_empty_state_round_trips(tmp_path: Path) -> None:
    """The shortest valid blob (header and tag, no ciphertext) opens: "truncated" means
    shorter than that (mutants: ``<=`` or one byte more in the length check)."""
    store = SealedStore(tmp_path, "tally")
    store.save(b"")
    assert len(store.blob_path.read_bytes()) == 29 + 16
    assert SealedStore(tmp_path, "tally").load() == b""


def test_a_corrupt_counter_is_refused(tmp_path: Path) -> None:
    """The counter stands for the card's battery-backed memory: unreadable is untrusted,
    not zero (zero would accept any version-1 blob the host kept)."""
    SealedStore(tmp_path, "tally").save(b"v1")
    (tmp_path / "tally.counter").write_text("one\n")
    with pytest.raises(SealedStateError, match="not a counter"):
        SealedStore(tmp_path, "tally")


# -- e-voting ----------------------------------------------------------------------------------

FORM = [(b"content-type", b"application/x-www-form-urlencoded")]


def test_a_vote_that_could_not_be_sealed_is_neither_counted_nor_used_up(tmp_path: Path) -> None:
    """The tally in memory changes only after the sealed copy is on disk.

    The disk fails while ann votes: no acknowledgement, nothing counted, and once the disk
    recovers ann's vote is taken (mutant: ``_commit`` updating the tally before sealing it,
    which answers ann's retry with 409 "already voted" although no vote of hers is on disk).
    """
    write_election(tmp_path, ["red", "blue"], {"ann": "pw-ann"}, {"officer": "pw-off"}, n=2**10)
    app = EvotingApp(tmp_path)
    body = urlencode({"name": "ann", "password": "pw-ann", "choice": "red"}).encode()
    blocker = _break_next_write(app.store.blob_path)
    with pytest.raises(OSError):
        app.handle("POST", "/vote", FORM, body)
    assert app.tally.counts == {"red": 0, "blue": 0} and app.tally.voted == set()
    blocker.rmdir()
    reply = app.handle("POST", "/vote", FORM, body)
    assert reply is not None and reply[0] == 200
    assert EvotingApp(tmp_path).tally.counts == {"red": 1, "blue": 0}


def test_a_form_of_exactly_the_largest_size_is_accepted(tmp_path: Path) -> None:
    """``MAX_BODY`` is the largest accepted body: that size is read, one byte more is 413."""
    write_election(tmp_path, ["red", "blue"], {"ann": "pw-ann"}, {"officer": "pw-off"}, n=2**10)
    app = EvotingApp(tmp_path)
    form = urlencode({"name": "ann", "password": "pw-ann", "choice": "red"}).encode()
    padded = form + b"&pad=" + b"x" * (MAX_BODY - len(form) - 5)
    assert len(padded) == MAX_BODY
    reply = app.handle("POST", "/vote", FORM, padded)
    assert reply is not None and reply[0] == 200
    reply = app.handle("POST", "/vote", FORM, padded + b"x")
    assert reply is not None and reply[0] == 413


def test_a_form_without_a_password_is_refused_not_a_crash(tmp_path: Path) -> None:
    """A missing field is an empty one: 401 for no password, 400 for no choice (mutants: a
    missing password taken as ``None``, which crashes the scrypt call)."""
    write_election(tmp_path, ["red", "blue"], {"ann": "pw-ann"}, {"officer": "pw-off"}, n=2**10)
    app = EvotingApp(tmp_path)
    reply = app.handle("POST", "/vote", FORM, b"name=ann&choice=red")
    assert reply is not None and reply[0] == 401
    reply = app.handle("POST", "/close", FORM, b"name=officer")
    assert reply is not None and reply[0] == 401
    reply = app.handle("POST", "/vote", FORM, b"name=ann&password=pw-ann")
    assert reply is not None and reply[0] == 400
    assert app.tally.voted == set()


def test_results_are_json_after_the_close(tmp_path: Path) -> None:
    """The published tally says it is JSON (mutants: the content-type field mangled)."""
    write_election(tmp_path, ["red", "blue"], {"ann": "pw-ann"}, {"officer": "pw-off"}, n=2**10)
    app = EvotingApp(tmp_path)
    app.handle("POST", "/close", FORM, b"name=officer&password=pw-off")
    reply = app.handle("GET", "/results", [], b"")
    assert reply is not None and reply[0] == 200
    assert reply[1] == [(b"content-type", b"application/json")]
