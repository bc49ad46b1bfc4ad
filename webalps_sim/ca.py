"""A small WebALPS certificate authority: certifies guardian keys bound to a measured program.

The paper's WebALPS CA (``webalps.md`` §3.2.2, Figure 2) issues an SSL certificate for a
guardian's key pair only after the coprocessor proved that the key belongs to an installation of
a guardian program the CA has evaluated.  Here:

1. ``python -m webalps_sim.ca init --dir CA`` makes the CA: an RSA key (``CA/ca.key``) and a
   self-signed CA certificate (``CA/ca.pem``) -- what clients trust (``curl --cacert CA/ca.pem``);
2. the guardian, at its first start, generates its key pair and writes a certificate request
   (``STATE/guardian.csr``) that carries the guardian's measurement (:mod:`webalps_sim.measure`)
   in the :data:`MEASUREMENT_OID` extension;
3. ``python -m webalps_sim.ca sign --dir CA --csr STATE/guardian.csr --app APP --out
   STATE/guardian-chain.pem`` checks the request's signature (the guardian holds the key),
   recomputes the measurement of the guardian program for ``APP`` from the sources the CA
   evaluated, refuses a request whose measurement differs, and issues a leaf certificate for
   ``localhost`` / ``127.0.0.1`` (``--host`` adds names) that repeats the measurement in the same
   extension; ``--out`` gets the leaf and the CA certificate (the chain the host presents).

The extension (non-critical, so unmodified clients accept the certificate) is the DER of
``SEQUENCE { UTF8String application, OCTET STRING measurement }`` under an OID in the example
arc ``2.999`` of X.660 (reserved for examples and testbeds: it collides with no registered OID; a
deployment would use its own enterprise arc). Every arc fits in 64 bits: GnuTLS's libtasn1
refuses wider ones, and a UUID-derived ``2.25.<128-bit>`` OID made ``gnutls-cli`` and ``wget``
reject the whole certificate although the extension is non-critical.  :func:`guardian_identity` reads it back.  Stand-in for the
4758: the "proof" that the key lives in the measured guardian is the CA's trust in the operator
who ran the guardian -- nothing here is tamper-responding hardware.
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from .app import AppUnavailable
from .errors import WebAlpsError
from .measure import measure

__all__ = [
    "MEASUREMENT_OID",
    "CAError",
    "GuardianIdentity",
    "measurement_extension",
    "guardian_identity",
    "init_ca",
    "make_csr",
    "sign_csr",
    "main",
]

MEASUREMENT_OID = x509.ObjectIdentifier("2.999.4758.1")
"""The guardian-measurement extension: X.660's example arc, ``4758`` after the coprocessor the
paper ran on, ``1`` for the measurement; every arc under 2**64 so that every ASN.1 parser reads
it (:mod:`webalps_sim.ca`)."""


class CAError(WebAlpsError):
    """The CA refuses: bad request signature, unknown or mismatching measurement, no CA."""


@dataclass(frozen=True)
class GuardianIdentity:
    """What a guardian certificate (or request) says about the program holding the key."""

    app: str
    measurement: bytes


def _der_len(n: int) -> bytes:
    if n < 0x80:
        return bytes([n])
    body = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(body)]) + body


def measurement_extension(app: str, measurement: bytes) -> x509.UnrecognizedExtension:
    """The extension that binds ``app`` and its ``measurement`` (DER, see the module docstring)."""
    name = app.encode()
    inner = b"\x0c" + _der_len(len(name)) + name + b"\x04" + _der_len(len(measurement)) + measurement
    return x509.UnrecognizedExtension(MEASUREMENT_OID, b"\x30" + _der_len(len(inner)) + inner)


def _parse_tlv(data: bytes, pos: int, tag: int) -> tuple[bytes, int]:
    if pos + 2 > len(data) or data[pos] != tag:
        raise CAError("malformed guardian-measurement extension")
    length, pos = data[pos + 1], pos + 2
    if length & 0x80:
        width = length & 0x7F
        length = int.from_bytes(data[pos : pos + width], "big")
        pos += width
    if pos + length > len(data):
        raise CAError("malformed guardian-measurement extension")
    return data[pos : pos + length], pos + length


def guardian_identity(obj: x509.Certificate | x509.CertificateSigningRequest) -> GuardianIdentity:
    """The application and measurement a guardian certificate or request carries."""
    try:
        ext = obj.extensions.get_extension_for_oid(MEASUREMENT_OID).value
    except x509.ExtensionNotFound:
        raise CAError("no guardian-measurement extension") from None
    raw = ext.value  # type: ignore[attr-defined]  # the measurement extension is an UnrecognizedExtension
    inner, end = _parse_tlv(raw, 0, 0x30)
    if end != len(raw):
        raise CAError("malformed guardian-measurement extension")
    name, pos = _parse_tlv(inner, 0, 0x0C)
    measurement, pos = _parse_tlv(inner, pos, 0x04)
    if pos != len(inner):
        raise CAError("malformed guardian-measurement extension")
    return GuardianIdentity(name.decode("utf-8", "replace"), measurement)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def init_ca(directory: str | Path, name: str = "WebALPS CA", key_size: int = 2048) -> Path:
    """Create the CA key and self-signed certificate in ``directory``; returns ``ca.pem``'s path."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    if (d / "ca.key").exists():
        raise CAError(f"{d} already holds a CA (ca.key)")
    key = rsa.generate_private_key(public_exponent=65537, key_size=key_size)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    cert = (
        x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(_now() - datetime.timedelta(minutes=5))
        .not_valid_after(_now() + datetime.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False),
                       critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_path = d / "ca.key"
    key_path.touch(mode=0o600)
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    (d / "ca.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return d / "ca.pem"


def make_csr(key: rsa.RSAPrivateKey, app: str, measurement: bytes) -> x509.CertificateSigningRequest:
    """The guardian's certificate request: its public key and its measurement, self-signed."""
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"WebALPS guardian ({app})")])
    return (
        x509.CertificateSigningRequestBuilder().subject_name(subject)
        .add_extension(measurement_extension(app, measurement), critical=False)
        .sign(key, hashes.SHA256())
    )


def sign_csr(directory: str | Path, csr: x509.CertificateSigningRequest, app: str,
             hosts: tuple[str, ...] = ("localhost", "127.0.0.1"), days: int = 365,
             expected: bytes | None = None) -> list[x509.Certificate]:
    """Check ``csr`` and issue the guardian certificate: ``[leaf, CA certificate]``.

    ``expected`` is the measurement the CA accepts; by default the one it computes for ``app``
    from the guardian sources it holds (:func:`webalps_sim.measure.measure`).
    """
    d = Path(directory)
    try:
        ca_key = serialization.load_pem_private_key((d / "ca.key").read_bytes(), password=None)
        ca_cert = x509.load_pem_x509_certificate((d / "ca.pem").read_bytes())
    except FileNotFoundError:
        raise CAError(f"no CA in {d}: run `python -m webalps_sim.ca init --dir {d}`") from None
    if not csr.is_signature_valid:
        raise CAError("the request's signature is invalid: its sender does not hold the key")
    identity = guardian_identity(csr)
    if identity.app != app:
        raise CAError(f"the request is for application {identity.app!r}, not {app!r}")
    try:
        want = measure(app) if expected is None else expected
    except AppUnavailable as exc:
        raise CAError(str(exc)) from None
    if identity.measurement != want:
        raise CAError(f"measurement {identity.measurement.hex()} is not the evaluated guardian "
                      f"program's {want.hex()}: refusing to certify")
    names: list[x509.GeneralName] = []
    for h in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            names.append(x509.DNSName(h))
    leaf = (
        x509.CertificateBuilder().subject_name(csr.subject).issuer_name(ca_cert.subject)
        .public_key(csr.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(_now() - datetime.timedelta(minutes=5))
        .not_valid_after(_now() + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(True, False, True, False, False, False, False, False, False),
                       critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_cert.public_key()),  # type: ignore[arg-type]  # the CA key is RSA or EC
                       critical=False)
        .add_extension(measurement_extension(app, identity.measurement), critical=False)
        .sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]  # the CA key is RSA or EC
    )
    return [leaf, ca_cert]


def write_chain(chain: list[x509.Certificate], path: str | Path) -> None:
    Path(path).write_bytes(b"".join(c.public_bytes(serialization.Encoding.PEM) for c in chain))


def build_parser() -> argparse.ArgumentParser:
    from testbed.cli import program_name  # here: the guardian imports this module, not testbed

    parser = argparse.ArgumentParser(prog=program_name("webalps_sim.ca"),
                                     description="The WebALPS CA: certifies measured guardians.")
    sub = parser.add_subparsers(dest="command", required=True)
    init = sub.add_parser("init", help="create the CA key and certificate")
    init.add_argument("--dir", required=True, type=Path, help="directory for ca.key and ca.pem")
    init.add_argument("--name", default="WebALPS CA", help="the CA's common name")
    sign = sub.add_parser("sign", help="certify a guardian's request")
    sign.add_argument("--dir", required=True, type=Path, help="the CA directory")
    sign.add_argument("--csr", required=True, type=Path, help="the guardian's guardian.csr")
    sign.add_argument("--app", default="null", help="the guardian application evaluated")
    sign.add_argument("--out", required=True, type=Path, help="where to write leaf + CA PEM")
    sign.add_argument("--host", action="append", default=None,
                      help="a DNS name or IP of the certificate (default localhost, 127.0.0.1)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """``python -m webalps_sim.ca init|sign``; a refusal is one line on stderr,
    ``python -m webalps_sim.ca: error: ...``, exit status 1 (2 for a bad command line, such as a
    ``--csr`` that is not a certificate request)."""
    # (plain argparse, not testbed.cli: the guardian imports this module and loads only the
    # measured modules)
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "init":
            print(init_ca(args.dir, args.name))
            return 0
        if args.out.is_dir() or not args.out.parent.is_dir():
            parser.error(f"--out {args.out}: " + ("is a directory, expected a file name"
                         if args.out.is_dir() else f"folder {args.out.parent} does not exist"))
        try:
            data = args.csr.read_bytes()
        except FileNotFoundError:
            parser.error(f"--csr {args.csr}: no such file")
        except IsADirectoryError:
            parser.error(f"--csr {args.csr}: is a directory, expected a file")
        try:
            csr = x509.load_pem_x509_csr(data)
        except ValueError as exc:
            label = re.search(rb"-----BEGIN ([A-Z0-9 ]{1,64})-----", data)
            if label is not None and label.group(1) == b"CERTIFICATE REQUEST":
                parser.error(f"--csr {args.csr}: malformed certificate request ({exc})")
            got = f"a PEM {label.group(1).decode()} block" if label else "no PEM data"
            parser.error(f"--csr {args.csr}: expected a PEM certificate request, got {got}")
        hosts = tuple(args.host) if args.host else ("localhost", "127.0.0.1")
        write_chain(sign_csr(args.dir, csr, args.app, hosts), args.out)
        print(args.out)
        return 0
    except CAError as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # --dir is a file, an unwritable folder
        print(f"{parser.prog}: error: {exc.filename}: {exc.strerror}" if exc.filename else
              f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
