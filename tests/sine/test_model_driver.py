"""SINE on the driver (``sine.model_driver``): real bytes on simulated TCP, and the model beside it.

What these tests pin down:

* a simulated fetch puts on the wire exactly the bytes a real loopback fetch through
  ``sine.aio.server.OriginServer`` and ``sine.aio.client.SineClient`` exchanges (no cache);
* through the simulated cache, the bytes the cache host serves are the origin's bytes verbatim,
  and the verifier consumes exactly the body of those bytes (and releases the document);
* a tampered cache entry makes the simulated client fail closed, as the real one does;
* the old model (:mod:`sine.model_latency`, hand-typed byte counts) and the driver agree where the
  model's byte counts were right; the gaps that remain are explained where they are tested.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from netsim.cpu import ZERO_COSTS
from netsim.drive import run_pair
from netsim.link import LinkParams
from sine.aio.client import SineClient
from sine.aio.server import OriginServer
from sine.algorithms import SigningKey
from sine.errors import RemoteProtocolError
from sine.model_driver import (
    HOST,
    FetchFailed,
    HttpCache,
    HttpFetch,
    OriginEndpoint,
    SimRun,
    SimSite,
    driver_fetch_latency,
    driver_portal_latency,
)
from sine.model_latency import PROTOCOLS, Costs, Scenario, fetch_latency, portal_latency, sine_bytes
from sine.site import load_signed, signed_from_separate
from sine.tag import encode_stream
from sine.verifier import StreamVerifier
from tls12.certs import SIM_SERIAL

SIZE = 40_000
ZERO = Costs(0, 0, 0, 0)
FIXED = Costs(signature_verify=1e-4, hash_per_byte=1e-8, tls_handshake=2e-3, tls_per_byte=2e-9)


@pytest.fixture(scope="module")
def site(rsa_key: SigningKey) -> Any:
    with SimSite.for_figures([1_000, SIZE, 1_000_000], hosts=4, portal_size=15_000,
                             key=rsa_key) as s:
        yield s


class Tap:
    """Records what a sans-IO object receives and sends (a wiretap; passes everything on)."""

    def __init__(self, obj: Any) -> None:
        self.obj, self.received, self.sent = obj, bytearray(), bytearray()

    def receive_data(self, data: bytes) -> list[Any]:
        self.received += data
        return self.obj.receive_data(data)

    def data_to_send(self) -> bytes:
        out = self.obj.data_to_send()
        self.sent += out
        return out


def _loopback(site: SimSite, mode: str, path: str) -> tuple[bytes, bytes, bytes, str]:
    """A real fetch over 127.0.0.1 through a recording relay: (request bytes, response
    bytes, verified data, the Host the client sent)."""
    up, down = bytearray(), bytearray()

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                   log: bytearray) -> None:
        while data := await reader.read(65536):
            log += data
            writer.write(data)
            await writer.drain()
        writer.close()

    async def go() -> tuple[bytes, str]:
        # the asyncio listener around the same document root and the same fixed clock
        origin = OriginServer(site.root, clock=site.origin.clock)
        port, _ = await origin.start()

        async def relay(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            ur, uw = await asyncio.open_connection("127.0.0.1", port)
            await asyncio.gather(pipe(r, uw, up), pipe(ur, w, down))

        relay_server = await asyncio.start_server(relay, "127.0.0.1", 0)
        relay_port = relay_server.sockets[0].getsockname()[1]
        try:
            async with SineClient(f"http://127.0.0.1:{relay_port}", mode=mode,
                                  public_key=site.key.verifying_key(),
                                  clock=lambda: site.now) as client:
                result = await client.get(path)
            assert result.ok, result.error
            await asyncio.sleep(0.05)          # let the relay copy the last bytes
            return result.data, f"127.0.0.1:{relay_port}"
        finally:
            relay_server.close()
            await origin.close()

    data, host = asyncio.run(go())
    return bytes(up), bytes(down), data, host


@pytest.mark.parametrize("mode", ["sine", "http"])
def test_simulated_fetch_puts_the_loopback_bytes_on_the_wire(site: SimSite, mode: str) -> None:
    path = SimSite.doc_path(SIZE)
    request, response, data, host = _loopback(site, mode, path)
    sine = mode == "sine"
    verifier = StreamVerifier(path, site.now, public_key=site.key.verifying_key())
    client = Tap(HttpFetch(path, host=host, sine=sine, verifier=verifier if sine else None))
    server = Tap(OriginEndpoint(site.origin))
    d = run_pair(client, server, client_app=HttpFetch.app, server_app=OriginEndpoint.app,
                 up=LinkParams(1e6, 0.02))
    assert bytes(client.sent) == request and bytes(server.received) == request
    assert bytes(server.sent) == response and bytes(client.received) == response
    assert d.bytes_by_direction() == {"client->server": len(request),
                                      "server->client": len(response)}
    fetch = client.obj
    assert fetch.complete and bytes(fetch.verified if sine else fetch.body) == data
    assert data == (site.root / path.lstrip("/")).read_bytes()


@pytest.mark.parametrize("warm", [True, False])
def test_cache_serves_the_origin_bytes_and_the_verifier_consumes_their_body(
        site: SimSite, warm: bool) -> None:
    path = SimSite.doc_path(SIZE)
    run = SimRun(site, Scenario(costs=FIXED), tls_costs=ZERO_COSTS)
    run.fetch("sine-proxy", path, warm)
    run.run()
    (fetch,) = run.fetches
    stored = run.cache.store[(path, True)]
    assert (run.cache.hits, run.cache.misses) == ((1, 0) if warm else (0, 1))
    # the bytes the cache host put on the client's connection are the stored bytes, verbatim
    assert bytes(fetch.response) == stored
    head, _, body = stored.partition(b"\r\n\r\n")
    assert b"Content-Encoding: sine" in head
    # ... whose body is the real encoder's stream, and is what the verifier consumed
    at = load_signed(site.root, path)
    assert at is not None
    document = (site.root / path.lstrip("/")).read_bytes()
    stream = b"".join(encode_stream(document, signed_from_separate(at)))
    assert body == stream == bytes(fetch.body)
    assert bytes(fetch.verified) == document and fetch.signatures == 1
    assert len(run.latencies) == 1 and run.latencies[0] > 0


def test_tampered_cache_entry_fails_closed(site: SimSite) -> None:
    path = SimSite.doc_path(SIZE)
    run = SimRun(site, Scenario(costs=ZERO), tls_costs=ZERO_COSTS)
    cache = HttpCache()
    cache.prefill(site.origin, path, sine=True)
    good = cache.store[(path, True)]
    bad = bytearray(good)
    bad[-100] ^= 1                                  # one bit in the last block
    run.cache.store[(path, True)] = bytes(bad)
    run.fetch("sine-proxy", path, warm=False)       # warm=False: do not overwrite the entry
    with pytest.raises(FetchFailed, match="failed") as info:
        run.run()
    assert isinstance(info.value.__cause__, RemoteProtocolError)
    (fetch,) = run.fetches
    document = (site.root / path.lstrip("/")).read_bytes()
    assert not fetch.complete and len(fetch.verified) < len(document)
    assert document.startswith(bytes(fetch.verified))    # only verified bytes came out


def _real_sizes(site: SimSite, size: int, protocol: str) -> dict[str, int]:
    """The request, response-header and tag sizes the real code produces for one document
    (through a cache the request carries the absolute URL)."""
    path = SimSite.doc_path(size)
    sine = protocol.startswith("sine")
    target = f"http://{HOST}{path}" if protocol.endswith("-proxy") else path
    cache = HttpCache()
    cache.prefill(site.origin, path, sine)
    head, _, body = cache.store[(path, sine)].partition(b"\r\n\r\n")
    request = HttpFetch(path, sine=sine, target=target).request
    sizes = {"request": len(request), "header": len(head) + 4}
    if sine:   # whatever the model's formula does not cover goes into its "tag"
        blocks = -(-size // 1024)
        sizes["tag_bytes"] = len(body) - blocks * 1024 - 32 * (blocks - 1)
    if protocol == "https":   # tls12's real flights: ClientHello, ServerHello..Done, ...
        run = SimRun(site, Scenario(costs=ZERO), ZERO_COSTS)
        run.fetch("https", path, warm=True)
        run.run()
        flights = [f.nbytes for f in run.drivers[0].flights]
        sizes.update(tls_client_flights=(flights[0], flights[2]),
                     tls_server_flights=(flights[1], flights[3]),
                     tls_record_overhead=flights[4] - len(request))
    return sizes


def test_model_and_driver_agree_where_the_model_bytes_were_right(site: SimSite) -> None:
    """Figure 4 and 5 points, model vs driver (the full sweep is in the notebook).

    The model types its byte counts (a 350-byte request, a 250-byte header, a 370-byte tag);
    the real ones differ by up to a few hundred bytes (the request is ~80 bytes, the plain
    header carries a ``Link``), which is up to 2 % of a 1 KB fetch on a 512 kbit/s line.  Set
    to the real sizes, the model agrees with the driver within 0.5 % for HTTP and the SINE
    variants, direct and through the cache, and within 1 % for HTTPS once its typed TLS
    flights (150 / 1600 / 330 / 60 bytes) are replaced by ``tls12``'s real ones (about 105 /
    1134 / 133 / 91).  With the typed flights the model's HTTPS is up to 3.5 % faster: its
    1600-byte server flight is two segments, whose ACKs leave TCP's congestion window one
    segment larger when the body starts, saving part of a slow-start round.  SINEB's
    ``AT_sign`` exchange is typed too (the 350-byte request and header + 65 bytes, in one
    TLS record each): 2 % bound.

    With CPU costs the SINE proxy variants are faster on the driver: the verifier hashes each
    chunk as it arrives, overlapping the transfer, where the model adds all the verification
    CPU after the last byte; the driver is never slower and the gap is at most that CPU.
    """
    for bw in (512e3, 100e6):
        for protocol in PROTOCOLS:
            for size in (1_000, SIZE):
                sc = Scenario(client_bw=bw, costs=ZERO, **_real_sizes(site, size, protocol))
                old = fetch_latency(protocol, size, sc)
                new = driver_fetch_latency(protocol, size, sc, site=site,
                                           tls_costs=ZERO_COSTS)
                tol = {"https": 0.01, "sineb": 0.02, "sineb-proxy": 0.02}.get(protocol, 0.005)
                assert new == pytest.approx(old, rel=tol), (protocol, size, bw)
    sc = Scenario(costs=FIXED)
    for protocol in ("sine-proxy", "sinex-proxy"):
        old = fetch_latency(protocol, 1_000_000, sc)
        new = driver_fetch_latency(protocol, 1_000_000, sc, site=site)
        verify_cpu = FIXED.hash_per_byte * sine_bytes(1_000_000, sc)
        assert old - verify_cpu * 1.05 <= new <= old * 1.01, (protocol, old, new)


def test_portal_model_and_driver_agree(site: SimSite) -> None:
    """Figure 6 (4 hosts here, no CPU): within 2 % for every protocol but SINEB (the typed
    byte counts, as above; with CPU the driver overlaps verification, as above).

    SINEB's clock starts, per host, once that host's TLS session is ready, and the page
    latency is the slowest host's.  The model opens all 22 sessions' TCP connections at once
    (no handshake), so every host's ``AT_sign`` answer and then its 15 KB from the cache
    arrive together and contend for the client link (22 x 15 KB at 100 Mbit/s is ~27 ms).  On
    the driver the real handshakes' server flights (22 x ~1.1 KB) queue on the 4 Mbit/s WAN,
    so the sessions become ready up to ~50 ms apart and their fetches barely overlap: each
    host takes ~1 WAN round trip plus its own transfer.  The driver is faster, by up to 25 %
    (warm cache, where the shared client link is the whole cost).  The byte counts are not
    the cause: the model with the real ``AT_sign`` sizes moves by under 1 %.
    """
    sc = Scenario(costs=ZERO)
    for protocol in PROTOCOLS:
        for warm in (True, False):
            old = portal_latency(protocol, 4, 15_000, sc, warm)
            new = driver_portal_latency(protocol, 4, 15_000, sc, warm, site=site,
                                        tls_costs=ZERO_COSTS)
            if protocol.startswith("sineb"):
                assert 0.75 * old <= new <= old * 1.01, (protocol, warm, old, new)
            else:
                assert new == pytest.approx(old, rel=0.02), (protocol, warm)


def test_the_tls_certificate_is_the_same_size_in_every_run() -> None:
    """Each SimSite makes a fresh RSA key, but its certificate carries the fixed serial, so the
    Certificate message has one size and the simulated HTTPS latency one value (a random
    serial was one DER byte shorter about once in 256 sites, and moved Figure 6's HTTPS row
    by a few microseconds between two runs of the same scenario)."""
    from cryptography.hazmat.primitives.serialization import Encoding

    sizes, latencies = set(), set()
    sc = Scenario(costs=ZERO)
    for _ in range(2):
        with SimSite(dict.fromkeys(SimSite.portal_paths(2, 2_000), 2_000)) as site:
            cert = site.tls_credentials.chain[0]
            assert cert.serial_number == SIM_SERIAL
            sizes.add(len(cert.public_bytes(Encoding.DER)))
            latencies.add(driver_portal_latency("https", 2, 2_000, sc, site=site))
    assert len(sizes) == 1 and len(latencies) == 1, (sizes, latencies)


def test_unknown_protocol_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown protocol"):
        driver_fetch_latency("gopher", 1_000)

