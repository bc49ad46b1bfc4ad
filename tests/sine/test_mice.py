"""MICE (``mi-sha256-03``): vectors, round trips, tampering, parser fuzzing (sine.mice)."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sine.errors import LocalProtocolError, MiceIntegrityError, SineError
from sine.mice import (
    EMPTY_PROOF,
    MAX_RECORD_SIZE,
    ContentVerified,
    MiceDecoder,
    MiceEvent,
    RecordVerified,
    encoded_length,
    mice_decode,
    mice_encode,
    mice_proofs,
    pull_digest,
    pull_record_size,
    push_digest,
    response_fields,
)

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "mice"
DRAFT = json.loads((VECTORS / "draft03_examples.json").read_text())
ANY_SIZE = range(1, MAX_RECORD_SIZE + 1)  # the draft's own examples use 16 and 41
JS_CASES = sorted(p.stem for p in VECTORS.glob("js_*.in"))


def _draft_top(case: dict[str, object]) -> bytes:
    value = str(case["digest"])
    return base64.b64decode(value.split("=", 1)[1])


def _feed(decoder: MiceDecoder, body: bytes, step: int) -> list[MiceEvent]:
    events: list[MiceEvent] = []
    for i in range(0, len(body), step):
        events += decoder.receive_data(body[i : i + step])
    return events + decoder.receive_data(b"")


def _released(events: list[MiceEvent]) -> bytes:
    return b"".join(e.data for e in events if isinstance(e, RecordVerified))


def _failure(body: bytes, top: bytes, step: int = 997, sizes: range = ANY_SIZE) -> tuple[
        MiceIntegrityError, bytes]:
    """Feed ``body``; return the error and every byte released before it."""
    decoder = MiceDecoder(top, record_sizes=sizes)
    released: list[MiceEvent] = []
    with pytest.raises(MiceIntegrityError) as info:
        for i in range(0, len(body), step):
            released += decoder.receive_data(body[i : i + step])
        decoder.receive_data(b"")
    released += info.value.events  # type: ignore[arg-type]
    return info.value, _released(released)


# --- vectors -------------------------------------------------------------------------------


@pytest.mark.parametrize("case", DRAFT["cases"], ids=lambda c: c["name"])
def test_encoder_matches_published_examples(case: dict[str, object]) -> None:
    content = str(case["content_utf8"]).encode()
    rs = case["record_size"] or 1024
    enc = mice_encode(content, int(rs), record_sizes=ANY_SIZE)  # type: ignore[call-overload]
    assert enc.body.hex() == case["body_hex"]
    assert len(enc.body) == case["content_length"] == encoded_length(len(content), int(rs))  # type: ignore[call-overload]
    assert enc.top_proof == _draft_top(case)
    assert enc.digest_field().split("=", 1)[1] == str(case["digest"]).split("=", 1)[1]


@pytest.mark.parametrize("case", DRAFT["cases"], ids=lambda c: c["name"])
def test_decoder_accepts_published_examples(case: dict[str, object]) -> None:
    body = bytes.fromhex(str(case["body_hex"]))
    for step in (1, 7, 64, 1 << 20):
        events = _feed(MiceDecoder(_draft_top(case), record_sizes=ANY_SIZE), body, step)
        assert _released(events) == str(case["content_utf8"]).encode()
        assert isinstance(events[-1], ContentVerified)


def test_draft_inline_proofs_are_those_printed() -> None:
    case = DRAFT["cases"][1]
    printed = [base64.b64decode(p.replace("_", "/")) for p in case["inline_proofs_as_printed"]]
    content = case["content_utf8"].encode()
    assert mice_proofs(content, 16)[1:] == printed


@pytest.mark.parametrize("name", JS_CASES)
def test_matches_the_draft_reference_encoder(name: str) -> None:
    content = (VECTORS / f"{name}.in").read_bytes()
    expected = (VECTORS / f"{name}.mice").read_bytes()
    top = base64.urlsafe_b64decode((VECTORS / f"{name}.mi").read_text().strip() + "=")
    rs = int(name.split("_")[1][2:])
    enc = mice_encode(content, rs)
    assert enc.body == expected and enc.top_proof == top
    assert mice_decode(expected, top) == content


def test_empty_proof_is_sha256_of_zero_byte() -> None:
    assert push_digest(EMPTY_PROOF) == "mi-sha256-03=bjQLnP+zepicpUTmu3gKLHiQHT+zNzh2hRGjBhevoB0="
    assert mice_decode(b"", EMPTY_PROOF) == b""


# --- round trips ---------------------------------------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(content=st.binary(max_size=40_000), rs=st.integers(1024, 16384),
       step=st.integers(1, 20_000))
def test_round_trip_is_byte_exact(content: bytes, rs: int, step: int) -> None:
    enc = mice_encode(content, rs)
    assert len(enc.body) == encoded_length(len(content), rs)
    events = _feed(MiceDecoder(enc.top_proof), enc.body, step)
    assert _released(events) == content
    done = events[-1]
    assert isinstance(done, ContentVerified) and done.length == len(content)
    assert [e.index for e in events if isinstance(e, RecordVerified)] == list(
        range(1, done.records + 1))
    assert pull_digest(enc.digest_field()) == enc.top_proof


def test_response_fields() -> None:
    enc = mice_encode(b"x" * 5000, 2048)
    assert response_fields(enc) == [("Content-Encoding", "mi-sha256-03"),
                                    ("Digest", enc.digest_field())]


@pytest.mark.parametrize("rs", [0, 1, 1023, 16385, 1 << 40])
def test_encoder_rejects_record_sizes_outside_1024_16384(rs: int) -> None:
    with pytest.raises(ValueError):
        mice_encode(b"abc", rs)


def test_bounds_are_accepted() -> None:
    for rs in (1024, 16384):
        assert mice_decode(mice_encode(b"q" * 20000, rs).body,
                           mice_encode(b"q" * 20000, rs).top_proof) == b"q" * 20000


# --- tampering: fail closed at the right record ------------------------------------------

RS = 1024
CONTENT = b"".join(hashlib.sha256(b"%d" % i).digest() for i in range(200))  # 7 records
ENC = mice_encode(CONTENT, RS)
N = 7


def _record_offset(i: int) -> int:
    """Offset of record ``i`` (1-based) in ``ENC.body``."""
    return 8 + (i - 1) * (RS + 32)


@pytest.mark.parametrize("record", range(1, N + 1))
def test_bit_flip_in_a_record_fails_at_that_record(record: int) -> None:
    body = bytearray(ENC.body)
    body[_record_offset(record) + 5] ^= 0x10
    exc, released = _failure(bytes(body), ENC.top_proof)
    assert exc.record == record
    assert released == CONTENT[: (record - 1) * RS]


@pytest.mark.parametrize("record", range(2, N + 1))
def test_bit_flip_in_a_proof_fails_at_the_record_before(record: int) -> None:
    """The proof of ``r_i`` travels inside record ``i-1``'s hashed input."""
    body = bytearray(ENC.body)
    body[_record_offset(record) - 32] ^= 0x01
    exc, released = _failure(bytes(body), ENC.top_proof)
    assert exc.record == record - 1
    assert released == CONTENT[: (record - 2) * RS]


@pytest.mark.parametrize("cut", [1, 31, 32, 33, RS, RS + 32, 4000])
def test_truncation_fails(cut: int) -> None:
    body = ENC.body[:-cut]
    exc, released = _failure(body, ENC.top_proof)
    assert CONTENT.startswith(released) and len(released) < len(CONTENT)
    assert exc.record == len(released) // RS + 1


def test_truncation_at_a_record_boundary_names_the_missing_record() -> None:
    body = ENC.body[: _record_offset(4)]  # records 1-3 and the proof of record 4
    exc, released = _failure(body, ENC.top_proof)
    assert released == CONTENT[: 3 * RS] and exc.record == 4


def test_record_from_another_document_fails_there() -> None:
    other = mice_encode(bytes(reversed(CONTENT)), RS)
    body = bytearray(ENC.body)
    start = _record_offset(3)
    body[start : start + RS + 32] = other.body[start : start + RS + 32]
    exc, released = _failure(bytes(body), ENC.top_proof)
    assert exc.record == 3 and released == CONTENT[: 2 * RS]


def test_swapped_records_fail_at_the_first() -> None:
    body = bytearray(ENC.body)
    a, b = _record_offset(2), _record_offset(3)
    body[a : a + RS], body[b : b + RS] = body[b : b + RS], body[a : a + RS]
    assert _failure(bytes(body), ENC.top_proof)[0].record == 2


@pytest.mark.parametrize("rs", [RS // 2, RS * 2, 2000])
def test_wrong_record_size_header_fails(rs: int) -> None:
    body = rs.to_bytes(8, "big") + ENC.body[8:]
    exc, released = _failure(body, ENC.top_proof, sizes=range(1024, 16385))
    assert released == b""
    assert exc.record in (0, 1)  # 512 is out of range (0); 2048 / 2000 break record 1


@pytest.mark.parametrize("rs", [0, 1, 1023, 16385, 1 << 63])
def test_out_of_range_record_size_header_fails_at_record_0(rs: int) -> None:
    exc, released = _failure(rs.to_bytes(8, "big") + ENC.body[8:], ENC.top_proof,
                             sizes=range(1024, 16385))
    assert exc.record == 0 and released == b""


def test_wrong_top_proof_fails_at_record_1() -> None:
    exc, released = _failure(ENC.body, hashlib.sha256(b"other").digest())
    assert exc.record == 1 and released == b""


def test_last_record_checked_with_the_final_flag() -> None:
    """A last record hashed as if more followed (flag 0x01) must not pass."""
    one = mice_encode(b"z" * 100, 1024)
    wrong_top = hashlib.sha256(b"z" * 100 + b"\x01").digest()
    assert _failure(one.body, wrong_top)[0].record == 1


def test_overlong_last_record_fails_even_with_a_matching_proof() -> None:
    """A last record longer than ``rs`` breaks the format, whatever its hash."""
    last = b"L" * 1500
    body = (1024).to_bytes(8, "big") + last
    exc, released = _failure(body, hashlib.sha256(last + b"\x00").digest())
    assert exc.record == 1 and released == b""


def test_empty_last_record_fails_even_with_a_matching_proof() -> None:
    first = b"F" * 1024
    inner = hashlib.sha256(b"\x00").digest()  # "proof" of an empty last record
    body = (1024).to_bytes(8, "big") + first + inner
    exc, released = _failure(body, hashlib.sha256(first + inner + b"\x01").digest())
    assert exc.record == 2 and released == first


def test_empty_body_needs_the_empty_proof() -> None:
    assert _failure(b"", ENC.top_proof)[0].record == 1
    assert _failure(b"\0\0\0", EMPTY_PROOF)[0].record == 0


def test_header_without_records_fails_at_record_1() -> None:
    assert _failure(ENC.body[:8], ENC.top_proof)[0].record == 1


def test_decoder_is_closed_after_an_error() -> None:
    body = bytearray(ENC.body)
    body[20] ^= 1
    decoder = MiceDecoder(ENC.top_proof)
    with pytest.raises(MiceIntegrityError):
        decoder.receive_data(bytes(body))
        decoder.receive_data(b"")
    with pytest.raises(LocalProtocolError):
        decoder.receive_data(b"more")


def test_done_decoder_refuses_more_bytes() -> None:
    decoder = MiceDecoder(ENC.top_proof)
    decoder.receive_data(ENC.body)
    decoder.receive_data(b"")
    with pytest.raises(LocalProtocolError):
        decoder.receive_data(b"x")
    assert decoder.data_to_send() == b""


def test_decoder_holds_at_most_one_record() -> None:
    decoder = MiceDecoder(ENC.top_proof)
    for i in range(0, len(ENC.body), 100):
        decoder.receive_data(ENC.body[i : i + 100])
        assert decoder.buffered < RS + 32 + 100


@settings(max_examples=150, deadline=None)
@given(pos=st.integers(0, len(ENC.body) - 1), bit=st.integers(0, 7), step=st.integers(1, 3000))
def test_any_bit_flip_fails_closed(pos: int, bit: int, step: int) -> None:
    body = bytearray(ENC.body)
    body[pos] ^= 1 << bit
    exc, released = _failure(bytes(body), ENC.top_proof, step=step, sizes=range(1024, 16385))
    assert CONTENT.startswith(released)
    if pos >= 8:
        hit = (pos - 8) // (RS + 32) + 1
        in_proof = (pos - 8) % (RS + 32) >= RS
        assert exc.record == hit  # a flipped proof breaks the record it follows
        assert not in_proof or exc.record < N


# --- parsers: arbitrary input -> typed error, never another exception --------------------


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=3000), st.binary(min_size=32, max_size=32), st.integers(1, 500))
def test_decoder_fuzz(body: bytes, top: bytes, step: int) -> None:
    decoder = MiceDecoder(top, record_sizes=range(1, 300))
    try:
        _feed(decoder, body, step)
    except SineError as exc:
        assert isinstance(exc, MiceIntegrityError)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_pull_digest_fuzz(value: str) -> None:
    try:
        assert len(pull_digest(value)) == 32
    except MiceIntegrityError as exc:
        assert exc.record == 0


@given(st.binary(max_size=16))
def test_pull_record_size_fuzz(header: bytes) -> None:
    try:
        assert 1024 <= pull_record_size(header) <= 16384
    except MiceIntegrityError as exc:
        assert exc.record == 0


@pytest.mark.parametrize("value", [
    "",
    "sha-256=abc",
    "mi-sha256-03",
    "mi-sha256-03=dcRDgR2GM35DluAV13PzgnG6+pvQwPywfFvAu1UeFrs",  # no padding
    "mi-sha256-03=dcRDgR2GM35DluAV13PzgnG6+pvQwPywfFvAu1UeFrt=",  # non-zero padding bits
    "mi-sha256-03=dcRDgR2GM35DluAV13PzgnG6-pvQwPywfFvAu1UeFrs=",  # base64url character
    "mi-sha256-03=AAAA",  # too short
    "mi-sha256-03=dcRDgR2GM35DluAV13PzgnG6+pvQwPywfFvAu1UeFrs=, "
    "mi-sha256-03=IVa9shfs0nyKEhHqtB3WVNANJ2Njm5KjQLjRtnbkYJ4=",  # two different values
    "mi-sha256-03=dcRDgR2GM35DluAV13PzgnG6+pvQwPywfFvAu1UeFrs=\u00e9",
])
def test_pull_digest_rejects(value: str) -> None:
    with pytest.raises(MiceIntegrityError):
        pull_digest(value)


def test_pull_digest_accepts_other_members_and_case() -> None:
    top = base64.b64decode("dcRDgR2GM35DluAV13PzgnG6+pvQwPywfFvAu1UeFrs=")
    value = "sha-256=X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=, " \
            "MI-SHA256-03=dcRDgR2GM35DluAV13PzgnG6+pvQwPywfFvAu1UeFrs="
    assert pull_digest(value) == top
    assert pull_digest(value + ", mi-sha256-03=dcRDgR2GM35DluAV13PzgnG6+pvQwPywfFvAu1UeFrs=") \
        == top
