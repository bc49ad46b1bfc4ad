"""Shared pieces of the Barnraising tests: a site, a registry on a temporary database."""

from __future__ import annotations

import datetime
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from sslsplit.barnraising.registry import Registry, SiteConfig
from tls12.certs import Credentials

SITE = SiteConfig("news/front", ("127.0.0.1", 8443), ("127.0.0.1", 8444),
                  ("www.news.test",), {"memory_mb": 64}, "origin-secret")


def registry(path: Path | str = ":memory:", **options: object) -> Registry:
    """A registry serving :data:`SITE` (ids 000...1, 000...2, ... so tests can name them)."""
    counter = iter(range(1, 1 << 30))
    options.setdefault("new_id", lambda: f"{next(counter):032x}")
    return Registry([SITE], path, **options)  # type: ignore[arg-type]


def site_credentials(*names: str) -> Credentials:
    """A self-signed CA certificate for ``names`` (wildcards allowed; the first is the CN), the
    site's own credentials in the feedback-loop tests (``*.mirror.`` covers the redirects)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    return Credentials((cert,), key)
