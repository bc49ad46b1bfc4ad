"""The guardian's memory is bounded across sessions and host restarts (issue 21, defect 4).

Before the fix every cached session kept about 49 KB in the guardian forever: over four host
restarts of 2,500 sessions each its RSS went 36 -> 159 -> 281 -> 403 -> 525 MB.  Now

* every handle belongs to the host connection that created it and is freed when that
  connection closes (a restarted host leaves no orphans), the other connections' handles stay;
* a session whose connection ended (close_notify or a fatal alert both ways) keeps only what
  resuming needs: its record ciphers and request router are dropped -- about 1.6 KB instead of
  39 KB (the documented bound tested here: under 4 KB);
* the documented bound of the process test: **10,000 sessions in 4 host runs of 2,500 (half
  released by the host, half left cached, half closed with close_notify) raise the guardian's
  RSS by less than 10 MB after the first run**.
"""

from __future__ import annotations

import gc
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.webalps_sim.raw_guardian import (
    GuardianChild,
    RawGuardian,
    RsaSession,
    proc_status,
    provision_small_key,
)
from tls12.testing import credentials
from webalps_sim import protocol as p
from webalps_sim.aio.guardian import GuardianServer
from webalps_sim.identity import load_identity
from webalps_sim.service import GuardianService

ALERT, CLOSE_NOTIFY = 21, b"\x01\x00"
GET = b"GET /index.html HTTP/1.1\r\nHost: x\r\n\r\n"
RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 2048\r\n\r\n" + b"r" * 2048


def _host_run(raw: RawGuardian, public_key: object, sessions: int, batch: int = 100
              ) -> list[RsaSession]:
    """What a host does for ``sessions`` full handshakes, pipelined ``batch`` at a time: DERIVE,
    FINISH, one request and its response; every second one ends with close_notify both ways,
    every other pair is released.  Returns the sessions left cached."""
    kept: list[RsaSession] = []
    for start in range(0, sessions, batch):
        group = [RsaSession(public_key) for _ in range(batch)]  # type: ignore[arg-type]
        handles = raw.pipeline([s.derive() for s in group])
        requests: list[p.Message] = []
        for i, (session, handle) in enumerate(zip(group, handles, strict=True)):
            assert isinstance(handle, p.HandleReply), handle
            requests += [session.finish(handle.handle_id), session.open_request(GET)]
            records = [(23, 0x0303, 1, RESPONSE)]
            if i % 2:
                records.append((ALERT, 0x0303, 2, CLOSE_NOTIFY))
            requests.append(p.Seal(handle.handle_id, session.suite, False, tuple(records)))
            if i % 2:
                requests.append(session.open_request(CLOSE_NOTIFY, ALERT))
            if (start + i) % 4 < 2:
                requests.append(p.Release(handle.handle_id))
            else:
                kept.append(session)
        for reply in raw.pipeline(requests):
            assert not isinstance(reply, p.Error), reply
    return kept


def _gone(raw: RawGuardian, session: RsaSession) -> bool:
    reply = raw.request(p.Resume(session.handle_id, session.suite, b"c" * 32, b"s" * 32))
    return isinstance(reply, p.Error) and reply.code == p.ErrorCode.UNKNOWN_HANDLE


def test_rss_stays_bounded_across_10000_sessions_and_host_restarts(tmp_path: Path) -> None:
    state = provision_small_key(tmp_path)
    public = load_identity(state, "null")[0].public_key()
    sock = tmp_path / "g.sock"
    rss: list[int] = []
    with GuardianChild(state, sock) as guardian:
        kept: list[RsaSession] = []
        for _ in range(4):  # four host runs: connect, 2,500 sessions, close
            with RawGuardian(sock) as raw:
                if kept:  # the previous run's cached sessions died with its connection
                    deadline = time.monotonic() + 10
                    while not _gone(raw, kept[0]) and time.monotonic() < deadline:
                        time.sleep(0.05)
                    assert _gone(raw, kept[0]) and _gone(raw, kept[-1])
                kept = _host_run(raw, public, 2500)
                assert len(kept) == 1250
            rss.append(proc_status(guardian.pid, "VmRSS"))
    print("RSS KiB after each run:", rss)
    growth_kib = rss[-1] - rss[0]
    assert growth_kib < 10 * 1024, f"RSS after each run (KiB): {rss}"


@pytest.fixture()
def served(tmp_path: Path) -> Iterator[tuple[GuardianService, Path]]:
    creds = credentials()
    service = GuardianService(creds.private_key, tuple(creds.chain_der), b"m" * 32)
    server = GuardianServer(service, tmp_path / "g.sock").start()
    yield service, tmp_path / "g.sock"
    server.close()


def test_closing_a_host_connection_frees_its_handles_and_no_others(
        served: tuple[GuardianService, Path]) -> None:
    service, sock = served
    public = credentials().private_key.public_key()
    other = RawGuardian(sock)
    theirs = _host_run(other, public, 4, batch=4)  # two cached sessions on another connection
    with RawGuardian(sock) as raw:
        mine = _host_run(raw, public, 8, batch=8)
        ephemeral = raw.request(p.Ephemeral(0x001D, 0x0401, b"c" * 32, b"s" * 32, 0xC013))
        assert isinstance(ephemeral, p.EphemeralReply)
        assert service.holds() == len(theirs) + len(mine) + 1
    deadline = time.monotonic() + 10
    while service.holds() > len(theirs) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert service.holds() == len(theirs)  # every handle of the closed connection is freed
    assert len(service._delegate._secrets) == len(theirs)
    assert not service._delegate._ephemerals
    assert all(_gone(other, s) for s in mine)
    for session in theirs:  # the other connection's sessions still resume
        reply = other.request(p.Resume(session.handle_id, session.suite, b"c" * 32, b"s" * 32))
        assert isinstance(reply, p.HandleReply)
    other.close()


def _session_bytes(service: GuardianService, sessions: int, close: bool) -> float:
    """Python heap bytes the guardian keeps per cached session (tracemalloc)."""
    public = credentials().private_key.public_key()

    def one() -> None:
        session = RsaSession(public)
        handle = service.handle(session.derive())
        assert isinstance(handle, p.HandleReply)
        assert service.handle(session.finish(handle.handle_id)).ok  # type: ignore[attr-defined]
        service.handle(session.open_request(GET))
        records = [(23, 0x0303, 1, RESPONSE)] + ([(ALERT, 0x0303, 2, CLOSE_NOTIFY)] if close
                                                 else [])
        service.handle(p.Seal(handle.handle_id, session.suite, False, tuple(records)))
        if close:
            service.handle(session.open_request(CLOSE_NOTIFY, ALERT))

    for _ in range(20):
        one()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(sessions):
            one()
        gc.collect()
        return (tracemalloc.get_traced_memory()[0] - before) / sessions
    finally:
        tracemalloc.stop()


def test_a_session_whose_connection_ended_keeps_only_what_resuming_needs() -> None:
    creds = credentials()
    service = GuardianService(creds.private_key, tuple(creds.chain_der), b"m" * 32)
    live = _session_bytes(service, 200, close=False)
    ended = _session_bytes(service, 200, close=True)
    print("bytes per session, live and ended:", live, ended)
    assert ended < 4096, (live, ended)  # the documented bound
    assert live > 4 * ended  # the record ciphers were the bulk


def test_an_ended_session_still_resumes_and_its_ended_sides_refuse_records() -> None:
    creds = credentials()
    service = GuardianService(creds.private_key, tuple(creds.chain_der), b"m" * 32)
    session = RsaSession(creds.private_key.public_key())
    handle = service.handle(session.derive())
    assert isinstance(handle, p.HandleReply)
    service.handle(session.finish(handle.handle_id))
    service.handle(p.Seal(handle.handle_id, session.suite, False,
                          ((ALERT, 0x0303, 1, CLOSE_NOTIFY),)))
    later = p.Seal(handle.handle_id, session.suite, False, ((23, 0x0303, 2, b"late"),))
    with pytest.raises(Exception, match="server's side of this channel is closed"):
        service.handle(later)
    assert service.handle(session.open_request(b"still read")).plaintexts == (b"still read",)  # type: ignore[attr-defined]
    service.handle(session.open_request(b"\x02\x28", ALERT))  # a fatal alert from the client
    with pytest.raises(Exception, match="client's side of this channel is closed"):
        service.handle(session.open_request(b"more"))
    resumed = service.handle(p.Resume(handle.handle_id, session.suite, b"C" * 32, b"S" * 32))
    assert isinstance(resumed, p.HandleReply) and resumed.handle_id != handle.handle_id
