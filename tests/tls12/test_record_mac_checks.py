"""The record layer's MAC, padding and length checks, at their exact boundaries.

These tests were written to kill the mutants ``make mutation`` (group ``tls12``) found alive
in the pure-Python twin of the record cipher and in :class:`tls12.record.RecordReader`: each
one pins a property a one-token change to a check would break.  Records are built from the
primitives (AES-CBC from ``cryptography``, HMAC from the standard library) with the test's own
keys, so a test can make a record that is well-formed in every respect but one.  Every cipher
test runs on each available backend (the Python twin, and the C extension both ways) because
the twin promises the C code's bytes and errors.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from typing import Any

import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from hypothesis import given, settings
from hypothesis import strategies as st

from tls12.errors import BadRecordMAC, ProtocolVersionError, RecordOverflow, UnexpectedMessage
from tls12.record import (
    MAX_CIPHERTEXT,
    DirectionKeys,
    OutgoingRecord,
    RecordReader,
    WriteProtection,
)
from tls12.recordcrypto import (
    FRAGMENT_MAX,
    PLAINTEXT_MAX,
    RECORD_CRYPTO_ERRORS,
    CRecordCipher,
    PyRecordCipher,
)
from tls12.suites import SUITES, CipherSuite
from tls12.testing import seeded_rng

Factory = Callable[..., Any]
ENC_KEY = bytes(range(1, 17))
MAC_KEYS = {"sha1": bytes(range(100, 120)), "sha256": bytes(range(100, 132))}
DIGESTS = {"sha1": hashlib.sha1, "sha256": hashlib.sha256}
SEQ_MAX = 2**64 - 1
APPLICATION_DATA, TLS12 = 23, 0x0303

IMPLS: dict[str, Factory] = {"python": PyRecordCipher}
if CRecordCipher is not None:
    IMPLS["c-stitched"] = CRecordCipher
    IMPLS["c-generic"] = lambda *a: CRecordCipher(*a, stitched=False)  # type: ignore[misc]


@pytest.fixture(params=sorted(IMPLS))
def impl(request: pytest.FixtureRequest) -> Factory:
    return IMPLS[request.param]


def _mac(mac: str, seq: int, ctype: int, version: int, data: bytes) -> bytes:
    header = seq.to_bytes(8, "big") + bytes([ctype]) + version.to_bytes(2, "big")
    return hmac.new(MAC_KEYS[mac], header + len(data).to_bytes(2, "big") + data, DIGESTS[mac]).digest()


def _cbc(body: bytes, iv: bytes = bytes(16)) -> bytes:
    """``IV || AES-128-CBC(body)``; ``body`` must already be block-aligned."""
    encryptor = Cipher(algorithms.AES(ENC_KEY), modes.CBC(iv)).encryptor()
    return iv + encryptor.update(body) + encryptor.finalize()


# --- padding ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mac", ["sha1", "sha256"])
def test_malformed_padding_is_refused_even_with_a_correct_mac(impl: Factory, mac: str) -> None:
    """Padding and MAC are both required: a record whose MAC is right for the data before a
    malformed pad is still bad_record_mac.  (A cipher that let the MAC result overwrite the
    padding result would return the plaintext here.)"""
    mac_len = len(MAC_KEYS[mac])
    cipher = impl("aes-128-cbc", mac, ENC_KEY, MAC_KEYS[mac])
    plain = bytes(range(64 - mac_len - 1))  # plaintext || MAC || one pad byte = 4 blocks
    # The last byte says "5 bytes of padding follow" but the bytes before it are not 5s;
    # read as no padding at all, the MAC covers exactly ``plain``.
    fragment = _cbc(plain + _mac(mac, 7, APPLICATION_DATA, TLS12, plain) + b"\x05")
    with pytest.raises(RECORD_CRYPTO_ERRORS, match="^bad record MAC$"):
        cipher.open(7, APPLICATION_DATA, TLS12, fragment)
    # The same record with the one-byte pad ``00`` (valid) opens: only the padding was wrong.
    good = _cbc(plain + _mac(mac, 7, APPLICATION_DATA, TLS12, plain) + b"\x00")
    assert cipher.open(7, APPLICATION_DATA, TLS12, good) == plain


@settings(max_examples=60, deadline=None)
@given(pad=st.integers(1, 15), wrong=st.integers(0, 14), value=st.integers(0, 255))
def test_any_wrong_padding_byte_is_refused(pad: int, wrong: int, value: int) -> None:
    """Every byte of the padding must equal the pad length, on the Python twin (the C code is
    held to the same bytes by tests/tls12/test_recordcrypto.py)."""
    wrong %= pad  # a position among the pad bytes before the length byte
    if value == pad:
        value = (pad + 1) % 256
    cipher = PyRecordCipher("aes-128-cbc", "sha1", ENC_KEY, MAC_KEYS["sha1"])
    plain = bytes(43 - pad + 16) if pad > 11 else bytes(43 - pad)  # keep whole blocks
    padding = bytearray([pad] * (pad + 1))
    padding[wrong] = value
    body = plain + _mac("sha1", 0, APPLICATION_DATA, TLS12, plain) + bytes(padding)
    assert len(body) % 16 == 0
    with pytest.raises(RECORD_CRYPTO_ERRORS):
        cipher.open(0, APPLICATION_DATA, TLS12, _cbc(body))
    padding[wrong] = pad
    good = plain + _mac("sha1", 0, APPLICATION_DATA, TLS12, plain) + bytes(padding)
    assert cipher.open(0, APPLICATION_DATA, TLS12, _cbc(good)) == plain


# --- fragment length bounds --------------------------------------------------------------------


@pytest.mark.parametrize("mac", ["sha1", "sha256"])
def test_a_fragment_of_only_the_iv_is_bad_record_mac(impl: Factory, mac: str) -> None:
    """Too short to hold a MAC: one typed error, never an IndexError from empty plaintext."""
    cipher = impl("aes-128-cbc", mac, ENC_KEY, MAC_KEYS[mac])
    for n in (0, 16, 32):
        with pytest.raises(RECORD_CRYPTO_ERRORS, match="^bad record MAC$"):
            cipher.open(0, APPLICATION_DATA, TLS12, bytes(n))


def test_a_fragment_of_exactly_2_14_plus_2048_bytes_is_opened(impl: Factory) -> None:
    """RFC 5246 §6.2.3: the fragment "MUST NOT exceed 2^14 + 2048", so exactly that many bytes
    is within bounds: a correctly protected one opens (the plaintext bound is the reader's job)
    and one byte more is refused before any decryption."""
    mac_len = 20
    pad = 15
    plain = bytes(i % 251 for i in range(FRAGMENT_MAX - 16 - mac_len - 1 - pad))
    body = plain + _mac("sha1", 3, APPLICATION_DATA, TLS12, plain) + bytes([pad] * (pad + 1))
    fragment = _cbc(body)
    assert len(fragment) == FRAGMENT_MAX
    cipher = impl("aes-128-cbc", "sha1", ENC_KEY, MAC_KEYS["sha1"])
    assert cipher.open(3, APPLICATION_DATA, TLS12, fragment) == plain
    with pytest.raises(RECORD_CRYPTO_ERRORS, match="^bad record MAC$"):
        cipher.open(3, APPLICATION_DATA, TLS12, fragment + bytes(16))


# --- header fields and argument errors -----------------------------------------------------------


def test_header_fields_are_bounded_and_named(impl: Factory) -> None:
    """content_type is one byte, version two, seq eight: one past each bound is a ValueError
    that names the field (the same message from the C extension and the twin)."""
    cipher = impl("aes-128-cbc", "sha1", ENC_KEY, MAC_KEYS["sha1"])
    fragment = _cbc(bytes(48))
    for kwargs, name, bound in (
        ({"content_type": 256}, "content_type", 255),
        ({"version": 0x10000}, "version", 65535),
        ({"seq": SEQ_MAX + 1}, "seq", SEQ_MAX),
    ):
        args = {"seq": 0, "content_type": APPLICATION_DATA, "version": TLS12, **kwargs}
        with pytest.raises(ValueError, match=rf"^{name} must be in 0\.\.{bound}$"):
            cipher.open(args["seq"], args["content_type"], args["version"], fragment)
    # the largest values are fine as header fields (the MAC check then fails, as it must)
    with pytest.raises(RECORD_CRYPTO_ERRORS, match="^bad record MAC$"):
        cipher.open(SEQ_MAX, 255, 0xFFFF, fragment)


def test_open_many_refuses_a_run_past_the_last_sequence_number(impl: Factory) -> None:
    cipher = impl("aes-128-cbc", "sha1", ENC_KEY, MAC_KEYS["sha1"])
    plain = b"last"
    record = cipher.seal(SEQ_MAX, APPLICATION_DATA, TLS12, plain, bytes(16))
    assert cipher.open_many(SEQ_MAX, APPLICATION_DATA, TLS12, [record]) == [plain]
    with pytest.raises(ValueError, match=r"^sequence number would exceed 2\^64-1$"):
        cipher.open_many(SEQ_MAX, APPLICATION_DATA, TLS12, [record, record])


def test_argument_type_errors_name_the_argument() -> None:
    """The twin names the argument (the C extension's parser says "argument 4"): TypeError
    either way, which is what the backends share."""
    cipher = PyRecordCipher("aes-128-cbc", "sha1", ENC_KEY, MAC_KEYS["sha1"])
    with pytest.raises(TypeError, match="^fragment must be bytes"):
        cipher.open(0, APPLICATION_DATA, TLS12, bytearray(48))
    with pytest.raises(TypeError, match="^fragments must be a list of bytes"):
        cipher.open_many(0, APPLICATION_DATA, TLS12, b"not a list")


# --- RecordReader ----------------------------------------------------------------------------------


SUITE = next(s for s, p in SUITES.items() if p.block_size and p.mac == "sha1" and p.key_length == 16)


def _keys(suite: CipherSuite = SUITE) -> DirectionKeys:
    p = SUITES[suite]
    return DirectionKeys(p, ENC_KEY[: p.key_length], MAC_KEYS[p.mac], b"")


def _header(ctype: int, version: int, length: int) -> bytes:
    return bytes([ctype, version >> 8, version & 0xFF, length >> 8, length & 0xFF])


def test_reader_accepts_the_last_sequence_number_and_refuses_to_wrap() -> None:
    """Sequence number 2^64-1 is the last one usable (RFC 5246 §6.1); after it the reader
    refuses rather than wrap to 0."""
    writer = WriteProtection(_keys(), seeded_rng(1), seq=SEQ_MAX)
    record = writer.seal(OutgoingRecord(APPLICATION_DATA, TLS12, SEQ_MAX, b"final"))
    reader = RecordReader()
    reader.set_keys(_keys(), seq=SEQ_MAX)
    reader.feed(record)
    assert reader.next_record() == (APPLICATION_DATA, b"final")
    reader.feed(record)
    with pytest.raises(RecordOverflow, match="^sequence number would wrap$"):
        reader.next_record()


def test_reader_length_bound_is_inclusive() -> None:
    """A record of exactly 2^14 + 2048 bytes is not record_overflow (it fails its MAC here);
    one byte more is, before the body has even arrived."""
    reader = RecordReader()
    reader.set_keys(_keys())
    reader.feed(_header(APPLICATION_DATA, TLS12, MAX_CIPHERTEXT) + bytes(MAX_CIPHERTEXT))
    with pytest.raises(BadRecordMAC, match="^bad record MAC$"):
        reader.next_record()
    reader = RecordReader()
    reader.feed(_header(APPLICATION_DATA, TLS12, MAX_CIPHERTEXT + 1))
    with pytest.raises(RecordOverflow, match=f"^record of {MAX_CIPHERTEXT + 1} bytes exceeds"):
        reader.next_record()


def test_reader_refuses_a_plaintext_longer_than_2_14() -> None:
    """Before keys, a record's fragment is its plaintext: 2^14 bytes pass, one more does not."""
    reader = RecordReader()
    reader.feed(_header(APPLICATION_DATA, TLS12, PLAINTEXT_MAX) + bytes(PLAINTEXT_MAX))
    assert reader.next_record() == (APPLICATION_DATA, bytes(PLAINTEXT_MAX))
    reader.feed(_header(APPLICATION_DATA, TLS12, PLAINTEXT_MAX + 1) + bytes(PLAINTEXT_MAX + 1))
    with pytest.raises(RecordOverflow, match=f"^plaintext of {PLAINTEXT_MAX + 1} bytes exceeds 2\\^14$"):
        reader.next_record()


@pytest.mark.parametrize("major", [0, 2, 4, 0xFE])
def test_reader_refuses_a_foreign_major_version_before_negotiation(major: int) -> None:
    """Before a version is agreed any 3.x record is taken, but not SSL 2, DTLS or garbage."""
    reader = RecordReader()
    version = (major << 8) | 3
    reader.feed(_header(22, version, 1) + b"\x00")
    with pytest.raises(ProtocolVersionError, match=f"^record version 0x{version:04x}$"):
        reader.next_record()


def test_reader_refuses_another_minor_version_after_negotiation() -> None:
    reader = RecordReader()
    reader.version = TLS12
    reader.feed(_header(22, 0x0301, 1) + b"\x00")
    with pytest.raises(ProtocolVersionError, match="^record version 0x0301$"):
        reader.next_record()


def test_reader_names_an_unknown_content_type() -> None:
    """Refused as soon as the first byte is in (even with less than a header buffered)."""
    reader = RecordReader()
    reader.feed(bytes([99, 3]))
    with pytest.raises(UnexpectedMessage, match="^unknown record content type 99$"):
        reader.next_record()
    reader = RecordReader()
    reader.feed(_header(98, TLS12, 0))
    with pytest.raises(UnexpectedMessage, match="^unknown record content type 98$"):
        reader.next_record()


def test_reader_turns_any_open_failure_into_bad_record_mac() -> None:
    writer = WriteProtection(_keys(), seeded_rng(2))
    record = bytearray(writer.seal(OutgoingRecord(APPLICATION_DATA, TLS12, 0, b"x" * 40)))
    record[-1] ^= 1
    reader = RecordReader()
    reader.set_keys(_keys())
    reader.feed(bytes(record))
    with pytest.raises(BadRecordMAC, match="^bad record MAC$"):
        reader.next_record()
