"""Online/offline signatures, the codec of the signature block, and the key pool with its refiller."""

from __future__ import annotations

import dataclasses
import time

import pytest

from reverse_ssl import onoff
from reverse_ssl.aio.pool import PoolRefiller, SignaturePool
from reverse_ssl.errors import BadOfflineSignature, ForgedOneTimeSignature
from reverse_ssl.ots import OTSScheme
from tests.reverse_ssl.rssl_helpers import server_credentials, token_factory
from tls12.buffer import Buffer, Writer
from tls12.certs import generate_self_signed
from tls12.errors import DecodeError
from tls12.testing import seeded_rng


def _roundtrip(sig: onoff.OnlineOfflineSignature) -> onoff.OnlineOfflineSignature:
    w = Writer()
    onoff.push_online_offline_signature(w, sig)
    raw = w.getvalue()
    buf = Buffer(raw)
    out = onoff.pull_online_offline_signature(buf)
    buf.expect_end()
    w2 = Writer()
    onoff.push_online_offline_signature(w2, out)
    assert w2.getvalue() == raw
    return out


@pytest.mark.parametrize("scheme", [OTSScheme.LAMPORT, OTSScheme.WINTERNITZ_16])
def test_online_offline_sign_verify(scheme: OTSScheme) -> None:
    key = server_credentials().private_key
    token = onoff.make_offline_token(key, seeded_rng(b"t"), scheme)
    sig = onoff.sign_online(token, b"M")
    assert _roundtrip(sig) == sig
    onoff.verify(key.public_key(), b"M", sig)
    with pytest.raises(ForgedOneTimeSignature):
        onoff.verify(key.public_key(), b"other message", sig)


def test_wrong_w_is_refused() -> None:
    key = server_credentials().private_key
    other = generate_self_signed("other", key_size=1024).private_key
    token = onoff.make_offline_token(other, seeded_rng(b"w"))
    sig = onoff.sign_online(token, b"M")
    with pytest.raises(BadOfflineSignature):
        onoff.verify(key.public_key(), b"M", sig)
    # a valid W over a *different* one-time key is also wrong
    good = onoff.sign_online(onoff.make_offline_token(key, seeded_rng(b"g")), b"M")
    swapped = dataclasses.replace(sig, offline_signature=good.offline_signature)
    with pytest.raises(BadOfflineSignature):
        onoff.verify(key.public_key(), b"M", swapped)


def test_rsa_fallback() -> None:
    key = server_credentials().private_key
    sig = onoff.sign_fallback(key, b"M")
    assert sig.scheme is OTSScheme.RSA_FALLBACK and _roundtrip(sig) == sig
    onoff.verify(key.public_key(), b"M", sig)
    with pytest.raises(BadOfflineSignature):
        onoff.verify(key.public_key(), b"N", sig)


def test_codec_rejects_inconsistent_blocks() -> None:
    key = server_credentials().private_key
    sig = onoff.sign_online(onoff.make_offline_token(key, seeded_rng(b"c")), b"M")
    for bad in (
        dataclasses.replace(sig, one_time_signature=sig.one_time_signature[:-32]),
        dataclasses.replace(sig, scheme=OTSScheme.WINTERNITZ_16),
        dataclasses.replace(sig, scheme=OTSScheme.RSA_FALLBACK),
    ):
        w = Writer()
        onoff.push_online_offline_signature(w, bad)
        with pytest.raises(DecodeError):
            onoff.pull_online_offline_signature(Buffer(w.getvalue()))


def test_pool_hands_out_each_token_once_and_counts() -> None:
    pool = SignaturePool(3)
    assert pool.fill(token_factory(server_credentials().private_key, b"pool")) == 3
    tokens = [pool.take() for _ in range(3)]
    assert len({id(t) for t in tokens}) == 3 and all(t is not None for t in tokens)
    assert pool.take() is None
    pool.record_fallback()
    m = pool.metrics()
    assert (m.size, m.produced, m.taken, m.exhausted, m.fallbacks) == (0, 3, 3, 1, 1)
    used = tokens[0]
    assert used is not None
    used.signer.sign(b"x")
    assert not pool.put(used)  # a used token never re-enters the pool


def test_refiller_fills_rate_limited_and_stops() -> None:
    pool = SignaturePool(5)
    factory = token_factory(server_credentials().private_key, b"refill", OTSScheme.WINTERNITZ_16)
    with PoolRefiller(pool, factory, max_rate=50.0, poll_interval=0.01) as refiller:
        deadline = time.monotonic() + 10
        while len(pool) < 5 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(pool) == 5
        assert pool.take() is not None
        while len(pool) < 5 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(pool) == 5
    assert refiller._thread is None
    m = pool.metrics()
    assert m.produced == 6 and m.refill_rate > 0
    with pytest.raises(ValueError):
        PoolRefiller(pool, factory, max_rate=0)


def test_refiller_respects_max_rate() -> None:
    pool = SignaturePool(100)
    factory = token_factory(server_credentials().private_key, b"rate", OTSScheme.WINTERNITZ_4)
    start = time.monotonic()
    with PoolRefiller(pool, factory, max_rate=20.0):
        time.sleep(0.5)
    elapsed = time.monotonic() - start
    assert 1 <= len(pool) <= 20.0 * elapsed + 2
