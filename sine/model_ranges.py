"""Chain vs tree for verified byte ranges: exact bytes per mode, and a SimPy model of the time.

Scenario (issue 25): a client asks a *warm* cache for one byte range of a large signed file
(1 MiB at 10 %, 50 % or 90 % of a 1 GB file), or starts streaming it from byte 0, over the
client's line of the SINE paper (:class:`sine.model_latency.Scenario`: 100 Mbit/s and 0.5 ms one
way by default, :data:`sine.params.SINE_BANDWIDTHS` for the sweep).  Units: bytes, seconds,
bit/s.

**Modes** (:data:`MODES`) and what a client must fetch to release the range verified:

=================  ===========================================================================
``sine-inline``    SINE's ``Content-Encoding: sine`` body (``Y_0`` then records
                   ``B_i || h_{i+1}``): the *prefix* of the body up to the range's last block
                   (``Range: bytes=0-...`` of the encoded body): a chain verifies block *k* only
                   after every block before it
``sine-separate``  the separate authentication tag (``Y_0 || h_2..h_n``: the streaming verifier
                   takes it whole) and then the plain document's prefix
``mice``           the ``mi-sha256-03`` body's prefix (8-byte record size, records and proofs)
                   and the signed head (RFC 9421 fields over ``Digest``, ``Content-Digest``,
                   ``Unencoded-Digest``) in the response header
``tree-sha256``    the signed tree head (``TreeTag``), the range proof (``33 + 32 m`` bytes) and
``tree-blake3``    the covering chunk groups of the plain document (the widening), three requests
                   as :mod:`sine.aio.tree_fetch` sends them
``unverified``     the reference: the range itself, nothing else
=================  ===========================================================================

Block, record and group size are one parameter ``g`` (1, 4, 16, 64 KiB; MICE above 16 KiB is
outside :data:`sine.mice.RECORD_SIZES`, the draft sets no bound).  "First verified byte" at
offset 0 is a whole-document stream from the start (the tree's combined stream: the head,
the parents above group 0 and group 0); at any other offset it is the first byte of the range
request, which a tree client releases only with the whole range
(:class:`sine.tree_verifier.SliceVerifier` recomputes the root from all of it).

**Bytes are true by construction**: the formulas below are the formats' own lengths (``FORMAT.md``,
``TREE.md``, draft-thomson-http-mice-03); the head sizes come from the real encoders
(:func:`head_sizes` signs real heads), the tree proof sizes from :func:`sine.tree.tree_overhead`
(the shape alone, so a 1 GB file needs no outboard); ``tests/sine/test_model_ranges.py`` checks
every count against the real encoders and verifiers at small sizes.

**Time is modelled** (:func:`fetch_time`): TCP open, then the fetch's request--response
exchanges one after the other on one keep-alive connection to the cache
(:class:`netsim.tcp.TcpConnection` over :class:`netsim.link.Link`, request and header sizes from
:class:`~sine.model_latency.Scenario`), then the client's verification CPU (:class:`VerifyCpu`,
measured per byte by :func:`sine.experiments.ranges.measure_verify_cpu`): a chain verifier and
the tree's stream verifier hash while the bytes arrive, so they finish when the later of "the
last record arrived and was hashed" and "every byte since the response began was hashed"; a
slice verifier hashes after the last byte.  Responses longer than ``cap`` bytes are simulated up
to ``cap`` and extended at the connection's steady-state rate, measured on the same model
(:func:`steady_rate`; checked against full simulations in the tests).  Left out: pipelining
(the tree's three requests go one after the other), HTTP/2, a cold cache, loss.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import simpy
from simpy.events import ProcessGenerator

from netsim.link import Link, LinkParams
from netsim.tcp import TcpConnection

from .algorithms import HashAlg, SigningKey
from .format import Tag, TagInfo, block_count, push_tag
from .httpsig import sign_response
from .mice import HEADER_SIZE as MICE_HEADER
from .mice import PROOF_SIZE, mice_encode, response_fields
from .model_latency import Scenario
from .tree import (
    TreeHash,
    TreeHead,
    TreeTag,
    group_count,
    left_groups,
    push_tree_tag,
    tree_overhead,
)

__all__ = ["MODES", "CHAIN_MODES", "TREE_MODES", "UNVERIFIED", "GROUP_SIZES", "MIB",
           "HeadSizes", "head_sizes", "Fetch", "range_fetch", "first_verified_fetch",
           "whole_overhead", "spine_parents", "VerifyCpu", "steady_rate", "fetch_time"]

CHAIN_MODES = ("sine-inline", "sine-separate", "mice")
TREE_MODES = ("tree-sha256", "tree-blake3")
MODES = CHAIN_MODES + TREE_MODES
UNVERIFIED = "unverified"
GROUP_SIZES = (1 << 10, 1 << 12, 1 << 14, 1 << 16)
MIB = 1 << 20
_DIGEST = 32  # SHA-256 chain links, MICE proofs, tree hashes: all 32 bytes


# -- exact bytes ------------------------------------------------------------------------------


@dataclass(frozen=True)
class HeadSizes:
    """Bytes of each mode's signed head for one document (built by :func:`head_sizes`)."""

    sine_tag: int     #: ``push_tag(Y_0)``: the head of the inline body and of the separate tag
    tree_tag: int     #: ``push_tree_tag``: the signed tree head
    mice_fields: int  #: header lines a signed MICE response adds (``Name: value\r\n`` each)
    signature: str    #: the signature scheme, e.g. ``"RSA_PSS_SHA256 (256-byte signature)"``


def head_sizes(key: SigningKey, path: str, length: int, group_size: int = GROUP_SIZES[0],
               now: int = 1_700_000_000) -> HeadSizes:
    """Sign a real ``Y_0``, a real tree head and a real MICE response head for a ``length``-byte
    document at ``path`` and measure them (roots are placeholders of the right size: the
    lengths do not depend on the content; the MICE head is signed over a small body, its
    fields are fixed-size digests and a signature)."""
    info = TagInfo(HashAlg.SHA256, key.alg, group_size, now, now + 86400, length, path,
                   bytes(_DIGEST))
    signature = key.sign(info.signed_message())
    head = TreeHead(TreeHash.SHA256, key.alg, group_size, now, now + 86400, length, path,
                    bytes(_DIGEST))
    sample = bytes(range(256)) * 8
    enc = mice_encode(sample, 1024)
    plain = [("Content-Type", "application/octet-stream")]
    signed = sign_response(200, plain + response_fields(enc), enc.body, key, key_id="origin",
                           now=now, unencoded=sample)
    extra = sum(len(n) + len(v) + 4 for n, v in signed if (n, v) not in plain)
    return HeadSizes(len(push_tag(Tag(info, signature))),
                     len(push_tree_tag(TreeTag(head, key.sign(head.signed_message())))),
                     extra, f"{key.alg.name} ({len(signature)}-byte signature)")


@dataclass(frozen=True)
class Fetch:
    """What a client fetches for one goal, response by response (bodies in request order).

    ``extra_header``: header bytes a response carries beyond a plain one (MICE's signed
    fields); ``useful``: the bytes the client asked for; ``hashed``: document bytes its
    verifier hashes (the CPU model's unit); ``last_record``: bytes the verifier needs after
    the last arrival before it can release (a record, or for a slice the whole range);
    ``progressive``: the verifier hashes while bytes arrive (chains, the tree stream) or only
    after the last byte (a slice).
    """

    mode: str
    group_size: int
    bodies: tuple[int, ...]
    useful: int
    hashed: int
    last_record: int
    progressive: bool
    extra_header: tuple[int, ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.extra_header:
            object.__setattr__(self, "extra_header", (0,) * len(self.bodies))
        if len(self.extra_header) != len(self.bodies) or min(self.bodies, default=0) < 0:
            raise ValueError("one extra-header count per response, no negative body")

    @property
    def wire(self) -> int:
        """Body bytes plus the extra header bytes (HTTP's own header lines not counted)."""
        return sum(self.bodies) + sum(self.extra_header)

    @property
    def overhead(self) -> int:
        """Bytes fetched beyond the ones asked for."""
        return self.wire - self.useful


def _check(mode: str, length: int, g: int) -> None:
    if mode not in MODES + (UNVERIFIED,):
        raise ValueError(f"unknown mode {mode!r}")
    if g not in GROUP_SIZES:
        raise ValueError(f"group size must be one of {GROUP_SIZES}")
    if length < 1:
        raise ValueError("the document must have at least one byte")


def _sine_prefix(length: int, g: int, k: int, tag: int) -> int:
    """Bytes of the ``sine`` body through record ``k``: each record but the last carries
    ``h_{k+1}``, the last block is padded to ``g``."""
    n = block_count(length, g)
    return tag + k * g + _DIGEST * min(k, n - 1)


def _mice_prefix(length: int, g: int, k: int) -> int:
    """Bytes of the ``mi-sha256-03`` body through record ``k`` and the proof after it."""
    n = block_count(length, g)
    return MICE_HEADER + min(k * g, length) + PROOF_SIZE * min(k, n - 1)


def _chain(mode: str, length: int, g: int, last: int, useful: int, heads: HeadSizes) -> Fetch:
    """A chain client's fetch to release byte ``last`` (it streams from byte 0)."""
    k = last // g + 1  # 1-based block holding ``last``
    n = block_count(length, g)
    hashed = min(k * g, length)
    record = g + (_DIGEST if k < n else 0)
    if mode == "sine-inline":
        return Fetch(mode, g, (_sine_prefix(length, g, k, heads.sine_tag),), useful, hashed,
                     record, True)
    if mode == "sine-separate":
        at = heads.sine_tag + _DIGEST * (n - 1)
        return Fetch(mode, g, (at, hashed), useful, hashed, min(g, length - (k - 1) * g), True)
    return Fetch(mode, g, (_mice_prefix(length, g, k),), useful, hashed,
                 min(g, length - (k - 1) * g) + (PROOF_SIZE if k < n else 0), True,
                 (heads.mice_fields,))


def range_fetch(mode: str, length: int, g: int, first: int, last: int, heads: HeadSizes
                ) -> Fetch:
    """The fetch that releases ``Range: bytes=first-last`` verified (inclusive, satisfiable)."""
    _check(mode, length, g)
    if not 0 <= first <= last < length:
        raise ValueError(f"range {first}-{last} not satisfiable for {length} bytes")
    useful = last - first + 1
    if mode == UNVERIFIED:
        return Fetch(mode, g, (useful,), useful, 0, 0, True)
    if mode in CHAIN_MODES:
        return _chain(mode, length, g, last, useful, heads)
    cost = tree_overhead(length, g, (first, last))
    widened = useful + cost.widening
    return Fetch(mode, g, (heads.tree_tag, cost.proof, widened), useful, widened, widened,
                 False)


def spine_parents(count: int) -> int:
    """Parents before group 0 in the combined stream: the depth of leaf 0 (left-full tree)."""
    depth = 0
    while count > 1:
        count, depth = left_groups(count), depth + 1
    return depth


def first_verified_fetch(mode: str, length: int, g: int, offset: int, heads: HeadSizes,
                         range_bytes: int = MIB, outboard: bool = False) -> Fetch:
    """The fetch until the first verified byte at ``offset``: 0 is a whole-document stream
    from the start; otherwise the first byte of ``Range: bytes=offset-(offset+range_bytes-1)``
    (a tree slice releases it only with the whole range).  ``outboard``: a tree stream takes
    the whole outboard first (``16 + 64 (N - 1)`` bytes) and then the plain document, instead
    of the combined stream."""
    _check(mode, length, g)
    if not 0 <= offset < length:
        raise ValueError("offset outside the document")
    if mode == UNVERIFIED:
        return Fetch(mode, g, (1,), 1, 0, 0, True)
    if mode in CHAIN_MODES:
        return _chain(mode, length, g, offset, 1, heads)
    if offset:
        full = range_fetch(mode, length, g, offset, min(offset + range_bytes, length) - 1,
                           heads)
        return Fetch(mode, g, full.bodies, 1, full.hashed, full.last_record, False)
    group = min(g, length)
    if outboard:
        return Fetch(mode, g, (heads.tree_tag, tree_overhead(length, g).outboard, group), 1,
                     group, group, True)
    spine = 2 * _DIGEST * spine_parents(group_count(length, g))
    return Fetch(mode, g, (heads.tree_tag, spine + group), 1, group, group, True)


def whole_overhead(mode: str, length: int, g: int, heads: HeadSizes) -> int:
    """Bytes beyond the document to fetch it whole, verified (streaming, from the start):
    the inline body's tag, links and padding; the separate tag; MICE's header, proofs and
    signed fields; the tree head and the combined stream's parents."""
    _check(mode, length, g)
    n = block_count(length, g)
    if mode == "sine-inline":
        return _sine_prefix(length, g, n, heads.sine_tag) - length
    if mode == "sine-separate":
        return heads.sine_tag + _DIGEST * (n - 1)
    if mode == "mice":
        return _mice_prefix(length, g, n) - length + heads.mice_fields
    if mode in TREE_MODES:
        return heads.tree_tag + tree_overhead(length, g).interleaved
    return 0


# -- time -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class VerifyCpu:
    """Client CPU seconds per document byte, by ``(kind, mode, g)`` with ``kind`` ``"stream"``
    (whole document, progressive verifier) or ``"slice"`` (a tree range); ``source`` says
    where the numbers come from (measured how, or ``"none"``)."""

    per_byte: dict[tuple[str, str, int], float]
    source: str

    @classmethod
    def none(cls) -> VerifyCpu:
        """No CPU at all (the network alone)."""
        return cls({}, "none (network only)")

    def of(self, fetch: Fetch) -> float:
        """Seconds per hashed byte for ``fetch``'s verifier (0 without a calibration)."""
        kind = "stream" if fetch.progressive else "slice"
        if fetch.mode == UNVERIFIED or not self.per_byte:
            return 0.0
        return self.per_byte[(kind, fetch.mode, fetch.group_size)]


def _links(env: simpy.Environment, sc: Scenario) -> TcpConnection:
    up = Link(env, LinkParams(sc.client_bw, sc.client_delay), "client-up")
    down = Link(env, LinkParams(sc.client_bw, sc.client_delay), "client-down")
    return TcpConnection(env, (up,), (down,), sc.tcp, "client-cache")


def _simulate(sc: Scenario, responses: tuple[int, ...]) -> tuple[float, float]:
    """``(last byte, start of the last response)``: when the client holds the last response's
    last byte, and when the cache had the last request (seconds from the SYN)."""
    env = simpy.Environment()
    conn = _links(env, sc)
    marks: list[float] = []

    def run() -> ProcessGenerator:
        yield conn.open()
        for size in responses:
            yield conn.a.send(sc.request)
            marks.append(env.now)
            yield conn.b.send(sc.header + size)
        marks.append(env.now)

    env.process(run())
    env.run()
    return marks[-1], marks[-2]


_RATES: dict[tuple[Scenario, int], float] = {}


def steady_rate(sc: Scenario, cap: int) -> float:
    """Seconds per extra response byte once a response is longer than ``cap``: the model's own
    steady state, one response of ``cap + span`` minus one of ``cap``, over ``span`` -- a whole
    number of receive windows (about ``cap``), so that a window-limited line (one window per
    round trip) is measured in whole round trips."""
    key = (sc, cap)
    if key not in _RATES:
        window = int(sc.tcp.rwnd) * sc.tcp.mss
        span = max(1, cap // window) * window
        _RATES[key] = (_simulate(sc, (cap + span,))[0] - _simulate(sc, (cap,))[0]) / span
    return _RATES[key]


def fetch_time(fetch: Fetch, sc: Scenario, cpu: VerifyCpu, cap: int = MIB) -> float:
    """Seconds from the SYN until ``fetch``'s goal is released verified (module docstring).

    Responses longer than ``cap`` are simulated to ``cap`` bytes and extended at
    :func:`steady_rate`; ``cap=0`` simulates every byte."""
    sizes = tuple(b + x for b, x in zip(fetch.bodies, fetch.extra_header, strict=True))
    cut = [s - cap if cap and s > 2 * cap else 0 for s in sizes]
    rate = steady_rate(sc, cap) if any(cut) else 0.0
    last, began = _simulate(sc, tuple(s - c for s, c in zip(sizes, cut, strict=True)))
    began += rate * sum(cut[:-1])
    last += rate * sum(cut)
    per_byte = cpu.of(fetch)
    if fetch.progressive:
        return max(last + per_byte * fetch.last_record, began + per_byte * fetch.hashed)
    return last + per_byte * fetch.hashed
