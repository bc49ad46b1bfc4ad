"""The guardian certificate parses in every client's ASN.1 library, GnuTLS's included.

GnuTLS 3.7 (libtasn1) refuses an OID arc wider than 64 bits: with the measurement extension
under ``2.25.<128-bit UUID>`` ``certtool -i`` said "Error in DER parsing" and ``gnutls-cli`` and
Debian's ``wget`` rejected the guardian's certificate although the extension is non-critical.
``certtool`` is from gnutls-bin, which ``.ci/run`` installs.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from webalps_sim.ca import MEASUREMENT_OID, guardian_identity, init_ca, make_csr, sign_csr
from webalps_sim.measure import measure


def test_every_arc_of_the_measurement_oid_fits_in_64_bits() -> None:
    arcs = [int(a) for a in MEASUREMENT_OID.dotted_string.split(".")]
    assert all(0 <= a < 2**64 for a in arcs), MEASUREMENT_OID.dotted_string


def test_gnutls_certtool_reads_the_guardian_certificate(tmp_path: Path) -> None:
    init_ca(tmp_path / "ca")
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    leaf, _ = sign_csr(tmp_path / "ca", make_csr(key, "null", measure("null")), "null")
    pem = tmp_path / "guardian.pem"
    pem.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    out = subprocess.run(["certtool", "-i", "--infile", str(pem)], capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert "Error" not in out.stderr and MEASUREMENT_OID.dotted_string in out.stdout
    assert guardian_identity(leaf).measurement == measure("null")
