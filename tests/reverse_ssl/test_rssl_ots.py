"""One-time signatures: Lamport and Winternitz sign/verify, one-time use, forgery resistance."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reverse_ssl import ots
from reverse_ssl.errors import OneTimeKeyReused
from reverse_ssl.ots import OTSScheme
from tls12.testing import seeded_rng

SCHEMES = [OTSScheme.LAMPORT, OTSScheme.WINTERNITZ_4, OTSScheme.WINTERNITZ_16, OTSScheme.WINTERNITZ_256]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_sign_verify_and_sizes(scheme: OTSScheme) -> None:
    signer = ots.keygen(scheme, seeded_rng(b"k" + bytes([scheme])))
    sig = signer.sign(b"transcript hash")
    assert len(signer.public_key) == ots.public_key_size(scheme)
    assert len(sig) == ots.signature_size(scheme)
    assert ots.verify(scheme, signer.public_key, b"transcript hash", sig)
    assert not ots.verify(scheme, signer.public_key, b"transcript hasH", sig)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_second_signature_is_refused(scheme: OTSScheme) -> None:
    signer = ots.keygen(scheme, seeded_rng(b"reuse"))
    signer.sign(b"first")
    assert signer.used
    with pytest.raises(OneTimeKeyReused):
        signer.sign(b"second")


def test_lamport_signature_reveals_exactly_the_selected_secrets() -> None:
    signer = ots.lamport_keygen(seeded_rng(b"reveal"))
    sig = signer.sign(b"m")
    import hashlib

    bits = int.from_bytes(hashlib.sha256(b"m").digest(), "big")
    for i in (0, 17, 255):
        assert sig[i * 32 : (i + 1) * 32] == signer.reveal(i, (bits >> (255 - i)) & 1)


def test_winternitz_sizes_are_compact() -> None:
    p = ots.winternitz_params(16)
    assert (p.l1, p.l2) == (64, 3)
    assert ots.public_key_size(OTSScheme.WINTERNITZ_16) * 7 < ots.public_key_size(OTSScheme.LAMPORT)


@settings(max_examples=50, deadline=None)
@given(st.binary(min_size=32, max_size=32), st.integers(0, 63))
def test_winternitz_checksum_blocks_advancing_a_chain(digest: bytes, position: int) -> None:
    """Raising a message digit (hashing its chain forward, which anyone can do) lowers a checksum digit.

    Lowering would need a pre-image of the hash, so no signature for the
    raised digest can be derived from the signature of the original one.
    """
    p = ots.winternitz_params(16)
    before = ots._digits(digest, p)
    if before[position] == 15:
        return
    shift = 4 * (63 - position)
    raised = (int.from_bytes(digest, "big") + (1 << shift)).to_bytes(32, "big")
    after = ots._digits(raised, p)
    assert after[position] == before[position] + 1
    assert ots._digit_array(raised, p).tolist() == after  # the vectorised online path agrees
    assert any(a < b for a, b in zip(after[p.l1 :], before[p.l1 :], strict=True))


@settings(max_examples=25, deadline=None)
@given(st.binary(max_size=200), st.integers(0, 8191), st.integers(0, 7))
def test_any_bit_flip_breaks_a_lamport_signature(message: bytes, byte: int, bit: int) -> None:
    signer = ots.lamport_keygen(seeded_rng(message + b"x"))
    sig = bytearray(signer.sign(message))
    sig[byte] ^= 1 << bit
    assert not ots.lamport_verify(signer.public_key, message, bytes(sig))


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(SCHEMES), st.binary(max_size=64), st.binary(max_size=64))
def test_signature_of_one_message_does_not_verify_another(scheme: OTSScheme, a: bytes, b: bytes) -> None:
    signer = ots.keygen(scheme, seeded_rng(a + b))
    sig = signer.sign(a)
    assert ots.verify(scheme, signer.public_key, a, sig)
    assert ots.verify(scheme, signer.public_key, b, sig) == (a == b)


def test_wrong_lengths_never_verify() -> None:
    signer = ots.lamport_keygen(seeded_rng(b"len"))
    sig = signer.sign(b"m")
    assert not ots.lamport_verify(signer.public_key[:-1], b"m", sig)
    assert not ots.lamport_verify(signer.public_key, b"m", sig + b"\x00")
    assert not ots.verify(OTSScheme.RSA_FALLBACK, signer.public_key, b"m", sig)


def test_bad_parameters_fail_at_construction() -> None:
    with pytest.raises(ValueError):
        ots.winternitz_params(8)
    with pytest.raises(ValueError):
        ots.keygen(OTSScheme.RSA_FALLBACK, seeded_rng(b""))
    with pytest.raises(ValueError):
        ots.lamport_keygen(lambda n: b"short")
