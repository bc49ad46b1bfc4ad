"""The guardian stops a channel's direction once its close_notify or fatal alert went through.

Found unchecked by the ``webalps`` mutation group: after the server's close_notify is sealed, no
later record of the server may be sealed (nor may the guardian's application answer a request
itself), after the client's close_notify or fatal alert is opened no later client record is
opened -- each direction alone (a TLS half-close leaves the other open); and one ``SEAL`` of a
response and its close_notify keeps each record's own content type.
"""

from __future__ import annotations

import pytest

from tests.webalps_sim.raw_guardian import RsaSession
from tls12.record import split_records
from tls12.testing import credentials
from webalps_sim import protocol as p
from webalps_sim.service import GuardianFailure, GuardianService

ALERT, DATA, CLOSE_NOTIFY = 21, 23, b"\x01\x00"
SERVER_CLOSED = r"^the server's side of this channel is closed \(its close_notify or a fatal alert was sealed\)$"
CLIENT_CLOSED = r"^the client's side of this channel is closed \(its close_notify or a fatal alert was opened\)$"


class SecretApp:
    """Answers every request inside the guardian."""

    def handle(self, method: str, target: str, headers: object, body: bytes) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        return 200, [(b"content-type", b"text/plain")], b"secret"


def _established(app: object | None = None) -> tuple[GuardianService, RsaSession]:
    creds = credentials()
    service = GuardianService(creds.private_key, tuple(creds.chain_der), b"m" * 32,
                              app=app)  # type: ignore[arg-type]
    session = RsaSession(creds.private_key.public_key())
    reply = service.handle(session.derive())
    assert isinstance(reply, p.HandleReply)
    assert isinstance(service.handle(session.finish(reply.handle_id)), p.FinishReply)
    return service, session


def _seal(session: RsaSession, seq: int, *records: tuple[int, bytes]) -> p.Seal:
    return p.Seal(session.handle_id, session.suite, False,
                  tuple((ct, 0x0303, seq + i, data) for i, (ct, data) in enumerate(records)))


def test_one_seal_of_a_response_and_its_close_notify_keeps_their_types() -> None:
    service, session = _established()
    sealed = service.handle(_seal(session, 1, (DATA, b"response"), (ALERT, CLOSE_NOTIFY)))
    assert isinstance(sealed, p.Sealed)
    ends = split_records(sealed.records)
    assert ends is not None and len(ends) == 2
    first, second = sealed.records[: ends[0]], sealed.records[ends[0]:]
    assert (first[0], second[0]) == (DATA, ALERT)
    assert session.read_server_record(first, 1) == b"response"
    assert session.read_server_record(second, 2) == CLOSE_NOTIFY


def test_after_the_servers_close_notify_nothing_more_is_sealed() -> None:
    service, session = _established()
    service.handle(_seal(session, 1, (ALERT, CLOSE_NOTIFY)))
    with pytest.raises(GuardianFailure, match=SERVER_CLOSED) as err:
        service.handle(_seal(session, 2, (DATA, b"late")))
    assert err.value.code == p.ErrorCode.UNSUPPORTED
    # the client's direction is still open: a half-close
    assert service.handle(session.open_request(b"still read")).plaintexts == (b"still read",)  # type: ignore[attr-defined]


def test_after_the_clients_close_notify_nothing_more_is_opened_and_the_server_may_answer() -> None:
    service, session = _established()
    service.handle(session.open_request(CLOSE_NOTIFY, ALERT))
    with pytest.raises(GuardianFailure, match=CLIENT_CLOSED) as err:
        service.handle(session.open_request(b"more"))
    assert err.value.code == p.ErrorCode.UNSUPPORTED
    # the server's direction is still open: its last response and close_notify go out
    sealed = service.handle(_seal(session, 1, (DATA, b"last response"), (ALERT, CLOSE_NOTIFY)))
    assert isinstance(sealed, p.Sealed) and len(split_records(sealed.records) or []) == 2


def test_the_application_does_not_answer_after_the_servers_close_notify() -> None:
    service, session = _established(SecretApp())
    answered = service.handle(session.open_request(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n"))
    assert isinstance(answered, p.Opened) and answered.sealed_count > 0  # it answers itself
    server_seq = answered.sealed_count + 1
    service.handle(_seal(session, server_seq, (ALERT, CLOSE_NOTIFY)))
    late = service.handle(session.open_request(b"GET /b HTTP/1.1\r\nHost: x\r\n\r\n"))
    assert isinstance(late, p.Opened) and late.sealed_count == 0 and late.sealed == b""
