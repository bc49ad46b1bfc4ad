"""Shared fixtures for the SINE tests: signing keys, generated once per session."""

from __future__ import annotations

import pytest

from sine.algorithms import SigAlg, SigningKey


@pytest.fixture(scope="session")
def ed_key() -> SigningKey:
    return SigningKey.generate(SigAlg.ED25519)


@pytest.fixture(scope="session")
def rsa_key() -> SigningKey:
    return SigningKey.generate(SigAlg.RSA_PSS_SHA256)


@pytest.fixture(scope="session")
def ec_key() -> SigningKey:
    return SigningKey.generate(SigAlg.ECDSA_P256_SHA256)
