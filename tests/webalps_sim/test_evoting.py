"""The e-voting guardian application: authentication, one vote per voter, sealed tally."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlencode

import pytest

from webalps_sim.evoting import (
    ElectionConfigError,
    EvotingApp,
    hash_password,
    main,
    verify_password,
    write_election,
)
from webalps_sim.sealed import RollbackError

FORM = [(b"Content-Type", b"application/x-www-form-urlencoded")]
VOTERS = {"ann": "pw-ann", "bob": "pw-bob", "cy": "pw-cy"}


@pytest.fixture
def state(tmp_path: Path) -> Path:
    write_election(tmp_path, ["red", "blue"], VOTERS, {"officer": "pw-off"}, n=2**10)
    return tmp_path


def post(app: EvotingApp, path: str, **fields: str) -> tuple[int, bytes]:
    reply = app.handle("POST", path, FORM, urlencode(fields).encode())
    assert reply is not None
    return reply[0], reply[2]


def vote(app: EvotingApp, name: str, choice: str, password: str | None = None) -> int:
    return post(app, "/vote", name=name, password=password or VOTERS[name], choice=choice)[0]


def results(app: EvotingApp) -> tuple[int, bytes]:
    reply = app.handle("GET", "/results", [], b"")
    assert reply is not None
    return reply[0], reply[2]


def test_password_hashes_are_salted_and_verified() -> None:
    a, b = hash_password("secret", n=2**10), hash_password("secret", n=2**10)
    assert a["hash"] != b["hash"]  # different salts
    assert verify_password(a, "secret")
    assert not verify_password(a, "Secret")


def test_votes_are_counted_once_and_published_after_close(state: Path) -> None:
    app = EvotingApp(state)
    assert vote(app, "ann", "red") == 200
    assert vote(app, "bob", "blue") == 200
    assert vote(app, "cy", "red") == 200
    assert results(app)[0] == 403  # still open: no running tally for the host to diff
    assert post(app, "/close", name="officer", password="pw-off")[0] == 200
    status, body = results(app)
    assert status == 200
    assert json.loads(body) == {"counts": {"red": 2, "blue": 1}, "voters": 3}
    assert vote(app, "ann", "blue") == 403  # closed


def test_a_replayed_vote_request_counts_once(state: Path) -> None:
    app = EvotingApp(state)
    body = urlencode({"name": "ann", "password": "pw-ann", "choice": "red"}).encode()
    replies = [app.handle("POST", "/vote", FORM, body) for _ in range(3)]
    assert [r[0] for r in replies if r] == [200, 409, 409]
    assert app.tally.counts == {"red": 1, "blue": 0}
    assert vote(app, "ann", "blue") == 409  # a second, different vote is refused too
    assert app.tally.counts == {"red": 1, "blue": 0}


@pytest.mark.parametrize(("name", "password", "choice", "status"), [
    ("ann", "wrong", "red", 401),
    ("mallory", "pw-ann", "red", 401),
    ("officer", "pw-off", "red", 401),  # officers do not vote
    ("ann", "pw-ann", "green", 400),
    ("ann", "pw-ann", "", 400),
])
def test_invalid_votes_are_refused_and_not_counted(state: Path, name: str, password: str,
                                                   choice: str, status: int) -> None:
    app = EvotingApp(state)
    assert vote(app, name, choice, password) == status
    assert app.tally.counts == {"red": 0, "blue": 0}
    assert app.tally.voted == set()
    assert vote(app, "ann", "red") == 200  # a refused attempt does not use up the vote


def test_only_an_officer_closes(state: Path) -> None:
    app = EvotingApp(state)
    assert post(app, "/close", name="ann", password="pw-ann")[0] == 401
    assert post(app, "/close", name="officer", password="nope")[0] == 401
    assert results(app)[0] == 403


@pytest.mark.parametrize(("headers", "body", "status"), [
    ([], b"name=ann", 415),
    ([(b"content-type", b"text/plain")], b"name=ann", 415),
    (FORM, b"x" * 5000, 413),
    (FORM, b"name=ann&name=bob&password=pw-ann&choice=red", 400),
    (FORM, b"\xff\xfe", 400),
    (FORM, b"a&&&=", 400),
])
def test_malformed_forms_get_clear_errors(state: Path, headers: list[tuple[bytes, bytes]],
                                          body: bytes, status: int) -> None:
    app = EvotingApp(state)
    reply = app.handle("POST", "/vote", headers, body)
    assert reply is not None and reply[0] == status
    assert app.tally.voted == set()


def test_routes_methods_and_passthrough(state: Path) -> None:
    app = EvotingApp(state)
    assert app.handle("GET", "/index.html", [], b"") is None  # the host serves it
    assert app.handle("GET", "/voters", [], b"") is None
    reply = app.handle("DELETE", "/vote", [], b"")
    assert reply is not None and reply[0] == 405 and (b"allow", b"GET, POST") in reply[1]
    ballot = app.handle("GET", "/vote?lang=en", [], b"")
    assert ballot is not None and ballot[0] == 200
    assert b'value="red"' in ballot[2] and b'value="blue"' in ballot[2]


def test_tally_survives_restart_and_rollback_is_detected(state: Path) -> None:
    app = EvotingApp(state)
    assert vote(app, "ann", "red") == 200
    after_one = (state / "evoting.sealed").read_bytes()
    assert vote(app, "bob", "blue") == 200
    restarted = EvotingApp(state)
    assert restarted.tally.counts == {"red": 1, "blue": 1}
    assert vote(restarted, "bob", "red") == 409  # the voted set survived too
    # The host replays the sealed file from before bob's vote, hoping to let bob vote again.
    (state / "evoting.sealed").write_bytes(after_one)
    with pytest.raises(RollbackError):
        EvotingApp(state)


def test_the_sealed_state_keeps_no_voter_to_choice_link_and_no_plaintext(state: Path) -> None:
    app = EvotingApp(state)
    vote(app, "ann", "red")
    blob = (state / "evoting.sealed").read_bytes()
    assert b"ann" not in blob and b"red" not in blob
    plain = json.loads(app.store.unseal(blob)[1])
    assert set(plain) == {"counts", "voted", "closed"}
    assert plain["voted"] == ["ann"] and plain["counts"] == {"red": 1, "blue": 0}


KILL_AFTER_ACK = """
import os, signal, sys
from urllib.parse import urlencode
from webalps_sim.evoting import EvotingApp
app = EvotingApp(sys.argv[1])
body = urlencode({"name": "cy", "password": "pw-cy", "choice": "blue"}).encode()
status = app.handle("POST", "/vote", [(b"content-type", b"application/x-www-form-urlencoded")],
                    body)[0]
print(status, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_guardian_killed_right_after_acking_loses_nothing(state: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", KILL_AFTER_ACK, str(state)],
                          capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == -9, proc.stderr
    assert proc.stdout.strip() == "200"
    restarted = EvotingApp(state)
    assert restarted.tally.counts == {"red": 0, "blue": 1}
    assert "cy" in restarted.tally.voted


def test_missing_or_malformed_election(tmp_path: Path) -> None:
    with pytest.raises(ElectionConfigError, match="election.json missing"):
        EvotingApp(tmp_path)
    (tmp_path / "election.json").write_text("{}")
    (tmp_path / "voters.json").write_text("{}")
    with pytest.raises(ElectionConfigError, match="malformed"):
        EvotingApp(tmp_path)
    with pytest.raises(ValueError):
        write_election(tmp_path, ["a", "a"], {}, {})
    with pytest.raises(ValueError, match="officers cannot also be voters"):
        write_election(tmp_path, ["a"], {"x": "1"}, {"x": "2"})


def test_setup_command_line(tmp_path: Path) -> None:
    voters = tmp_path / "voters.txt"
    voters.write_text("ann:pw-ann\nboss:pw-boss\n\n")
    assert main(["setup", "--state-dir", str(tmp_path / "g"), "--candidates", "x,y",
                 "--voters", str(voters), "--officer", "boss"]) == 0
    config = json.loads((tmp_path / "g" / "election.json").read_text())
    assert config == {"candidates": ["x", "y"], "officers": ["boss"]}
    directory = json.loads((tmp_path / "g" / "voters.json").read_text())
    assert set(directory) == {"ann", "boss"} and "pw-ann" not in json.dumps(directory)
    with pytest.raises(SystemExit):
        main(["setup", "--state-dir", str(tmp_path / "h"), "--candidates", "x",
              "--voters", str(voters), "--officer", "nobody"])


def _https_post(port: int, cafile: Path, path: str, fields: dict[str, str]) -> tuple[int, bytes]:
    """POST a form over TLS (Python ssl, verifying the guardian chain) on a fresh connection."""
    import socket
    import ssl

    ctx = ssl.create_default_context(cafile=str(cafile))
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers("AES128-SHA")
    body = urlencode(fields).encode()
    request = (f"POST {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
               "Content-Type: application/x-www-form-urlencoded\r\n"
               f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    with socket.create_connection(("127.0.0.1", port), timeout=30) as raw, \
            ctx.wrap_socket(raw, server_hostname="localhost") as tls:
        tls.sendall(request)
        data = b""
        while True:
            try:
                chunk = tls.recv(65536)
            except ssl.SSLEOFError:
                break
            if not chunk:
                break
            data += chunk
    head, _, payload = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), payload


def test_votes_through_the_webalps_host_count_exactly_once(tmp_path: Path) -> None:
    """End to end: guardian --app evoting + host, an unmodified TLS client votes."""
    import os
    import signal
    import time

    from webalps_sim.aio.testbed import _env, _free_port, _port_open

    state, ca, docroot = tmp_path / "guardian", tmp_path / "ca", tmp_path / "docroot"
    docroot.mkdir()
    write_election(state, ["red", "blue"], VOTERS, {"officer": "pw-off"}, n=2**10)
    py = [sys.executable, "-m"]
    for step in (["webalps_sim.ca", "init", "--dir", str(ca)],
                 ["webalps_sim.guardian", "--state-dir", str(state), "--app", "evoting", "--init"],
                 ["webalps_sim.ca", "sign", "--dir", str(ca), "--csr",
                  str(state / "guardian.csr"), "--app", "evoting", "--out",
                  str(state / "guardian-chain.pem")]):
        done = subprocess.run(py + step, env=_env(), capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    sock, port = tmp_path / "g.sock", _free_port()
    procs = [subprocess.Popen(py + ["webalps_sim.guardian", "--state-dir", str(state), "--listen",
                                    str(sock), "--app", "evoting"], env=_env(),
                              start_new_session=True, stderr=subprocess.PIPE)]
    try:
        deadline = time.monotonic() + 60
        while not sock.exists():
            assert procs[0].poll() is None and time.monotonic() < deadline, procs[0].stderr
            time.sleep(0.05)
        procs.append(subprocess.Popen(
            py + ["webalps_sim.host", "--mode", "webalps", "--port", str(port), "--docroot",
                  str(docroot), "--guardian", str(sock), "--quiet"],
            env=_env(), start_new_session=True, stderr=subprocess.PIPE))
        while not _port_open(port):
            assert procs[1].poll() is None and time.monotonic() < deadline, procs[1].stderr
            time.sleep(0.05)
        cafile = ca / "ca.pem"
        ann = {"name": "ann", "password": "pw-ann", "choice": "red"}
        assert _https_post(port, cafile, "/vote", ann)[0] == 200
        assert _https_post(port, cafile, "/vote", ann)[0] == 409  # the same vote again
        assert _https_post(port, cafile, "/vote", {**ann, "password": "x"})[0] == 401
        assert _https_post(port, cafile, "/vote",
                           {"name": "bob", "password": "pw-bob", "choice": "blue"})[0] == 200
        assert _https_post(port, cafile, "/close",
                           {"name": "officer", "password": "pw-off"})[0] == 200
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(10)
    restarted = EvotingApp(state)  # the tally the guardian sealed, read back after it stopped
    assert restarted.tally.counts == {"red": 1, "blue": 1}
    assert restarted.tally.closed
    status, body = results(restarted)
    assert status == 200 and json.loads(body)["counts"] == {"red": 1, "blue": 1}
