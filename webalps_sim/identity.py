"""The guardian's identity on disk: its key pair, its certificate request, its certified chain.

At its first start the guardian generates its RSA key pair in ``STATE/guardian.key`` (mode
0600; the key never leaves the guardian process) and writes a certificate request,
``STATE/guardian.csr``, carrying the measurement of the guardian program
(:mod:`webalps_sim.measure`).  Until the WebALPS CA has certified it
(``python -m webalps_sim.ca sign ... --out STATE/guardian-chain.pem``, see
:mod:`webalps_sim.ca`) the guardian refuses to serve (:class:`NotCertified`).  At every start
:func:`load_identity` checks that the certificate is for its own key and for the program it is
now running (same application, same measurement); a guardian whose code changed needs a new
certificate.  :func:`certify` does the CA's part and the guardian's at once for tests,
experiments and demos.

File I/O only (no sockets, no threads): the guardian process
(:mod:`webalps_sim.aio.guardian`) calls these before it serves.
"""

from __future__ import annotations

import os
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from .ca import CAError, guardian_identity, make_csr, sign_csr, write_chain
from .errors import WebAlpsError
from .measure import measure

__all__ = ["KEY_FILE", "CSR_FILE", "CHAIN_FILE", "NotCertified", "init_state", "load_identity",
           "certify"]

KEY_FILE = "guardian.key"
CSR_FILE = "guardian.csr"
CHAIN_FILE = "guardian-chain.pem"


class NotCertified(WebAlpsError):
    """The guardian has no certificate for its key and program (yet)."""


def init_state(state_dir: str | Path, app: str, key_size: int = 2048) -> Path:
    """Generate the key pair if there is none, and (re)write the certificate request."""
    d = Path(state_dir)
    d.mkdir(parents=True, exist_ok=True)
    key_path = d / KEY_FILE
    if key_path.exists():
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
        if not isinstance(key, rsa.RSAPrivateKey):
            raise NotCertified(f"{key_path} is not an RSA key")
    else:
        key = rsa.generate_private_key(public_exponent=65537, key_size=key_size)
        fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key.private_bytes(serialization.Encoding.PEM,
                                      serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))
    csr = make_csr(key, app, measure(app))
    (d / CSR_FILE).write_bytes(csr.public_bytes(serialization.Encoding.PEM))
    return d / CSR_FILE


def load_identity(state_dir: str | Path, app: str) -> tuple[rsa.RSAPrivateKey, tuple[bytes, ...], bytes]:
    """The key, the certified chain (DER) and the measurement; :class:`NotCertified` if unusable."""
    d = Path(state_dir)
    key = serialization.load_pem_private_key((d / KEY_FILE).read_bytes(), password=None)
    assert isinstance(key, rsa.RSAPrivateKey)
    chain_path = d / CHAIN_FILE
    if not chain_path.exists():
        raise NotCertified(
            f"no certificate yet: have {d / CSR_FILE} signed with `python -m webalps_sim.ca sign "
            f"--dir CA --csr {d / CSR_FILE} --app {app} --out {chain_path}`"
        )
    chain = x509.load_pem_x509_certificates(chain_path.read_bytes())
    leaf_key = chain[0].public_key()
    if not isinstance(leaf_key, rsa.RSAPublicKey) or leaf_key.public_numbers() != key.public_key().public_numbers():
        raise NotCertified(f"{chain_path} certifies another key")
    try:
        identity = guardian_identity(chain[0])
    except CAError as exc:
        raise NotCertified(f"{chain_path}: {exc}") from None
    measurement = measure(app)
    if identity.app != app or identity.measurement != measurement:
        raise NotCertified(
            f"{chain_path} certifies application {identity.app!r} with measurement "
            f"{identity.measurement.hex()[:16]}..., but this guardian runs {app!r} measuring "
            f"{measurement.hex()[:16]}...: have a new request signed"
        )
    der = tuple(c.public_bytes(serialization.Encoding.DER) for c in chain)
    return key, der, measurement


def certify(state_dir: str | Path, ca_dir: str | Path, app: str = "null",
            key_size: int = 2048) -> Path:
    """Guardian request + CA signature in one step (tests, experiments, demos); the chain's path."""
    csr_path = init_state(state_dir, app, key_size)
    csr = x509.load_pem_x509_csr(csr_path.read_bytes())
    chain_path = Path(state_dir) / CHAIN_FILE
    write_chain(sign_csr(ca_dir, csr, app), chain_path)
    return chain_path
