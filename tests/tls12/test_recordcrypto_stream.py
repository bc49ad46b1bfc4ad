"""``RecordCipher.seal_stream``: whole records with random explicit IVs (OpenSSL's multi-block pass).

The C class seals runs of 4 or 8 full records in one interleaved pass of the stitched cipher,
which draws the IVs itself, so no two implementations give the same bytes.  What is checked
instead, at every length boundary: the records have the headers and sizes the deterministic
path gives them, and each one, opened by the C class (stitched and generic) and by the Python
twin *and* by a reference built here from primitives, gives back its slice of the input under
its own sequence number, with the exact MAC of that slice.  A flipped bit anywhere fails.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Callable
from typing import Any

import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from hypothesis import given, settings
from hypothesis import strategies as st

from tls12.config import ClientConfig, ServerConfig
from tls12.record import ContentType, DirectionKeys, OutgoingRecord, RecordReader, WriteProtection
from tls12.recordcrypto import PLAINTEXT_MAX, RECORD_CRYPTO_ERRORS, CRecordCipher, PyRecordCipher
from tls12.suites import SUITES, CipherSuite
from tls12.testing import seeded_rng

AES_COMBOS = [(c, m) for c in ("aes-128-cbc", "aes-256-cbc") for m in ("sha1", "sha256")]
KEY_LENGTHS = {"aes-128-cbc": 16, "aes-256-cbc": 32, "null": 0}
MAC_LENGTHS = {"sha1": 20, "sha256": 32}
TLS12, APP = 0x0303, 23
R = PLAINTEXT_MAX
LENGTHS = [0, 1, R - 1, R, R + 1, 3 * R, 4 * R - 1, 4 * R, 4 * R + 1, 5 * R - 1, 7 * R + 5,
           8 * R, 8 * R + 1, 9 * R, 12 * R, 12 * R + R - 1, 16 * R, 17 * R + 3]

assert CRecordCipher is not None, "the C extension is built by make build / .ci/run"
Factory = Callable[..., Any]
SEALERS: dict[str, Factory] = {
    "c-multiblock": lambda *a: CRecordCipher(*a),  # type: ignore[misc]
    "c-stitched-single": lambda *a: CRecordCipher(*a, multiblock=False),  # type: ignore[misc]
    "c-generic": lambda *a: CRecordCipher(*a, stitched=False),  # type: ignore[misc]
    "python": lambda *a: PyRecordCipher(*a),
}


def _keys(cipher: str, mac: str) -> tuple[bytes, bytes]:
    return os.urandom(KEY_LENGTHS[cipher]), os.urandom(MAC_LENGTHS[mac])


def _records(wire: bytes) -> list[tuple[bytes, bytes]]:
    """(header, fragment) of every record in ``wire``, which must be whole records."""
    out, pos = [], 0
    while pos < len(wire):
        length = int.from_bytes(wire[pos + 3 : pos + 5], "big")
        out.append((wire[pos : pos + 5], wire[pos + 5 : pos + 5 + length]))
        pos += 5 + length
    assert pos == len(wire)
    return out


def _reference_open(cipher: str, mac: str, enc_key: bytes, mac_key: bytes, seq: int,
                    fragment: bytes) -> tuple[bytes, bytes, bytes]:
    """(plaintext, MAC found, MAC expected) of a minimally padded fragment, from primitives."""
    iv, body = fragment[:16], fragment[16:]
    data = Cipher(algorithms.AES(enc_key), modes.CBC(iv)).decryptor().update(body)
    pad = data[-1]
    assert data[-pad - 1 :] == bytes((pad,)) * (pad + 1) and pad < 16, "minimal padding"
    n = MAC_LENGTHS[mac]
    plaintext, found = data[: -pad - 1 - n], data[-pad - 1 - n : -pad - 1]
    header = seq.to_bytes(8, "big") + bytes((APP, 3, 3)) + len(plaintext).to_bytes(2, "big")
    expected = hmac.new(mac_key, header + plaintext, getattr(hashlib, mac)).digest()
    return plaintext, found, expected


def _check_stream(cipher: str, mac: str, keys: tuple[bytes, bytes], seq: int, data: bytes,
                  wire: bytes) -> list[tuple[bytes, bytes]]:
    """Every record of ``wire`` opens, four ways, to its slice of ``data`` at seq + i."""
    records = _records(wire)
    pieces = [data[i : i + R] for i in range(0, len(data), R)]
    assert len(records) == len(pieces)
    deterministic = PyRecordCipher(cipher, mac, *keys)
    openers = [CRecordCipher(cipher, mac, *keys), CRecordCipher(cipher, mac, *keys, stitched=False),  # type: ignore[misc]
               PyRecordCipher(cipher, mac, *keys)]
    for i, ((header, fragment), piece) in enumerate(zip(records, pieces, strict=True)):
        same_size = deterministic.seal(seq + i, APP, TLS12, piece, bytes(16))
        assert header == bytes((APP, 3, 3)) + len(same_size).to_bytes(2, "big")
        assert len(fragment) == len(same_size)
        for opener in openers:
            assert opener.open(seq + i, APP, TLS12, fragment) == piece
        plaintext, found, expected = _reference_open(cipher, mac, *keys, seq + i, fragment)
        assert plaintext == piece and found == expected
    ivs = [fragment[:16] for _, fragment in records]
    assert len(set(ivs)) == len(ivs), "every record has its own random IV"
    return records


@pytest.mark.parametrize("cipher,mac", AES_COMBOS)
def test_the_stitched_cipher_has_the_multiblock_path(cipher: str, mac: str) -> None:
    c = CRecordCipher(cipher, mac, *_keys(cipher, mac))  # type: ignore[misc]
    assert c.multiblock == c.stitched  # AES-NI machines have both (this one: aes, avx2)
    assert not CRecordCipher(cipher, mac, *_keys(cipher, mac), multiblock=False).multiblock  # type: ignore[misc]
    assert not PyRecordCipher(cipher, mac, *_keys(cipher, mac)).multiblock


@pytest.mark.parametrize("length", LENGTHS)
@pytest.mark.parametrize("sealer", SEALERS)
@pytest.mark.parametrize("cipher,mac", AES_COMBOS)
def test_seal_stream_records_open_at_every_boundary(cipher: str, mac: str, sealer: str, length: int) -> None:
    keys, data, seq = _keys(cipher, mac), os.urandom(length), 2**32 - 6  # a carry inside the runs
    wire = SEALERS[sealer](cipher, mac, *keys).seal_stream(seq, APP, TLS12, data)
    _check_stream(cipher, mac, keys, seq, data, wire)


@pytest.mark.parametrize("cipher,mac", AES_COMBOS)
def test_a_flipped_bit_anywhere_in_a_multiblock_record_fails_to_open(cipher: str, mac: str) -> None:
    keys, data = _keys(cipher, mac), os.urandom(8 * R)
    records = _records(CRecordCipher(cipher, mac, *keys).seal_stream(9, APP, TLS12, data))  # type: ignore[misc]
    openers = [CRecordCipher(cipher, mac, *keys), CRecordCipher(cipher, mac, *keys, stitched=False),  # type: ignore[misc]
               PyRecordCipher(cipher, mac, *keys)]
    fragment = records[5][1]
    for offset in (0, 15, 16, 100, R, len(fragment) - 40, len(fragment) - 17, len(fragment) - 1):
        bad = bytearray(fragment)
        bad[offset] ^= 0x01
        for opener in openers:
            with pytest.raises(RECORD_CRYPTO_ERRORS):
                opener.open(9 + 5, APP, TLS12, bytes(bad))
    for opener in openers:  # the MAC binds the sequence number and the type
        with pytest.raises(RECORD_CRYPTO_ERRORS):
            opener.open(9 + 4, APP, TLS12, fragment)
        with pytest.raises(RECORD_CRYPTO_ERRORS):
            opener.open(9 + 5, 22, TLS12, fragment)


@settings(max_examples=40, deadline=None)
@given(length=st.integers(0, 18 * R), seq=st.sampled_from([0, 1, 250, 2**16 - 3, 2**40 - 1]),
       combo=st.sampled_from(AES_COMBOS))
def test_seal_stream_over_lengths(length: int, seq: int, combo: tuple[str, str]) -> None:
    keys, data = _keys(*combo), os.urandom(length)
    for sealer in ("c-multiblock", "python"):
        wire = SEALERS[sealer](*combo, *keys).seal_stream(seq, APP, TLS12, data)
        _check_stream(*combo, keys, seq, data, wire)


@pytest.mark.parametrize("sealer", SEALERS)
def test_seal_stream_arguments_are_checked_alike(sealer: str) -> None:
    c = SEALERS[sealer]("aes-128-cbc", "sha1", *_keys("aes-128-cbc", "sha1"))
    with pytest.raises(ValueError, match="TLS 1.1"):
        c.seal_stream(0, APP, 0x0301, b"x")
    with pytest.raises(ValueError, match="2\\^64-1"):
        c.seal_stream(2**64 - 4, APP, TLS12, bytes(4 * R + 1))
    assert len(_records(c.seal_stream(2**64 - 5, APP, TLS12, bytes(4 * R + 1)))) == 5
    with pytest.raises(TypeError):
        c.seal_stream(0, APP, TLS12, bytearray(3))
    with pytest.raises(ValueError):
        SEALERS[sealer]("aes-128-cbc", "sha1", bytes(16), b"").seal_stream(0, APP, TLS12, b"x")
    assert c.seal_stream(0, APP, TLS12, b"") == b""


@pytest.mark.parametrize("sealer", SEALERS)
def test_seal_stream_on_the_null_cipher_has_no_iv(sealer: str) -> None:
    mac_key = os.urandom(20)
    wire = SEALERS[sealer]("null", "sha1", b"", mac_key).seal_stream(3, APP, TLS12, bytes(5 * R + 2))
    opener = PyRecordCipher("null", "sha1", b"", mac_key)
    assert [opener.open(3 + i, APP, TLS12, f) for i, (_, f) in enumerate(_records(wire))] == \
        [bytes(R)] * 5 + [bytes(2)]


# -- WriteProtection and the configs ---------------------------------------------------------------


def _direction(suite: CipherSuite) -> DirectionKeys:
    p = SUITES[suite]
    return DirectionKeys(p, os.urandom(p.key_length), os.urandom(p.mac_length), b"", os.urandom(16))


def _outgoing(data: bytes, seq: int = 0) -> list[OutgoingRecord]:
    return [OutgoingRecord(APP, TLS12, seq + i // R, data[i : i + R]) for i in range(0, len(data), R)]


def test_write_protection_with_random_ivs_seals_bulk_data_in_one_stream() -> None:
    keys, data = _direction(CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA), os.urandom(13 * R + 7)
    random = WriteProtection(keys, os.urandom, random_ivs=True).seal_many(_outgoing(data))
    fixed = WriteProtection(keys, os.urandom).seal_many(_outgoing(data))
    assert [len(f) for _, f in _records(random)] == [len(f) for _, f in _records(fixed)]
    assert random != fixed  # k' does not make these IVs
    reader = RecordReader()
    reader.set_keys(keys)
    reader.feed(random)
    got = [reader.next_record() for _ in range(14)]
    assert b"".join(p for _, p in got) == data and reader.next_record() is None  # type: ignore[misc]


def test_without_random_ivs_the_records_stay_reproducible() -> None:
    keys, data = _direction(CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA), os.urandom(9 * R)
    a = WriteProtection(keys, os.urandom).seal_many(_outgoing(data, 40))
    assert a == WriteProtection(keys, os.urandom).seal_many(_outgoing(data, 40))
    assert not WriteProtection(keys, os.urandom).random_ivs


def test_random_ivs_seal_handshake_records_and_odd_cuts_alike() -> None:
    keys = _direction(CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA)
    w = WriteProtection(keys, os.urandom, random_ivs=True)
    handshake = [OutgoingRecord(ContentType.HANDSHAKE, TLS12, i, bytes(R)) for i in range(5)]
    odd = [OutgoingRecord(APP, TLS12, i, bytes(100 + i)) for i in range(5)]
    for records in (handshake, odd):
        reader = RecordReader()
        reader.set_keys(keys)
        reader.feed(w.seal_many(records))
        assert [reader.next_record() for _ in records] == [(r.content_type, r.plaintext) for r in records]


def test_random_ivs_need_the_system_rng(credentials: Any) -> None:
    with pytest.raises(ValueError, match="system rng"):
        ServerConfig(credentials=credentials, rng=seeded_rng(1), random_ivs=True)
    with pytest.raises(ValueError, match="system rng"):
        ClientConfig(rng=seeded_rng(1), random_ivs=True)
    assert ServerConfig(credentials=credentials, random_ivs=True).random_ivs
    assert not ServerConfig(credentials=credentials).random_ivs
