"""PRF and key schedule: published vectors and OpenSSL's TLS1-PRF as independent references."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tls12 import prf

VECTORS = Path(__file__).parent.parent / "vectors" / "tls12" / "prf_sha256.json"


def test_published_prf_vector() -> None:
    for case in json.loads(VECTORS.read_text())["cases"]:
        out = prf.prf(
            bytes.fromhex(case["secret"]), case["label"].encode(), bytes.fromhex(case["seed"]), len(case["output"]) // 2
        )
        assert out.hex() == case["output"]


def _openssl_prf(secret: bytes, label: bytes, seed: bytes, length: int) -> bytes:
    out = subprocess.run(
        [
            "openssl", "kdf", "-keylen", str(length), "-kdfopt", "digest:SHA256",
            "-kdfopt", f"hexsecret:{secret.hex()}", "-kdfopt", f"hexseed:{(label + seed).hex()}", "TLS1-PRF",
        ],
        capture_output=True, text=True, check=True, timeout=30,
    ).stdout
    return bytes.fromhex(out.strip().replace(":", ""))


@settings(max_examples=15, deadline=None)
@given(
    secret=st.binary(min_size=1, max_size=64),
    seed=st.binary(min_size=1, max_size=80),
    length=st.integers(min_value=1, max_value=200),
)
def test_prf_matches_openssl(secret: bytes, seed: bytes, length: int) -> None:
    assert prf.prf(secret, b"key expansion", seed, length) == _openssl_prf(secret, b"key expansion", seed, length)


def test_key_block_layout_and_master_secret_label() -> None:
    master = bytes(range(48))
    cr, sr = b"c" * 32, b"s" * 32
    kb = prf.key_block(master, cr, sr, mac_length=20, key_length=16, iv_length=16)
    raw = _openssl_prf(master, b"key expansion", sr + cr, 2 * (20 + 16 + 16))
    assert kb.client_mac_key + kb.server_mac_key + kb.client_key + kb.server_key + kb.client_iv + kb.server_iv == raw
    assert prf.master_secret(b"p" * 48, cr, sr) == _openssl_prf(b"p" * 48, b"master secret", cr + sr, 48)
    assert prf.extended_master_secret(b"p" * 48, b"h" * 32) == _openssl_prf(
        b"p" * 48, b"extended master secret", b"h" * 32, 48
    )
    assert len(prf.verify_data(master, True, b"h" * 32)) == 12
    assert prf.verify_data(master, True, b"h" * 32) != prf.verify_data(master, False, b"h" * 32)
