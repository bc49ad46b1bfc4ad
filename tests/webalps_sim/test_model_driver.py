"""The SimPy model that runs real connections through the WebALPS delegate seam.

What is shown here: every question the host's connections ask goes through the seam, and as
many of each kind per request as the real host's asyncio channel counts for the same client;
the card limits WebALPS throughput (and an RSA-bound card's cost sets it); bodies arrive
byte-exact; and, as a negative control, a card that costs nothing leaves WebALPS as fast as
HTTPS in the model.
"""

from __future__ import annotations

import os
import socket
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from tests.webalps_sim.guardian_helpers import GuardianProcess, provision, webalps_host
from tls12 import ClientConfig, ClientConnection
from tls12.events import ApplicationData, ConnectionClosed, HandshakeComplete
from tls12.suites import CipherSuite
from webalps_sim import model_driver as md
from webalps_sim.aio import host as aio_host
from webalps_sim.costmodel import DEFAULT_PROFILE, Card4758

SUITE = CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA
ECDHE = CipherSuite.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA
FETCHES = 3


def _fetch_real(port: int, path: str, suite: CipherSuite) -> bytes:
    """One HTTP/1.0 GET with the model's client object (``tls12.ClientConnection``) over a
    real socket, the client answering the server's close_notify as it does in the model."""
    conn = ClientConnection(ClientConfig(cipher_suites=(suite,)))
    response = bytearray()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(conn.data_to_send())
        closed = False
        while not closed:
            data = sock.recv(65536)
            for event in conn.receive_data(data):
                if isinstance(event, HandshakeComplete):
                    conn.send_data(md.Fetch(path).request)
                elif isinstance(event, ApplicationData):
                    response += event.data
                elif isinstance(event, ConnectionClosed):
                    closed = True
            out = conn.data_to_send()
            if out:
                sock.sendall(out)
            closed = closed or not data
        sock.shutdown(socket.SHUT_WR)
        while sock.recv(65536):  # the host reads our close_notify before it closes its side
            pass
    return bytes(response).partition(b"\r\n\r\n")[2]


@pytest.mark.parametrize("suite", [SUITE, ECDHE])
def test_questions_per_request_match_the_real_hosts_channel(tmp_path: Path,
                                                            suite: CipherSuite) -> None:
    prov = provision(tmp_path)
    docroot = tmp_path / "www"
    docroot.mkdir()
    body = os.urandom(md.FILE_SIZE)
    (docroot / "file").write_bytes(body)
    sock = tmp_path / "guardian.sock"
    with GuardianProcess(prov.state_dir, sock):
        server, channel = webalps_host(docroot, sock)
        with server:
            bodies = [_fetch_real(server.port, "/file", suite) for _ in range(FETCHES)]
            deadline = time.monotonic() + 10  # the host releases a handle once it closed
            while channel.requests["release"] < FETCHES and time.monotonic() < deadline:
                time.sleep(0.01)
            real = Counter(channel.requests)
            real_trips = channel.round_trips
        channel.close()
    assert bodies == [body] * FETCHES
    run = md.simulate(clients=1, kind="webalps", seconds=1.0, warmup=0.0, suite=suite)
    modelled = run.questions_per_request()
    measured = {op: n / FETCHES for op, n in sorted(real.items()) if n}
    assert modelled == measured, (modelled, measured)
    assert run.round_trips_per_request() == (real_trips - 1) / FETCHES  # less the channel's HELLO
    # one connection per request: the client's flight in one DERIVE_FINISH (the server's
    # Finished comes back sealed with it: its seal question needs no round trip), the request
    # opened, the response and close_notify sealed, the handle released once closed; the
    # client's close_notify is never opened (the host has closed the connection by then)
    # (ECDHE_RSA: one EPHEMERAL before, the guardian making and signing the key)
    ecdhe = {"ephemeral": 1} if suite == ECDHE else {}
    assert modelled == {"derive_finish": 1, "open": 1, "release": 1, "seal": 2, **ecdhe}
    assert run.round_trips_per_request() == 3 + len(ecdhe)


def test_the_model_builds_what_the_host_builds() -> None:
    """One definition (webalps_sim.questions) for the host and the model."""
    assert md.OPERATIONS is aio_host.OPERATIONS
    assert md.WEBALPS_SUITES is aio_host.WEBALPS_SUITES


@pytest.mark.parametrize("kind", md.KINDS)
def test_bodies_are_byte_exact_and_nothing_fails(kind: str) -> None:
    run = md.simulate(clients=4, kind=kind, seconds=0.5, warmup=0.1)
    assert run.errors == 0 and run.bad_bodies == 0
    assert (run.secure if kind != "http" else run.http) > 0
    assert (run.secure_all == 0) == (kind == "http") and run.rps > 0


def test_every_secure_request_asks_the_card() -> None:
    run = md.simulate(clients=2, kind="webalps", seconds=1.0, warmup=0.0)
    assert run.secure_all > 0
    assert run.guardian_calls["rsa"] >= run.secure_all  # one premaster per connection
    assert run.card_seconds_per_request() > 0.05        # the 4758 model's tens of ms


def test_the_seams_questions_cost_what_the_calibration_profile_assumed() -> None:
    # the 4758's one tuned constant was fitted on DEFAULT_PROFILE (86.2 ms per request); the
    # questions the seam really asks must cost about that, or the calibration is stale
    run = md.simulate(clients=1, kind="webalps", seconds=1.0, warmup=0.0, suite=SUITE)
    profile = sum(md.CARD_4758.profile_seconds(DEFAULT_PROFILE).values())
    assert abs(run.card_seconds_per_request() / profile - 1) < 0.05


def test_the_card_limits_webalps_throughput() -> None:
    one = md.simulate(clients=1, kind="webalps", seconds=3.0)
    many = md.simulate(clients=16, kind="webalps", seconds=3.0)
    assert many.card_util > 0.95
    assert many.rps < 1.5 * one.rps  # sixteen clients, no more than one card's worth


def test_doubling_the_cards_rsa_cost_halves_a_handshake_bound_card() -> None:
    # a card whose time is almost all RSA: throughput is set by the handshakes
    slow = Card4758(rsa_s=50e-3, record_call_s=1e-5, finished_s=1e-5, transfer_latency_s=1e-5)
    host = md.HostCost(http_s=1e-4, https_s=1e-3, webalps_s=1e-3, cores=2)
    base = md.simulate(clients=16, kind="webalps", seconds=20.0, warmup=2.0, card=slow, host=host)
    double = md.simulate(clients=16, kind="webalps", seconds=20.0, warmup=2.0, host=host,
                         card=replace(slow, rsa_s=2 * slow.rsa_s))
    assert base.card_util > 0.95 and double.card_util > 0.95
    assert 1.8 < base.rps / double.rps < 2.2


def test_negative_control_a_free_card_makes_webalps_as_fast_as_https() -> None:
    https = md.simulate(clients=8, kind="https", seconds=2.0)
    free = md.simulate(clients=8, kind="webalps", seconds=2.0, card=None)
    card = md.simulate(clients=8, kind="webalps", seconds=2.0)
    assert free.card_util == 0 and free.errors == 0
    assert abs(free.rps / https.rps - 1) < 0.05
    assert card.rps < 0.5 * https.rps  # with the 4758 the card, not the host, is the limit


def test_sweep_has_the_figure_columns() -> None:
    df = md.sweep([1, 2], kinds=("http", "webalps"), seconds=0.3, warmup=0.1)
    assert list(df["host"]) == ["http", "webalps"] * 2
    assert {"clients", "host", "rps", "secure_rps", "card_util", "cpu_util"} <= set(df.columns)
    assert (df.loc[df["host"] == "webalps", "q_derive_finish"] == 1).all()
    assert (df["errors"] == 0).all()


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="kind"):
        md.simulate(clients=1, kind="ftp")
    with pytest.raises(ValueError, match="clients"):
        md.simulate(clients=0)


def test_figure4_variant_driver_has_the_columns_of_the_other_variants() -> None:
    from webalps_sim.experiments import figure4_variant

    df = figure4_variant("driver", loads=[2], seconds=0.5)
    assert set(df["host"]) == {"HTTPS", "WebALPS-4758"} and set(df["source"]) == {"driver"}
    assert {"clients", "host", "source", "rps", "secure_rps", "card_util", "cpu_util",
            "measured_rps", "error"} <= set(df.columns)
    assert (df["rps"] > 0).all() and (df["errors"] == 0).all()
