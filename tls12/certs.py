"""Certificates and keys for servers: loading PEM files and making self-signed ones.

The testbed's servers accept ``--cert``/``--key``; when none are given they
call :func:`generate_self_signed` so that a fresh checkout can serve HTTPS at
once.  Clients in the tests do not verify the chain (``curl -k``,
``CERT_NONE``) -- the protocols under study are about record integrity and
handshake cost, not PKI.
"""

from __future__ import annotations

import datetime
import functools
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

__all__ = ["Credentials", "generate_self_signed", "self_signed_certificate", "load_credentials", "write_credentials", "peer_rsa_key"]


@dataclass(frozen=True)
class Credentials:
    """A certificate chain (leaf first) and the leaf's RSA private key.

    ``private_key`` is ``None`` for a server that holds the chain only and lets a
    session delegate (:mod:`tls12.delegate`) use the key elsewhere -- the WebALPS
    host, whose guardian process keeps the key (:meth:`chain_only`).
    """

    chain: tuple[x509.Certificate, ...]
    private_key: rsa.RSAPrivateKey | None

    @classmethod
    def chain_only(cls, chain: tuple[x509.Certificate, ...] | list[x509.Certificate]) -> Credentials:
        """Credentials with a certificate chain and no private key (a delegated server)."""
        if not chain:
            raise ValueError("a certificate chain needs at least one certificate")
        return cls(tuple(chain), None)

    @functools.cached_property
    def chain_der(self) -> list[bytes]:
        """The chain in DER, as the Certificate message carries it (computed once)."""
        return [c.public_bytes(serialization.Encoding.DER) for c in self.chain]


#: A fixed serial (159 bits, 20 bytes in DER) for simulations that charge link time per byte:
#: a random serial is one DER byte shorter about once in 256 draws, and so is the certificate.
SIM_SERIAL = (1 << 158) | 0x5157E


def self_signed_certificate(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey,
                            common_name: str = "localhost", days: int = 365, *,
                            serial: int | None = None) -> x509.Certificate:
    """A self-signed certificate for ``key`` (RSA or EC) naming ``common_name``, localhost, 127.0.0.1.

    ``common_name`` goes into the subject alternative names as an IP address when it is one
    (a client checking ``https://10.77.2.2/`` looks for an IP-address SAN), else as a DNS name.
    Valid from five minutes ago (clock skew between processes) for ``days`` days, SHA-256
    signature, CA:true so that clients given it as their trust anchor accept it.

    ``serial`` defaults to a random one, whose DER length varies (a 159-bit draw below 2**151
    is one byte shorter, about 1 in 256): pass a fixed serial where the certificate's size
    must be reproducible, as in a simulation that charges link time per byte (:data:`SIM_SERIAL`).
    """
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.UTC)
    try:
        own: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(common_name))
    except ValueError:
        own = x509.DNSName(common_name)
    sans: list[x509.GeneralName] = [own]
    for other in (x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))):
        if other not in sans:
            sans.append(other)
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number() if serial is None else serial)
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )


def generate_self_signed(
    common_name: str = "localhost", key_size: int = 2048, days: int = 365, *,
    serial: int | None = None
) -> Credentials:
    """A fresh RSA key and a self-signed certificate for ``common_name``, localhost and 127.0.0.1
    (``serial``: as :func:`self_signed_certificate`)."""
    if key_size < 512:
        raise ValueError("key_size must be at least 512 bits")
    key = rsa.generate_private_key(public_exponent=65537, key_size=key_size)
    return Credentials((self_signed_certificate(key, common_name, days, serial=serial),), key)


def load_credentials(cert_path: str | Path, key_path: str | Path) -> Credentials:
    """Load a PEM certificate chain and a PEM RSA private key (unencrypted)."""
    chain = tuple(x509.load_pem_x509_certificates(Path(cert_path).read_bytes()))
    if not chain:
        raise ValueError(f"no certificate in {cert_path}")
    key = serialization.load_pem_private_key(Path(key_path).read_bytes(), password=None)
    if not isinstance(key, rsa.RSAPrivateKey):
        raise ValueError(f"{key_path}: only RSA keys are supported (RSA and ECDHE_RSA suites)")
    return Credentials(chain, key)


def write_credentials(creds: Credentials, cert_path: str | Path, key_path: str | Path) -> None:
    """Write ``creds`` as PEM files (for peers such as ``openssl s_server`` or nginx)."""
    if creds.private_key is None:
        raise ValueError("these credentials hold a certificate chain and no private key")
    Path(cert_path).write_bytes(
        b"".join(c.public_bytes(serialization.Encoding.PEM) for c in creds.chain)
    )
    Path(key_path).write_bytes(
        creds.private_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )


def peer_rsa_key(chain: tuple[bytes, ...] | list[bytes], who: str = "server", min_bits: int = 512) -> rsa.RSAPublicKey:
    """The RSA public key of a peer's leaf certificate (DER), or :class:`tls12.errors.BadCertificate`.

    Any parse failure of this untrusted input -- a truncated certificate, an
    unknown key type, a key that is not RSA or too small -- is a bad certificate.
    """
    from .errors import BadCertificate

    if not chain:
        raise BadCertificate(f"{who} sent no certificate")
    try:
        key = x509.load_der_x509_certificate(chain[0]).public_key()
    except Exception as exc:  # noqa: BLE001 - any parse failure of peer input is a bad certificate
        raise BadCertificate(f"cannot parse the {who} certificate: {exc}") from None
    if not isinstance(key, rsa.RSAPublicKey):
        raise BadCertificate(f"the {who} certificate does not carry an RSA key")
    if key.key_size < min_bits:
        raise BadCertificate(f"{who} RSA key of {key.key_size} bits is too small")
    return key
