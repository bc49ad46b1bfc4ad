"""The origin's feedback loop (paper §7.4): bad volunteers are found and removed from DNS.

First the sans-IO :class:`FeedbackMonitor` on its own (no-shows, retries, impostors).  Then
real components on loopback: an origin with a ``trusted.`` HTTPS port and a splitting port, a
broker with its DNS responder, and four volunteers -- one honest, one black hole (accepts
clients, never answers), one flipping a bit of every payload record, one serving another
site's records.  The client is curl plus dnspython, behaving like a browser that retries: ask
``trusted.``, follow the 302 to the volunteer's ``mirror.`` name through the broker's DNS,
and on a failure start again from ``trusted.``.  Every file arrives byte-exact, curl fails
closed on the tampered ones, and every bad volunteer leaves DNS within a measured time.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import socket
import time
import urllib.parse
from pathlib import Path

import dns.asyncresolver
import dns.resolver
import pytest

from sslsplit.aio import PayloadClient
from sslsplit.barnraising.aio.broker import Broker
from sslsplit.barnraising.aio.origin import OriginFeedback
from sslsplit.barnraising.client import BrokerClient
from sslsplit.barnraising.feedback import (
    FeedbackMonitor,
    label_host,
    redirect_location,
    redirect_tokens,
    volunteer_label,
)
from sslsplit.barnraising.registry import Registry, SiteConfig
from sslsplit.cache import CacheHierarchy, MemoryCache
from sslsplit.proxy import SplittingProxy
from sslsplit.server import SplittingServer
from sslsplit.splicer import Splicer
from sslsplit.volunteer import Volunteer
from sslsplit.wire import Stub
from tls12.certs import generate_self_signed, write_credentials

from .helpers import site_credentials

SITE = "news/front"
TOKEN = "origin-secret"
DEADLINE = 1.0

# --- sans-IO -----------------------------------------------------------------------------


def _monitor(**kw: float) -> FeedbackMonitor:
    counter = iter(range(1, 1 << 30))
    return FeedbackMonitor(new_token=lambda: f"t{next(counter)}", **kw)  # type: ignore[arg-type]


def test_labels_round_trip() -> None:
    for host in ("127.0.0.2", "10.1.2.3", "::1", "2001:db8::7"):
        assert label_host(volunteer_label(host)) == host
    assert volunteer_label("127.0.0.2") == "v127-0-0-2"
    for bad in ("www", "v", "v1-2-3", "v6-zz", "x127-0-0-1", "v999-0-0-1"):
        assert label_host(bad) is None


def test_no_show_after_deadline_and_arrival_only_from_the_chosen_volunteer() -> None:
    m = _monitor(deadline=2.0)
    good = m.redirect("c1", "/a", "127.0.0.2", 10.0)
    bad = m.redirect("c2", "/b", "127.0.0.3", 10.5)
    assert m.get_timer() == 12.0
    assert m.arrived(good, "127.0.0.2", 11.0)
    assert not m.arrived(bad, "127.0.0.2", 11.0)  # an impostor cannot vouch for .3
    m.handle_timer(12.0)
    assert m.verdicts() == []
    m.handle_timer(12.5)
    [v] = m.verdicts()
    assert (v.volunteer, v.reason, v.redirected_at, v.detected_at) == ("127.0.0.3", "no-show",
                                                                       10.5, 12.5)
    assert m.get_timer() is None
    assert m.choose([("127.0.0.3", 443)]) is None  # a judged volunteer is not chosen again


def test_retry_blames_the_last_volunteer_once() -> None:
    m = _monitor(deadline=5.0, retry_window=10.0)
    t = m.redirect("c1", "/a", "127.0.0.4", 0.0)
    assert m.arrived(t, "127.0.0.4", 0.1)  # it forwarded ... but the client came back
    m.requested("c1", "/a", 3.0)
    [v] = m.verdicts()
    assert (v.volunteer, v.reason) == ("127.0.0.4", "retry")
    m.requested("c1", "/b", 4.0)  # another target is no evidence
    assert m.arrived(m.redirect("c1", "/b", "127.0.0.2", 4.0), "127.0.0.2", 4.2)
    m.requested("c1", "/b", 20.0)  # nor is a request long after the window
    m.handle_timer(100.0)
    assert m.verdicts() == [] and m.redirects == 2


def test_strikes_need_distinct_clients() -> None:
    m = _monitor(deadline=1.0, strikes=2)
    m.redirect("c1", "/a", "127.0.0.3", 0.0)
    m.redirect("c1", "/b", "127.0.0.3", 0.0)
    m.handle_timer(2.0)
    assert m.verdicts() == []  # one client, twice: not enough
    m.redirect("c2", "/a", "127.0.0.3", 3.0)
    m.handle_timer(5.0)
    assert [v.volunteer for v in m.verdicts()] == ["127.0.0.3"]


# --- misbehaving volunteers ---------------------------------------------------------------


class BlackHoleProxy(SplittingProxy):
    """Accepts clients and never answers (never contacts the origin either)."""

    async def _handle(self, reader, writer) -> None:  # type: ignore[no-untyped-def]
        self.stats.connections += 1
        try:
            while await reader.read(65536):
                pass
        finally:
            writer.close()


class FlippingProxy(SplittingProxy):
    """Forwards faithfully but flips one bit of every payload record."""

    def record_for(self, splicer: Splicer, stub: Stub, payload: bytes) -> bytes:
        record = bytearray(super().record_for(splicer, stub, payload))
        record[len(record) // 2] ^= 0x01
        return bytes(record)


class ForeignProxy(SplittingProxy):
    """Serves records of another site (valid payloads, each with its own correct id)."""

    foreign: list[bytes] = []

    async def payload_for(self, stub: Stub) -> bytes:
        await super().payload_for(stub)
        return self.foreign[len(stub.ident) % len(self.foreign)]


class RecordingProxy(SplittingProxy):
    """An honest proxy that keeps the payloads it served (to get another site's records)."""

    def __init__(self, *args, **kw) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kw)
        self.served: list[bytes] = []

    async def payload_for(self, stub: Stub) -> bytes:
        payload = await super().payload_for(stub)
        self.served.append(payload)
        return payload


def test_route_redirects_round_robin_and_arrivals_by_target() -> None:
    """What the origin's handler asks the monitor, with time passed in: a trusted request is
    routed (or served locally when nobody is left), a mirror request's token is checked."""
    tokens = iter(f"t{i}" for i in range(100))
    m = FeedbackMonitor(deadline=2.0, new_token=lambda: next(tokens))
    vols = [("127.0.0.2", 4433), ("127.0.0.3", 4433)]
    first = m.route("10.0.0.1", "/a", vols, now=0.0)
    assert first is not None
    (vol, token) = first
    location = redirect_location(vol, "mirror.news.test", "/a?x=1", token)
    assert location == f"https://{volunteer_label(vol[0])}.mirror.news.test:4433/a?x=1&br={token}"
    assert redirect_tokens(location.split(":4433", 1)[1]) == [token]
    m.arrived_target(f"/a?br={token}", via=vol[0], now=1.0)  # in time, from the right address
    second = m.route("10.0.0.2", "/b", vols, now=1.0)
    assert second is not None and second[0] != vol  # round robin
    m.arrived_target(f"/b?br={second[1]}", via=vol[0], now=1.5)  # another volunteer's token
    m.handle_timer(10.0)
    [verdict] = m.verdicts()
    assert (verdict.volunteer, verdict.reason) == (second[0][0], "no-show")
    assert m.route("10.0.0.3", "/c", [second[0]], now=11.0) is None  # judged: serve locally
    assert redirect_tokens("/plain") == []


# --- on sockets ---------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _curl(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        "curl", "--silent", "--show-error", "--tlsv1.2", "--tls-max", "1.2",
        "--ciphers", "AES128-SHA256", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def _other_sites_records(tmp: Path) -> list[bytes]:
    """Payload records of a second site, through an honest proxy of that site."""
    (tmp / "other").mkdir()
    (tmp / "other" / "o.bin").write_bytes(random.Random(7).randbytes(60_000))
    creds = generate_self_signed("www.sport.test")
    write_credentials(creds, tmp / "other.pem", tmp / "other.key")
    origin = SplittingServer(tmp / "other", creds)
    await origin.start("127.0.0.1", 0, 0)
    proxy = RecordingProxy(("127.0.0.1", origin.port), CacheHierarchy(
        [MemoryCache()], [PayloadClient("127.0.0.1", origin.store_port)]))
    await proxy.start("127.0.0.1", 0)
    try:
        code, _, err = await _curl("--cacert", str(tmp / "other.pem"), "--resolve",
                                   f"www.sport.test:{proxy.port}:127.0.0.1",
                                   f"https://www.sport.test:{proxy.port}/o.bin", "-o", "/dev/null")
        assert code == 0, err
    finally:
        await proxy.close()
        await origin.close()
    assert proxy.served
    return proxy.served


async def _scenario(tmp: Path) -> None:
    ForeignProxy.foreign = await _other_sites_records(tmp)
    rng = random.Random(17)
    files = {f"/f{i}.bin": rng.randbytes(100_000) for i in range(8)}
    (tmp / "www").mkdir()
    for name, body in files.items():
        (tmp / "www" / name[1:]).write_bytes(body)
    creds = site_credentials("www.news.test", "trusted.news.test", "*.mirror.news.test")
    cert = tmp / "site.pem"
    write_credentials(creds, cert, tmp / "site.key")

    broker_port = _free_port()
    uri = f"barnraising://127.0.0.1:{broker_port}/{SITE}"
    feedback = OriginFeedback(BrokerClient(uri), TOKEN, mirror="mirror.news.test",
                              monitor=FeedbackMonitor(DEADLINE, retry_window=30.0), refresh=0.5)
    origin = SplittingServer(tmp / "www", creds, feedback=feedback)
    await origin.start("127.0.0.1", 0, 0)
    config = SiteConfig(SITE, ("127.0.0.1", origin.port), ("127.0.0.1", origin.store_port),
                        ("www.news.test", "mirror.news.test"), {"memory_mb": 16}, TOKEN)
    broker = Broker(Registry([config], ":memory:", lease_seconds=30))
    await broker.start("127.0.0.1", broker_port, dns_port=0)
    assert broker.dns is not None
    resolver = dns.asyncresolver.Resolver(configure=False)
    resolver.nameservers, resolver.port = ["127.0.0.1"], broker.dns.port
    resolver.lifetime = 2.0

    kinds = {"127.0.0.2": SplittingProxy, "127.0.0.3": BlackHoleProxy,
             "127.0.0.4": FlippingProxy, "127.0.0.5": ForeignProxy}
    volunteers = [Volunteer(uri, host=h, proxy_factory=f) for h, f in kinds.items()]
    failures: dict[str, list[str]] = {}
    try:
        for v in volunteers:
            await v.start()
        await feedback.start()
        trusted = await feedback.start_trusted(tmp / "www", origin.config, "127.0.0.1", 0)
        assert len(feedback.volunteers) == 4

        async def fetch(target: str) -> bytes:
            """A browser that retries: trusted name -> 302 -> DNS -> volunteer."""
            for _ in range(6):
                code, location, err = await _curl(
                    "--cacert", str(cert), "--resolve", f"trusted.news.test:{trusted}:127.0.0.1",
                    f"https://trusted.news.test:{trusted}{target}", "-o", "/dev/null",
                    "-w", "%{redirect_url}")
                assert code == 0 and location, err
                url = urllib.parse.urlsplit(location)
                assert url.hostname is not None and url.hostname.endswith(".mirror.news.test")
                try:
                    answer = await resolver.resolve(url.hostname, "A")
                except dns.resolver.NXDOMAIN:
                    failures.setdefault(url.hostname, []).append("NXDOMAIN")
                    continue
                [address] = [rd.to_text() for rd in answer]
                out = tmp / "out.bin"
                out.unlink(missing_ok=True)
                code, _, err = await _curl(
                    "--cacert", str(cert), "--max-time", str(DEADLINE + 2),
                    "--resolve", f"{url.hostname}:{url.port}:{address}", location, "-o", str(out))
                if code == 0:
                    return out.read_bytes()
                failures.setdefault(address, []).append(err.strip())
            raise AssertionError(f"no good copy of {target}: {failures}")

        for target, body in files.items():
            assert await fetch(target) == body  # every client ends with the right bytes
            if len(feedback.removals) == 3:
                break
        await asyncio.sleep(0.2)

        removed = {r.verdict.volunteer: r for r in feedback.removals}
        assert set(removed) == {"127.0.0.3", "127.0.0.4", "127.0.0.5"}, (feedback.removals,
                                                                          failures)
        assert all(r.removed == 1 for r in removed.values())
        hole = removed["127.0.0.3"]
        assert hole.verdict.reason == "no-show"
        assert DEADLINE <= hole.seconds <= DEADLINE + 2.0  # deadline + one broker round trip
        for tamperer in ("127.0.0.4", "127.0.0.5"):  # curl failed closed on their bytes ...
            assert any("SSL" in e or "ssl" in e or "alert" in e for e in failures[tamperer])
            assert removed[tamperer].verdict.reason in ("retry", "alert")  # ... and came back
            assert removed[tamperer].seconds <= DEADLINE + 5.0
        # the broker's DNS names only the honest volunteer now
        answer = await resolver.resolve("www.news.test", "A")
        assert [rd.to_text() for rd in answer] == ["127.0.0.2"]
        for bad in ("127.0.0.3", "127.0.0.4", "127.0.0.5"):
            with pytest.raises(dns.resolver.NXDOMAIN):
                await resolver.resolve(f"{volunteer_label(bad)}.mirror.news.test", "A")
        print("removal seconds:", {h: round(r.seconds, 3) for h, r in removed.items()},
              {h: r.verdict.reason for h, r in removed.items()})
    finally:
        for v in volunteers:
            await v.stop()
        await feedback.close()
        await broker.close()
        await origin.close()


@pytest.mark.interop
def test_black_hole_flipper_and_foreign_volunteers_are_removed(tmp_path: Path) -> None:
    assert shutil.which("curl"), "curl not found (apt-get install curl)"
    started = time.monotonic()
    asyncio.run(_scenario(tmp_path))
    assert time.monotonic() - started < 60
