"""The WebALPS CA, the guardian's certification steps and the three host modes, as a user runs them.

* ``python -m webalps_sim.ca init|sign`` and ``python -m webalps_sim.guardian`` from a fresh state
  directory: the guardian writes a request and refuses to serve until certified; the CA refuses
  a request whose measurement is not the evaluated program's; a guardian whose program changed
  (another application) refuses its old certificate;
* ``python -m webalps_sim.host --mode http|https|webalps`` serve the same bytes; the WebALPS
  host started before its guardian waits for it (``--guardian-wait``); bad input is one line
  and exit status 2.
"""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.webalps_sim.guardian_helpers import (
    REPO,
    SUITE_NAMES,
    GuardianProcess,
    child_env,
    curl_get,
    provision,
    webalps_host,
)
from webalps_sim.aio.host import WEBALPS_SUITES
from webalps_sim.ca import CAError, guardian_identity, init_ca, make_csr, sign_csr
from webalps_sim.measure import guardian_sources, measure


def _run(module: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, env=child_env(),
                          capture_output=True, text=True, timeout=timeout)


def test_certification_from_the_command_line(tmp_path: Path) -> None:
    ca, state = tmp_path / "ca", tmp_path / "state"
    assert _run("webalps_sim.ca", "init", "--dir", str(ca)).returncode == 0
    again = _run("webalps_sim.ca", "init", "--dir", str(ca))
    assert again.returncode == 1 and "already holds a CA" in again.stderr
    first = _run("webalps_sim.guardian", "--state-dir", str(state), "--listen",
                 str(tmp_path / "g.sock"))
    assert first.returncode == 3 and "no certificate yet" in first.stderr
    assert (state / "guardian.key").stat().st_mode & 0o077 == 0
    csr = x509.load_pem_x509_csr((state / "guardian.csr").read_bytes())
    assert guardian_identity(csr).measurement == measure("null")
    out = _run("webalps_sim.ca", "sign", "--dir", str(ca), "--csr", str(state / "guardian.csr"),
               "--out", str(state / "guardian-chain.pem"))
    assert out.returncode == 0, out.stderr
    chain = x509.load_pem_x509_certificates((state / "guardian-chain.pem").read_bytes())
    assert len(chain) == 2 and chain[0].issuer == chain[1].subject
    assert guardian_identity(chain[0]).app == "null"
    # the same state directory, another program: the old certificate is refused
    other = _run("webalps_sim.guardian", "--state-dir", str(state), "--listen",
                 str(tmp_path / "g.sock"), "--app", "evoting")
    assert other.returncode == 3 and "certifies application 'null'" in other.stderr
    unknown = _run("webalps_sim.guardian", "--state-dir", str(state), "--listen",
                   str(tmp_path / "g.sock"), "--app", "nope")
    assert unknown.returncode == 2 and "unknown guardian application" in unknown.stderr


def test_ca_refuses_a_program_it_did_not_evaluate(tmp_path: Path) -> None:
    init_ca(tmp_path / "ca")
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with pytest.raises(CAError, match="refusing to certify"):
        sign_csr(tmp_path / "ca", make_csr(key, "null", b"\x00" * 32), "null")
    with pytest.raises(CAError, match="application"):
        sign_csr(tmp_path / "ca", make_csr(key, "evoting", measure("null")), "null")
    chain = sign_csr(tmp_path / "ca", make_csr(key, "null", measure("null")), "null")
    assert guardian_identity(chain[0]).measurement == measure("null")


def test_measurement_covers_the_guardian_and_its_application(tmp_path: Path) -> None:
    assert "tls12/delegate.py" in guardian_sources("null")
    assert "webalps_sim/evoting.py" in guardian_sources("evoting")
    assert measure("null") != measure("evoting")
    copy = tmp_path / "src"
    for name in guardian_sources("null"):
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        (copy / name).write_bytes((REPO / name).read_bytes())
    assert measure("null", copy) == measure("null")
    (copy / "webalps_sim/router.py").write_bytes(b"# changed\n")
    assert measure("null", copy) != measure("null")


def _serve(mode: str, docroot: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "webalps_sim.host", "--mode", mode, "--port",
                             "0", "--docroot", str(docroot), "--quiet", *args], cwd=REPO,
                            env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("listening on "):
        proc.kill()
        raise AssertionError(f"host did not start: {line!r} {proc.communicate()[1]}")
    return proc, line.split()[-1]


@pytest.mark.interop
def test_http_and_https_baselines(tmp_path: Path) -> None:
    docroot = tmp_path / "www"
    docroot.mkdir()
    (docroot / "f").write_bytes(bytes(range(256)) * 8)
    http, url = _serve("http", docroot)
    try:
        with urllib.request.urlopen(f"{url}/f", timeout=30) as response:
            assert response.read() == (docroot / "f").read_bytes()
    finally:
        http.terminate()
        http.communicate(timeout=30)
    https, url = _serve("https", docroot)
    try:
        out = subprocess.run(["curl", "-sSk", "--tls-max", "1.2", f"{url}/f"],
                             capture_output=True, timeout=60)
        assert out.returncode == 0 and out.stdout == (docroot / "f").read_bytes()
    finally:
        https.terminate()
        https.communicate(timeout=30)


def test_host_bad_input_is_one_line(tmp_path: Path) -> None:
    no_guardian = _run("webalps_sim.host", "--mode", "webalps", "--docroot", str(tmp_path))
    assert no_guardian.returncode == 2 and "--guardian" in no_guardian.stderr.strip().splitlines()[-1]
    key_given = _run("webalps_sim.host", "--mode", "webalps", "--docroot", str(tmp_path),
                     "--guardian", "x", "--cert", "c", "--key", "k")
    assert key_given.returncode == 2 and "holds no key" in key_given.stderr
    unreachable = _run("webalps_sim.host", "--mode", "webalps", "--docroot", str(tmp_path),
                       "--guardian", str(tmp_path / "none.sock"))
    assert unreachable.returncode == 1 and "cannot reach the guardian" in unreachable.stderr


@pytest.mark.interop
def test_webalps_mode_from_the_command_line(tmp_path: Path) -> None:
    """Host first (waiting for its guardian), then the guardian: curl verifies and fetches."""
    prov = provision(tmp_path)
    docroot = tmp_path / "www"
    docroot.mkdir()
    (docroot / "f").write_bytes(bytes(range(256)) * 8)
    sock = tmp_path / "g.sock"
    host = subprocess.Popen([sys.executable, "-m", "webalps_sim.host", "--mode", "webalps",
                             "--port", "0", "--docroot", str(docroot), "--guardian", str(sock),
                             "--guardian-wait", "60", "--quiet"], cwd=REPO, env=child_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with GuardianProcess(prov.state_dir, sock):
            assert host.stdout is not None
            line = host.stdout.readline()
            assert line.startswith("listening on https://"), host.stderr
            port = line.strip().rsplit(":", 1)[1]
            out = curl_get(f"https://localhost:{port}/f", prov.ca_pem,
                           SUITE_NAMES[WEBALPS_SUITES[0]])
            assert out.returncode == 0, out.stderr
            assert out.stdout == (docroot / "f").read_bytes()
    finally:
        host.terminate()
        host.communicate(timeout=30)


@pytest.mark.interop
def test_guardian_with_the_4758_cost_model(tmp_path: Path) -> None:
    """``--cost-model 4758`` loads the coprocessor model, which then accounts every operation."""
    from webalps_sim.costmodel import CostAccount

    prov = provision(tmp_path)
    docroot = tmp_path / "www"
    docroot.mkdir()
    (docroot / "f").write_bytes(b"x" * 2048)
    sock, stats = tmp_path / "g.sock", tmp_path / "cost.json"
    guardian = GuardianProcess(prov.state_dir, sock, "--cost-model", "4758",
                               env={"WEBALPS_COST_STATS": str(stats)})
    with guardian:
        server, remote = webalps_host(docroot, sock)
        with server:
            out = curl_get(f"https://localhost:{server.port}/f", prov.ca_pem,
                           SUITE_NAMES[WEBALPS_SUITES[0]])
            assert out.returncode == 0 and out.stdout == b"x" * 2048, out.stderr
        remote.close()
    ops = CostAccount.read(stats)  # written when the guardian exits
    assert ops["rsa"]["calls"] == 1 and ops["rsa"]["seconds"] > 0
    assert ops["finished"]["calls"] == 2 and ops["seal"]["bytes"] >= 2048


def test_measurement_lists_every_module_a_guardian_loads() -> None:
    """The measured files are exactly this repository's modules in a guardian process."""
    code = ("import sys, webalps_sim.guardian; print(' '.join(sorted(m.__file__ for n, m in "
            "sys.modules.items() if n.split('.')[0] in ('tls12', 'webalps_sim') and "
            "m.__file__ and m.__file__.endswith('.py'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=child_env(),
                         capture_output=True, text=True, timeout=60)
    loaded = {str(Path(f).resolve().relative_to(REPO)) for f in out.stdout.split()}
    assert loaded and loaded == set(guardian_sources("null"))
