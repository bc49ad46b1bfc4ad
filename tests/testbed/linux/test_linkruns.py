"""Programs on the link testbed (testbed.linux.linkruns) and the hop-by-hop relay for a proxy in middle.

The pure parts (curl timings, the Squid config, the relay's hop paths, the calibration
helpers) run anywhere; the rest needs root and iproute2 and fails with the reason otherwise
(CI runs as root). Tolerances: the hop round trips within 5 ms / 15 ms of the profile's (the
relay is a Python process on a shared machine).
"""

from __future__ import annotations

import socket
import sys
import tempfile
from pathlib import Path

import pytest

from sine.params import sine_profile
from testbed.linux.linkruns import (
    CURL_FIELDS,
    CurlTiming,
    ProgramFailed,
    SquidRun,
    alternate_halves,
    curl,
    grid_fit,
    log_error,
    squid_config,
    start_listening,
    start_squid,
    stop,
    stop_squid,
)
from testbed.linux.linktestbed import ADDRESSES, LinkTestbed, check_available
from testbed.linux.tundelay import HOPS, _ipv4_net, format_hops, hop_path, parse_hops


@pytest.fixture
def netns_available() -> None:
    """Fail (never skip) with the one-line reason when namespaces cannot be made here."""
    check_available()


needs_netns = pytest.mark.usefixtures("netns_available")


def _ip(addr: str) -> int:
    return _ipv4_net(f"{addr}/32")[0]


# --- pure parts -------------------------------------------------------------------------------


def test_curl_timing_parses_write_out() -> None:
    t = CurlTiming.parse("0.00001 0.1 0.3 0.3 0.5 0.9 1234 200")
    assert (t.time_connect, t.time_total, t.size_download, t.http_code) == (0.1, 0.9, 1234, 200)
    assert len(CURL_FIELDS) == 8
    with pytest.raises(ValueError, match="8 curl -w fields"):
        CurlTiming.parse("0.1 0.2")


def test_squid_config_listens_on_the_middle_for_the_client_net(tmp_path: Path) -> None:
    conf = squid_config(tmp_path, "10.77.1.1", 3128, "10.77.1.0/24", 32, "proxy")
    assert "http_port 10.77.1.1:3128" in conf and "acl clients src 10.77.1.0/24" in conf
    assert "cache_mem 32 MB" in conf and "cache_effective_user proxy" in conf
    assert "cache_effective_user" not in squid_config(tmp_path)


def test_hop_paths_of_forwarded_and_middle_packets() -> None:
    client = _ipv4_net("10.77.1.0/24")
    middle = frozenset({_ip("10.77.1.1"), _ip("10.77.2.1")})

    def path(src: str, dst: str) -> tuple[str, ...]:
        return hop_path(_ip(src), _ip(dst), client, middle)

    assert path("10.77.1.2", "10.77.2.2") == ("access_to_origin", "server_to_origin")
    assert path("10.77.2.2", "10.77.1.2") == ("server_to_client", "access_to_client")
    # the middle's own packets carry their hop's round trip (packets to it skip the relay)
    assert path("10.77.1.1", "10.77.1.2") == ("access_to_client", "access_to_origin/delay")
    assert path("10.77.2.1", "10.77.2.2") == ("server_to_origin", "server_to_client/delay")


def test_hops_argument_round_trips() -> None:
    hops = [(160e3, 0.01), (None, 0.0), (1.5e6, 0.01), (100e6, 0.0001)]
    assert parse_hops(format_hops(hops, 1.0)) == hops
    assert all(r is None for r, _ in parse_hops(format_hops(hops, None)))
    with pytest.raises(ValueError):
        parse_hops("1:2")
    assert len(HOPS) == 4


def test_alternate_halves_span_the_axis() -> None:
    assert alternate_halves(5) == ["calibration", "held-out", "calibration", "held-out",
                                   "calibration"]


def test_grid_fit_finds_the_minimum_and_log_error_is_symmetric() -> None:
    best, loss = grid_fit(lambda v: (v["a"] - 3) ** 2 + (v["b"] + 1) ** 2,
                          {"a": [1, 2, 3, 4], "b": [-2, -1, 0]})
    assert best == {"a": 3, "b": -1} and loss == 0
    assert log_error([2.0], [1.0]) == pytest.approx(log_error([1.0], [2.0]))
    assert log_error([1.0, 1.0], [1.0, 1.0]) == 0
    with pytest.raises(ValueError):
        grid_fit(lambda v: 0.0, {"a": []})


def test_start_squid_on_loopback_serves_and_a_busy_port_fails_with_its_log() -> None:
    """The one Squid starter, on this host (as the interop tests use it): it returns once
    Squid accepts, answers only the allowed network, and a port it cannot bind is a
    :class:`ProgramFailed` carrying Squid's own complaint, with no Squid left running."""
    with tempfile.TemporaryDirectory(prefix="wstb-squid-test-") as tmp, \
            socket.socket() as busy:
        Path(tmp).chmod(0o755)  # Squid started as root runs as 'proxy': it must reach its dir
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        with pytest.raises(ProgramFailed, match="squid") as failed:
            start_squid(Path(tmp, "busy"), "127.0.0.1", busy.getsockname()[1], "127.0.0.1/32",
                        startup_timeout=15)
        assert "HTTP Socket" in str(failed.value) or "bind" in str(failed.value).lower()
        busy.close()
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        proc = start_squid(Path(tmp, "ok"), "127.0.0.1", port, "127.0.0.1/32")
        try:
            conf = Path(tmp, "ok", "squid.conf").read_text()
            assert f"http_port 127.0.0.1:{port}" in conf
            with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
                c.sendall(b"GET http://127.0.0.1:9/ HTTP/1.0\r\n\r\n")
                head = c.recv(200)
            # Squid itself answers (it cannot reach port 9), so it accepted and parsed
            assert head.startswith(b"HTTP/1.1 ") and b" 200 " not in head[:16]
        finally:
            stop_squid(proc)
        assert proc.returncode is not None


# --- in namespaces ----------------------------------------------------------------------------


@needs_netns
def test_start_listening_reports_a_program_that_exits() -> None:
    with LinkTestbed(sine_profile(4e6)) as tb:
        with pytest.raises(ProgramFailed, match="status 3"):
            start_listening(tb, "origin", ["sh", "-c", "echo starting; echo bad >&2; exit 3"],
                            "listening", timeout=20)
        # two lines in one write: the ready line must not hide in a reader's buffer
        proc = start_listening(tb, "origin", ["sh", "-c", "printf 'one\\nlistening\\n'; sleep 30"],
                               "listening", timeout=20)
        stop(proc)
        assert proc.returncode is not None


@needs_netns
def test_squid_in_the_middle_sees_both_hops_round_trips() -> None:
    """Through Squid: the client's connect takes the access hop's round trip, Squid's miss the
    WAN's; a program in the middle pays the WAN's round trip to the origin."""
    profile = sine_profile(4e6)  # access 0.5 ms, WAN 50 ms each way
    with tempfile.TemporaryDirectory() as tmp, \
            LinkTestbed(profile, hop_by_hop=True) as tb, SquidRun(tb) as squid:
        Path(tmp).chmod(0o755)
        Path(tmp, "f").write_bytes(b"x" * 20_000)
        origin = ADDRESSES["origin"]
        server = start_listening(tb, "origin", [sys.executable, "-u", "-m", "http.server",
                                                "--bind", origin, "8000", "-d", tmp],
                                 "Serving HTTP")
        try:
            url = f"http://{origin}:8000/f"
            # the delays come from a relay in user space: a busy machine only adds to them, so
            # the least of three connects is the link's own round trip
            direct = min(curl(tb, url).time_connect for _ in range(3))
            # three misses (a new query string each: the origin ignores it, Squid does not)
            cold = [curl(tb, f"{url}?{n}", proxy=squid.proxy_url) for n in range(3)]
            from_middle = min(float(tb.run("middle", ["curl", "-s", "-o", "/dev/null", "-w",
                                                      "%{time_connect}", url], timeout=60).stdout)
                              for _ in range(3))
            codes = squid.access_codes()
        finally:
            stop(server)
    wan_rtt = 2 * profile.server_to_client.delay
    assert direct == pytest.approx(profile.rtt, abs=0.015)
    # client <-> Squid: the access hop (1 ms + the relay; the least of three, as above)
    assert min(c.time_connect for c in cold) < 0.02
    assert min(c.time_starttransfer for c in cold) > wan_rtt  # every miss crossed the WAN
    # Squid's own connection to the origin pays the WAN round trip (without hop_by_hop: ~0)
    assert from_middle == pytest.approx(wan_rtt, abs=0.015)
    assert codes == ["TCP_MISS"] * 3
