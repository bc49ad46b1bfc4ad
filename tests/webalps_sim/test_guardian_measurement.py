"""The guardian's start-up check binds its certificate to the program it runs, byte for byte.

The README promises that a guardian "refuses to run with a certificate for other code".  The
measured hash (:mod:`webalps_sim.measure`) covers the guardian's Python sources, so the test
works on a *copy* of exactly those files, run as ``python -m webalps_sim.guardian`` from the
copy (the copy alone on ``PYTHONPATH``, the working directory off ``sys.path``):

1. the copy writes its certificate request, the CA (which evaluated this repository's sources,
   identical to the copy's) certifies it, and the unchanged copy starts and reports the
   certified measurement in ``HELLO`` -- the control;
2. one byte is appended to one measured file of the copy *after* certification (a blank line:
   the program still behaves the same), and the same guardian, same key, same certificate,
   refuses to start: exit status 3 and one line naming both measurements;
3. the changed program cannot get a new certificate either: its request carries a
   measurement the CA did not evaluate.

The other checks of :func:`webalps_sim.identity.load_identity` are exercised in-process, each
with a certificate that passes every check but one: the application name (a certificate for
another application with this program's measurement), the measurement (the right application
with another measurement), the key, and the measurement extension itself.
"""

from __future__ import annotations

import datetime
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from tests.webalps_sim.guardian_helpers import REPO
from webalps_sim.aio.remote import RemoteDelegate
from webalps_sim.ca import (
    MEASUREMENT_OID,
    CAError,
    GuardianIdentity,
    guardian_identity,
    init_ca,
    make_csr,
    measurement_extension,
    sign_csr,
    write_chain,
)
from webalps_sim.evoting import write_election
from webalps_sim.identity import (
    CHAIN_FILE,
    CSR_FILE,
    KEY_FILE,
    NotCertified,
    certify,
    init_state,
    load_identity,
)
from webalps_sim.measure import guardian_sources, measure

PROG = "python -m webalps_sim.guardian"
GUARDIAN = [sys.executable, "-P", "-m", "webalps_sim.guardian"]
"""``-P``: the working directory stays off ``sys.path``, so the copy on ``PYTHONPATH`` is the
only ``webalps_sim`` the child can import (the working directory is left as it is: tools that
instrument the sources find their configuration there)."""


def copy_program(dest: Path, app: str) -> Path:
    """Copy exactly the measured files of the guardian for ``app`` into ``dest`` (its root)."""
    for name in guardian_sources(app):
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / name, dest / name)
    return dest


def copy_env(root: Path) -> dict[str, str]:
    """Environment for a child that must import ``webalps_sim``/``tls12`` from ``root`` only."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COVERAGE_")}
    env["PYTHONPATH"] = str(root)
    return env


def run_guardian(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m webalps_sim.guardian ARGS`` from the program copy in ``root``."""
    return subprocess.run([*GUARDIAN, *args], env=copy_env(root), capture_output=True,
                          text=True, timeout=120)


def serve_expecting_refusal(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Start the guardian of ``root`` to serve; it must exit at once.  One that listens instead
    is stopped and the test fails (rather than waiting for a server that never exits)."""
    proc = subprocess.Popen([*GUARDIAN, *args], env=copy_env(root), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # "" once it exits; the listening line if it serves
    if "guardian listening" in line:
        stop(proc)
        pytest.fail(f"the guardian served with a certificate for other code: {line.strip()}")
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, line + out, err)


def start_guardian(root: Path, state: Path, sock: Path, app: str) -> subprocess.Popen[str]:
    """The guardian of ``root`` serving on ``sock``; returns once it listens (fails if it exits)."""
    proc = subprocess.Popen([*GUARDIAN, "--state-dir", str(state), "--listen", str(sock),
                             "--app", app], env=copy_env(root), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "guardian listening" not in line:
        proc.kill()
        _, err = proc.communicate(timeout=30)
        raise AssertionError(f"the unchanged guardian did not start: {line!r} {err}")
    return proc


def stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    proc.communicate(timeout=30)


@pytest.mark.parametrize(("app", "changed"), [
    ("null", "webalps_sim/router.py"),
    ("null", "tls12/prf.py"),
    ("evoting", "webalps_sim/sealed.py"),  # an application's own file
])
def test_a_guardian_changed_after_certification_refuses_its_certificate(
        tmp_path: Path, app: str, changed: str) -> None:
    root = copy_program(tmp_path / "src", app)
    state, ca, sock = tmp_path / "state", tmp_path / "ca", tmp_path / "g.sock"
    if app == "evoting":
        write_election(state, ["red", "blue"], {"ann": "pw"}, {"officer": "pw-off"}, n=2**10)
    init_ca(ca)
    init = run_guardian(root, "--state-dir", str(state), "--app", app, "--init",
                        "--key-size", "1024")
    assert init.returncode == 0, init.stderr
    csr = x509.load_pem_x509_csr((state / CSR_FILE).read_bytes())
    certified = measure(app, root)
    assert guardian_identity(csr).measurement == certified == measure(app)
    write_chain(sign_csr(ca, csr, app), state / CHAIN_FILE)

    # control: the certified program starts, and says which program it is
    guardian = start_guardian(root, state, sock, app)
    try:
        remote = RemoteDelegate(sock, timeout=30)
        info = remote.connect()
        remote.close()
    finally:
        stop(guardian)
    assert info.measurement == certified and info.app == app

    # one byte more in one measured file: the same key and certificate no longer start
    path = root / changed
    path.write_bytes(path.read_bytes() + b"\n")
    running = measure(app, root)
    assert running != certified
    sock = tmp_path / "changed.sock"
    refused = serve_expecting_refusal(root, "--state-dir", str(state), "--listen", str(sock),
                                      "--app", app)
    assert refused.returncode == 3, refused.stderr
    assert refused.stdout == ""
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1, refused.stderr
    assert lines[0].startswith(f"{PROG}: error: {state / CHAIN_FILE} certifies application "
                               f"{app!r} with measurement {certified.hex()[:16]}...")
    assert f"runs {app!r} measuring {running.hex()[:16]}..." in lines[0]
    assert lines[0].endswith("have a new request signed")
    assert not sock.exists()  # it never listened

    # nor can the changed program get a certificate from the CA that evaluated the original
    again = run_guardian(root, "--state-dir", str(state), "--app", app, "--init")
    assert again.returncode == 0, again.stderr
    csr = x509.load_pem_x509_csr((state / CSR_FILE).read_bytes())
    assert guardian_identity(csr).measurement == running
    with pytest.raises(CAError, match="refusing to certify"):
        sign_csr(ca, csr, app)


def test_the_refusal_is_for_the_program_not_the_folder(tmp_path: Path) -> None:
    """A byte-identical copy elsewhere measures the same: the certificate names content only."""
    a = copy_program(tmp_path / "a", "null")
    b = copy_program(tmp_path / "b" / "deeper", "null")
    assert measure("null", a) == measure("null", b) == measure("null")


def _issue(ca: Path, key: rsa.RSAPrivateKey, app: str, measurement: bytes) -> list[x509.Certificate]:
    """A certificate naming ``app`` and ``measurement`` (a CA told to accept that measurement)."""
    return sign_csr(ca, make_csr(key, app, measurement), app, expected=measurement)


@pytest.fixture
def certified(tmp_path: Path) -> tuple[Path, Path, rsa.RSAPrivateKey]:
    """A CA and a guardian state directory (1024-bit key) it certified for ``null``."""
    init_ca(tmp_path / "ca")
    state = tmp_path / "state"
    certify(state, tmp_path / "ca", "null", key_size=1024)
    key = serialization.load_pem_private_key((state / KEY_FILE).read_bytes(), password=None)
    assert isinstance(key, rsa.RSAPrivateKey)
    return tmp_path / "ca", state, key


def test_the_certified_guardian_loads_its_identity(
        certified: tuple[Path, Path, rsa.RSAPrivateKey]) -> None:
    _, state, key = certified
    loaded, chain, measurement = load_identity(state, "null")
    assert loaded.public_key().public_numbers() == key.public_key().public_numbers()
    assert measurement == measure("null") and len(chain) == 2


def test_another_application_with_this_programs_measurement_is_refused(
        certified: tuple[Path, Path, rsa.RSAPrivateKey]) -> None:
    """Only the name differs: the application check must refuse on its own."""
    ca, state, key = certified
    write_chain(_issue(ca, key, "evoting", measure("null")), state / CHAIN_FILE)
    with pytest.raises(NotCertified, match="certifies application 'evoting'"):
        load_identity(state, "null")


def test_this_application_with_another_measurement_is_refused(
        certified: tuple[Path, Path, rsa.RSAPrivateKey]) -> None:
    """Only the measurement differs: the measurement check must refuse on its own."""
    ca, state, key = certified
    other = bytes(32)
    write_chain(_issue(ca, key, "null", other), state / CHAIN_FILE)
    with pytest.raises(NotCertified, match=rf"measurement {other.hex()[:16]}\.\.\., but .* "
                                           rf"measuring {measure('null').hex()[:16]}\.\.\.:"):
        load_identity(state, "null")


def test_a_measurement_one_bit_off_is_refused(
        certified: tuple[Path, Path, rsa.RSAPrivateKey]) -> None:
    """Equality of all 32 bytes, not of a prefix: the last bit alone is enough to refuse."""
    ca, state, key = certified
    near = bytearray(measure("null"))
    near[-1] ^= 0x01
    write_chain(_issue(ca, key, "null", bytes(near)), state / CHAIN_FILE)
    with pytest.raises(NotCertified, match="have a new request signed"):
        load_identity(state, "null")


def test_a_certificate_for_another_key_is_refused(
        tmp_path: Path, certified: tuple[Path, Path, rsa.RSAPrivateKey]) -> None:
    """Another guardian's valid certificate (same program) copied into this state directory."""
    ca, state, _ = certified
    other = tmp_path / "other"
    certify(other, ca, "null", key_size=1024)
    shutil.copyfile(other / CHAIN_FILE, state / CHAIN_FILE)
    with pytest.raises(NotCertified, match="certifies another key"):
        load_identity(state, "null")


def test_a_certificate_without_the_measurement_is_refused(
        certified: tuple[Path, Path, rsa.RSAPrivateKey]) -> None:
    """The CA's key signed this guardian's key but bound no program to it: not certified,
    a typed refusal (``NotCertified``), not the CA module's own error."""
    ca, state, key = certified
    ca_key = serialization.load_pem_private_key((ca / "ca.key").read_bytes(), password=None)
    assert isinstance(ca_key, rsa.RSAPrivateKey)
    ca_cert = x509.load_pem_x509_certificate((ca / "ca.pem").read_bytes())
    now = datetime.datetime.now(datetime.UTC)
    bare = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, "g")]))
            .issuer_name(ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(ca_key, hashes.SHA256()))
    write_chain([bare, ca_cert], state / CHAIN_FILE)
    with pytest.raises(NotCertified, match="no guardian-measurement extension"):
        load_identity(state, "null")


def test_the_guardian_certificate_is_a_tls_server_leaf(
        certified: tuple[Path, Path, rsa.RSAPrivateKey]) -> None:
    """What the CA issues is an end-entity certificate for the default host names, never a
    CA: a guardian holding a ``ca=True`` certificate could certify any web server."""
    _, state, _ = certified
    leaf = x509.load_pem_x509_certificates((state / CHAIN_FILE).read_bytes())[0]
    ext = leaf.extensions
    basic = ext.get_extension_for_class(x509.BasicConstraints)
    assert basic.critical and basic.value.ca is False
    usage = ext.get_extension_for_class(x509.KeyUsage)
    assert usage.critical
    assert usage.value == x509.KeyUsage(True, False, True, False, False, False, False, False, False)
    eku = ext.get_extension_for_class(x509.ExtendedKeyUsage)
    assert not eku.critical and list(eku.value) == [x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]
    san = ext.get_extension_for_class(x509.SubjectAlternativeName)
    assert not san.critical
    assert san.value.get_values_for_type(x509.DNSName) == ["localhost"]
    assert [str(a) for a in san.value.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]


def test_init_state_keeps_its_key_in_a_new_or_existing_folder(tmp_path: Path) -> None:
    """``--init`` works in a folder that does not exist yet (parents made) and in one that
    holds an election already; a second ``--init`` rewrites the request for the same key,
    and the key file is the owner's alone."""
    nested = tmp_path / "a" / "b" / "state"
    csr = x509.load_pem_x509_csr(init_state(nested, "null", key_size=1024).read_bytes())
    again = x509.load_pem_x509_csr(init_state(nested, "null", key_size=1024).read_bytes())
    assert csr.public_key().public_numbers() == again.public_key().public_numbers()
    assert (nested / KEY_FILE).stat().st_mode & 0o777 == 0o600
    existing = tmp_path / "election"
    write_election(existing, ["red", "blue"], {"ann": "pw"}, {"officer": "pw-off"}, n=2**10)
    request = x509.load_pem_x509_csr(init_state(existing, "evoting", key_size=1024).read_bytes())
    assert guardian_identity(request) == GuardianIdentity("evoting", measure("evoting"))


def test_a_key_that_is_not_rsa_and_a_missing_certificate_are_typed_refusals(
        tmp_path: Path) -> None:
    state = tmp_path / "state"
    init_state(state, "null", key_size=1024)
    with pytest.raises(NotCertified, match=r"no certificate yet: have .*guardian\.csr signed"):
        load_identity(state, "null")
    ec_key = ec.generate_private_key(ec.SECP256R1())
    (state / KEY_FILE).write_bytes(ec_key.private_bytes(serialization.Encoding.PEM,
                                                        serialization.PrivateFormat.PKCS8,
                                                        serialization.NoEncryption()))
    with pytest.raises(NotCertified, match="is not an RSA key"):
        init_state(state, "null")


def _request_with(raw: bytes) -> x509.CertificateSigningRequest:
    """A request whose guardian-measurement extension holds exactly ``raw``."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    return (x509.CertificateSigningRequestBuilder()
            .subject_name(x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, "g")]))
            .add_extension(x509.UnrecognizedExtension(MEASUREMENT_OID, raw), critical=False)
            .sign(key, hashes.SHA256()))


@pytest.mark.parametrize("raw", [
    b"\x30\x05\x13\x01a\x04\x00",  # the name as a PrintableString, not a UTF8String
    b"\x30\x01\x0c",  # a name tag and nothing after it
    b"\x30\x05\x0c\x05ab\x04",  # a name longer than what is left
    b"\x30\x05\x0c\x01a\x04\x00\x00",  # a byte after the outer sequence
])
def test_a_malformed_measurement_extension_is_a_ca_error(raw: bytes) -> None:
    with pytest.raises(CAError, match="malformed guardian-measurement extension"):
        guardian_identity(_request_with(raw))


def test_the_measurement_extension_round_trips_at_its_edges() -> None:
    """An empty measurement at the very end and a name long enough for a two-byte DER length
    parse back exactly (mutants: the bounds check one byte stricter, the long-form width)."""
    for app, measurement in (("null", b""), ("x" * 300, bytes(range(32)))):
        request = _request_with(measurement_extension(app, measurement).value)
        assert guardian_identity(request) == GuardianIdentity(app, measurement)


def test_a_name_that_is_not_utf8_parses_with_replacement_characters() -> None:
    """A request's application name is attacker-chosen bytes: it parses (and then matches no
    application) rather than raising ``UnicodeDecodeError`` out of the CA."""
    request = _request_with(b"\x30\x05\x0c\x01\xff\x04\x00")
    assert guardian_identity(request) == GuardianIdentity("\ufffd", b"")


def test_the_measurement_is_the_documented_hash() -> None:
    """Recomputed here from the formula of :mod:`webalps_sim.measure` alone, so that a CA or
    verifier written from that description gets the same 32 bytes."""
    for app in ("null", "evoting"):
        h = hashlib.sha256(b"webalps-guardian-v1" + b"\x00" + app.encode() + b"\x00")
        for name in sorted(guardian_sources(app)):
            h.update(name.encode() + b"\x00" + hashlib.sha256((REPO / name).read_bytes()).digest())
        assert measure(app) == h.digest()
