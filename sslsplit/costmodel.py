"""Bandwidth cost models: bytes the *server* sends, and round trips, per request.

The SSL-splitting paper (§6.3) simulates months of traffic with a *linear* model fitted to its
single-file microbenchmarks: for each protocol, ``bytes = fixed + marginal × size``; for SSL
splitting with the data already in the proxy's cache the model is *piecewise* linear:

* below ~4,000 B Apache puts the HTTP header and the file in one record, which cannot be
  cached (headers are dynamic), so the marginal cost stays above 1;
* above it, data records are cached and the server only sends a stub (MAC + payload id) per
  record: marginal ≈ 1/250;
* above 2^22 B Apache writes 8,192-byte records instead of 16,384-byte ones, so there are twice
  as many stubs: marginal ≈ 1/120.

This module keeps every parameter in one place:

* :class:`WireParams` — the protocol facts (MSS, header sizes, handshake bytes, record size,
  stub size...) from which :class:`WireModel` computes bytes *structurally*, packet by packet
  and record by record (vectorised numpy);
* :class:`LinearCost` / :class:`SplittingCostModel` — the paper-style (piecewise) linear model, either
  fitted to a :class:`WireModel` by least squares (:meth:`SplittingCostModel.fit`), taken from the
  paper's published marginals (:func:`paper_model`), or fitted to bytes measured on the real
  implementation (:meth:`SplittingCostModel.from_table`, used by :func:`sslsplit.experiments.calibrated_model`).

**Validation.** A linear model fitted to :class:`WireModel` agrees with it by construction, so
comparing the two is only an internal consistency check of the fit. The model is validated
elsewhere: calibrated on measured single-file downloads and compared with measured trace
replays that played no part in the fit, and compared with every number the paper publishes for
§6 (:func:`sslsplit.experiments.agreement`, :func:`sslsplit.experiments.paper_comparison`).

The four protocols (:class:`Protocol`) are HTTP, HTTPS, SSL splitting whose proxy misses (the
server sends stubs *and*, through the miss handler, the payload) and SSL splitting whose proxy
hits (stubs only). Cold/warm replays (:mod:`sslsplit.replay`) mix the last two per request.

Units: bytes at the IP layer on the server's interface (the paper measured "bytes sent on the
server's network interface"); sizes are HTTP body bytes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum

import numpy as np
import numpy.typing as npt

__all__ = [
    "Protocol",
    "WireParams",
    "WireModel",
    "LinearCost",
    "SplittingCostModel",
    "paper_model",
    "SIZE_SWEEP",
]


class Protocol(StrEnum):
    """The ways a file can leave the server."""

    HTTP = "http"
    HTTPS = "https"
    SPLIT_MISS = "split_miss"   #: SSL splitting, payload not in the proxy cache
    SPLIT_HIT = "split_hit"     #: SSL splitting, payload already cached at the proxy


#: File sizes of the single-file microbenchmark (Figures 7 and 8): 100 B .. 10 MB.
SIZE_SWEEP: np.ndarray = np.unique(np.round(np.geomspace(100, 10_000_000, 61)).astype(np.int64))


@dataclass(frozen=True)
class WireParams:
    """Protocol constants of the paper's setup (Apache 1.3 + mod_ssl + OpenSSL 0.9.6, TLS 1.0).

    All sizes in bytes. Defaults are typical values for that setup, not measurements (the paper
    publishes none of them); our own implementation's sizes are measured by
    :func:`sslsplit.experiments.measured_wire_params`.
    """

    mss: int = 1448                      #: TCP payload per segment (1500 MTU, timestamps)
    ip_tcp_header: int = 52              #: IPv4 + TCP header with the timestamp option
    tcp_control_packets: int = 4         #: SYN-ACK, ACK of the request, FIN, last ACK
    http_header: int = 290               #: Apache 1.3 response header
    http_request: int = 250              #: a browser's GET request (client → server)
    tls_handshake: int = 1250            #: ServerHello + Certificate + Done + CCS + Finished
    tls_certificate: int = 900           #: the part of the handshake that is the certificate
    tls_close: int = 37                  #: close_notify alert
    record_payload: int = 16_384         #: maximum TLS plaintext per record
    large_file_record: int = 8_192       #: Apache's record size for files > large_file_bytes
    large_file_bytes: int = 1 << 22      #: the 2^22 B switch
    record_overhead: int = 29            #: 5 header + 20 HMAC-SHA1 + ~4 CBC padding
    header_split_bytes: int = 4_000      #: below this, header and data share one record
    stub_overhead: int = 51              #: stub: 5 hdr + 2 encoding + 2+20 id + 2+20 MAC
    key_expose: int = 45                 #: key-expose message (3DES key + IV), once per conn.
    miss_overhead: int = 60              #: miss-handler response framing per missed record
    cache_certificate: bool = False      #: proxy serves the certificate from cache (§3.5)

    def __post_init__(self) -> None:
        for name in ("mss", "record_payload", "large_file_record"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")


def _packets(nbytes: np.ndarray, mss: int) -> npt.NDArray[np.float64]:
    packets: npt.NDArray[np.float64] = np.ceil(np.maximum(nbytes, 0) / mss)
    return packets



@dataclass(frozen=True)
class WireModel:
    """Structural byte counts: records, stubs and TCP segments counted explicitly."""

    params: WireParams = field(default_factory=WireParams)

    def _records(self, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(number of data records, bytes in them) for the file body, per the Apache rules."""
        p = self.params
        rec = np.where(sizes > p.large_file_bytes, p.large_file_record, p.record_payload)
        n = np.ceil(sizes / rec)
        return n, sizes.astype(np.float64)

    def server_bytes(self, protocol: Protocol | str, sizes: np.ndarray | Iterable[int]
                     ) -> np.ndarray:
        """Bytes the server sends to deliver files of the given sizes (one connection each)."""
        p = self.params
        s = np.asarray(sizes, dtype=np.float64)
        proto = Protocol(protocol)
        control = p.tcp_control_packets * p.ip_tcp_header
        if proto is Protocol.HTTP:
            app = p.http_header + s
            return control + app + _packets(app, p.mss) * p.ip_tcp_header
        small = s < p.header_split_bytes
        n_rec, body = self._records(s)
        # HTTPS: the handshake, then either one record (header+data) or header + data records.
        rec_bytes = np.where(
            small,
            p.http_header + s + p.record_overhead,
            p.http_header + p.record_overhead + body + n_rec * p.record_overhead)
        n_records_total = np.where(small, 1, 1 + n_rec)
        if proto is Protocol.HTTPS:
            app = p.tls_handshake + rec_bytes + p.tls_close
            return control + app + _packets(app, p.mss) * p.ip_tcp_header
        # SSL splitting: every record leaves the server as a stub. Cacheable ones (data records
        # of files >= header_split_bytes) carry a digest; the others carry their payload
        # literally. A miss adds the payload bytes through the miss handler.
        cacheable = np.where(small, 0, n_rec)
        literal = np.where(small, p.http_header + s, p.http_header)
        stubs = n_records_total * p.stub_overhead + literal
        handshake = p.tls_handshake + p.key_expose
        if proto is Protocol.SPLIT_HIT:
            if p.cache_certificate:
                handshake = handshake - p.tls_certificate + p.stub_overhead
            app = handshake + stubs + p.tls_close
            return control + app + _packets(app, p.mss) * p.ip_tcp_header
        # miss: stubs on the connection, payloads through the miss handler (same TCP stream
        # costs, its own framing per record).
        miss = np.where(small, 0.0, body + cacheable * p.miss_overhead)
        app = handshake + stubs + p.tls_close
        return (control + app + _packets(app, p.mss) * p.ip_tcp_header
                + miss + _packets(miss, p.mss) * p.ip_tcp_header)

    def round_trips(self, protocol: Protocol | str) -> int:
        """Round trips before the first byte of the body (TCP + TLS + request)."""
        proto = Protocol(protocol)
        base = 2  # TCP handshake, then request/response
        if proto is Protocol.HTTP:
            return base
        tls = 2   # full TLS 1.0 handshake
        if proto is Protocol.SPLIT_MISS:
            return base + tls + 1   # the proxy's miss-handler round trip to the server
        return base + tls


@dataclass(frozen=True)
class LinearCost:
    """Piecewise-linear cost: for ``size >= starts[i]`` (largest such i),
    ``bytes = fixed[i] + marginal[i] * size``."""

    starts: tuple[int, ...]
    fixed: tuple[float, ...]
    marginal: tuple[float, ...]

    def __post_init__(self) -> None:
        if not (len(self.starts) == len(self.fixed) == len(self.marginal) >= 1):
            raise ValueError("starts, fixed and marginal must have the same non-zero length")
        if self.starts[0] != 0 or list(self.starts) != sorted(set(self.starts)):
            raise ValueError(f"starts must begin at 0 and increase, got {self.starts}")

    def __call__(self, sizes: np.ndarray | Iterable[int]) -> np.ndarray:
        s = np.asarray(sizes, dtype=np.float64)
        idx = np.searchsorted(np.asarray(self.starts), s, side="right") - 1
        return np.asarray(self.fixed)[idx] + np.asarray(self.marginal)[idx] * s

    @staticmethod
    def fit(sizes: np.ndarray, nbytes: np.ndarray, starts: tuple[int, ...] = (0,)
            ) -> LinearCost:
        """Least-squares fit of each piece, with relative (not absolute) error weighting."""
        sizes = np.asarray(sizes, dtype=np.float64)
        nbytes = np.asarray(nbytes, dtype=np.float64)
        fixed, marg = [], []
        bounds = list(starts) + [math.inf]
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            m = (sizes >= lo) & (sizes < hi)
            if m.sum() < 2:
                raise ValueError(f"need at least two sizes in [{lo}, {hi}) to fit a piece")
            w = 1.0 / nbytes[m]
            a = np.stack([w, sizes[m] * w], axis=1)
            coef, *_ = np.linalg.lstsq(a, np.ones(m.sum()), rcond=None)
            fixed.append(float(coef[0]))
            marg.append(float(coef[1]))
        return LinearCost(tuple(starts), tuple(fixed), tuple(marg))


@dataclass(frozen=True)
class SplittingCostModel:
    """The server's bytes per request under each protocol (§6.3): one :class:`LinearCost` per
    :class:`Protocol`, plus round trips per request."""

    costs: Mapping[Protocol, LinearCost]
    round_trips: Mapping[Protocol, int]
    name: str = "model"

    def __post_init__(self) -> None:
        missing = set(Protocol) - set(self.costs)
        if missing:
            raise ValueError(f"cost model lacks protocols: {sorted(missing)}")

    def bytes(self, protocol: Protocol | str, sizes: np.ndarray | Iterable[int]) -> np.ndarray:
        """Server bytes per request for files of ``sizes`` (vectorised)."""
        return self.costs[Protocol(protocol)](sizes)

    def efficiency(self, protocol: Protocol | str, sizes: np.ndarray) -> np.ndarray:
        """File bytes delivered per server byte (Figure 7's y axis)."""
        s = np.asarray(sizes, dtype=np.float64)
        efficiency: np.ndarray = s / self.bytes(protocol, s)
        return efficiency

    @classmethod
    def fit(cls, wire: WireModel | None = None, sizes: np.ndarray = SIZE_SWEEP,
            name: str = "fitted to wire model") -> SplittingCostModel:
        """The paper's procedure -- fit linear models to a single-file size sweep -- applied to
        the structural model's byte counts instead of measurements (no validation: see the
        module docstring)."""
        wire = wire or WireModel()
        p = wire.params
        split_starts = (0, p.header_split_bytes, p.large_file_bytes + 1)
        costs = {}
        for proto in Protocol:
            starts = split_starts if proto is Protocol.SPLIT_HIT else (0, p.header_split_bytes)
            costs[proto] = LinearCost.fit(sizes, wire.server_bytes(proto, sizes), starts)
        return cls(costs, {pr: wire.round_trips(pr) for pr in Protocol}, name)

    @classmethod
    def from_table(cls, sizes: np.ndarray,
                   measured: Mapping[Protocol, np.ndarray] | Mapping[str, np.ndarray],
                   round_trips: Mapping[Protocol, int] | Mapping[str, int] | None = None,
                   header_split_bytes: int = 4_000, large_file_bytes: int = 1 << 22,
                   name: str = "measured") -> SplittingCostModel:
        """Fit from measured bytes per size (e.g. produced by the real implementation)."""
        costs = {}
        for key, nbytes in measured.items():
            proto = Protocol(key)
            starts = ((0, header_split_bytes, large_file_bytes + 1) if proto is Protocol.SPLIT_HIT
                      else (0, header_split_bytes))
            costs[proto] = LinearCost.fit(sizes, nbytes, starts)
        rt = {Protocol(k): v for k, v in (round_trips or {}).items()}
        rt = {pr: rt.get(pr, WireModel().round_trips(pr)) for pr in Protocol}
        return cls(costs, rt, name)

    def with_cost(self, protocol: Protocol | str, cost: LinearCost) -> SplittingCostModel:
        """A copy with one protocol's cost replaced."""
        costs = dict(self.costs)
        costs[Protocol(protocol)] = cost
        return replace(self, costs=costs)


def paper_model(wire: WireModel | None = None) -> SplittingCostModel:
    """The model of §6.3: linear fits, with the paper's cached-splitting marginals.

    Fixed costs come from the structural model (the paper prints no numbers for them); the
    cached-splitting marginal is set to the published ≈1/250 above 4,000 B and ≈1/120 above
    2^22 B, keeping the fitted fixed cost of those pieces.
    """
    fitted = SplittingCostModel.fit(wire, name="paper (§6.3 marginals)")
    hit = fitted.costs[Protocol.SPLIT_HIT]
    cost = LinearCost(hit.starts, hit.fixed, (hit.marginal[0], 1 / 250, 1 / 120))
    return replace(fitted.with_cost(Protocol.SPLIT_HIT, cost), name="paper (§6.3 marginals)")
