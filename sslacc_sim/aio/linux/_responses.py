"""What an HTTPS client received, judged: a raw stream split into responses, bodies compared.

Pure functions over bytes, no I/O: :mod:`sslacc_sim.aio.linux.clients` reads the clients'
output files and re-exports the public names. A persistent HTTP/1.1 connection carries its
responses back to back, each delimited by its ``Content-Length`` (the only framing the
campaign's server uses: no chunked encoding), so :func:`split_responses` cuts a stream at each
head and takes exactly that many body bytes; what cannot be cut any further is the last
response, with its problem named.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "MAX_HEAD", "RawResponse", "Verdict", "first_difference", "judge_body", "judge_stream",
    "split_response", "split_responses",
]  # fmt: skip

MAX_HEAD = 64 * 1024
"""The longest response head (bytes) :func:`split_responses` looks for."""


@dataclass(frozen=True)
class RawResponse:
    """A raw HTTP response split at the end of its head.

    ``problem`` is ``''`` when the head is ``HTTP/1.1 200`` with one valid ``Content-Length``
    (then ``length`` holds it), else why not. ``body`` is what follows the head (``b''`` when
    no head was found).
    """

    problem: str
    length: int | None
    body: bytes


def _parse_head(head: bytes) -> tuple[str, int | None]:
    lines = head.decode("latin-1").split("\r\n")
    status = lines[0].split(" ", 2)
    if len(status) < 2 or status[0] != "HTTP/1.1" or status[1] != "200":
        return f"status line {lines[0][:80]!r}, not HTTP/1.1 200", None
    lengths = [value.strip() for name, colon, value in (line.partition(":") for line in lines[1:])
               if colon and name.strip().lower() == "content-length"]  # fmt: skip
    if len(lengths) != 1 or not lengths[0].isascii() or not lengths[0].isdigit():
        return f"no single valid Content-Length in the head ({lengths[:2]})", None
    return "", int(lengths[0])


def split_responses(raw: bytes, limit: int) -> list[RawResponse]:
    """Split the responses of one persistent connection, in order, at most ``limit`` of them.

    Every response but the last has no problem and a body of exactly its Content-Length; the
    last takes all that follows its head (a short body, or a long one when it is the
    ``limit``-th and more bytes follow) or is the one with a problem. Never empty: ``b''``
    gives one response, ``no HTTP response head``. Any bytes give a judgement; the one
    exception is ``ValueError`` for a ``limit`` below 1.
    """
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    responses: list[RawResponse] = []
    pos = 0
    while True:
        end = raw.find(b"\r\n\r\n", pos, pos + MAX_HEAD + 4)  # a head of at most MAX_HEAD
        if end < 0:
            return [*responses, RawResponse("no HTTP response head", None, b"")]
        problem, length = _parse_head(raw[pos:end])
        start = end + 4
        if length is None or len(responses) == limit - 1 or len(raw) - start <= length:
            return [*responses, RawResponse(problem, length, raw[start:])]
        responses.append(RawResponse("", length, raw[start : start + length]))
        pos = start + length


def split_response(raw: bytes) -> RawResponse:
    """Split a raw response into head and body; any bytes give a judgement, never an exception."""
    return split_responses(raw, 1)[0]


def first_difference(a: bytes, b: bytes) -> int:
    """Index of the first byte where ``a`` and ``b`` differ (the shorter length if one is a prefix)."""
    n = min(len(a), len(b))
    block = 1 << 16
    start = 0
    while start < n and a[start : start + block] == b[start : start + block]:
        start += block
    for i in range(start, min(start + block, n)):
        if a[i] != b[i]:
            return i
    return n


def judge_body(body: bytes, expected: bytes) -> str:
    """``''`` when ``body`` is exactly ``expected``, else what is wrong with it."""
    if body == expected:
        return ""
    i = first_difference(body, expected)
    if i < min(len(body), len(expected)):
        return f"body differs at byte {i}"
    if len(body) < len(expected):
        return f"short body: got {len(body)} of {len(expected)} bytes"
    return f"long body: got {len(body)} of {len(expected)} bytes"


@dataclass(frozen=True)
class Verdict:
    """The judgement of one response (or one missing): what is wrong (``''`` if nothing), its
    body bytes, and whether it looked complete to the client: a silent failure if wrong."""

    problem: str
    got: int
    looked_complete: bool  # nothing visible to the client said the body was incomplete

    def named(self, label: str) -> Verdict:
        """The same verdict, its problem (if any) prefixed by ``label``."""
        return Verdict(label + self.problem if self.problem else "", self.got, self.looked_complete)


def _judge_response(response: RawResponse, expected: bytes) -> Verdict:
    got = len(response.body)
    if response.problem or response.length is None:
        return Verdict(response.problem, got, False)
    if got < response.length:
        return Verdict(f"short body: got {got} of {response.length} bytes", got, False)
    if got > response.length:
        return Verdict(f"long body: got {got} bytes, Content-Length {response.length}", got, False)
    return Verdict(judge_body(response.body, expected), got, True)


def judge_stream(raw: bytes, expected: bytes, count: int) -> list[Verdict]:
    """One verdict per response of a raw stream that should hold ``count`` (and one if some are missing)."""
    responses = split_responses(raw, count)
    verdicts = [_judge_response(r, expected) for r in responses]
    if count > 1:
        verdicts = [v.named(f"response {k}: ") for k, v in enumerate(verdicts, 1)]
    if len(responses) < count:
        verdicts.append(Verdict(f"{count - len(responses)} of {count} responses missing", 0, False))
    return verdicts
