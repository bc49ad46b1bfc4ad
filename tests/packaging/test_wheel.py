"""The sdist and the wheel work outside the repository: built, installed in a fresh venv, run.

One test, in steps (one test so that pytest-xdist never builds twice):

1. copy the checkout's files (``git ls-files``: tracked and new, not ignored -- so no built
   extension, ``build/`` or ``*.egg-info``) into ``tmp_path`` and run ``python -m build`` there,
   which builds the sdist and then the wheel *from the sdist*: a wheel that works shows that
   the sdist is complete too.  Nothing is written into the repository;
2. read both archives: the wheel holds the compiled ``tls12._recordcrypto``, its ``.pyi``, every
   package's ``py.typed``, the bundled traces and one console script per ``[project.scripts]``
   entry, and no tests; the sdist holds ``setup.py`` and the C sources;
3. create a venv in ``tmp_path`` and ``pip install`` the wheel into it with its declared
   dependencies (from the package index, or pip's cache);
4. with the working directory outside the repository (so the checkout is not importable):
   every console script's ``--help``; errors named by the console script (``sine-fetch:
   error:``) and by ``python -m``; the C record cipher against its pure-Python twin (seal,
   open and MAC over every cipher and MAC, stitched and generic, and a tampered record
   rejected by both); an in-memory tls12 handshake with data both ways on the C backend; the
   HTTPS server program (``websec-https-server``) answering Python's ``ssl`` client on the
   loopback; and the SSL-splitting trace statistics on the bundled EPA-HTTP log, read from the
   installed package.

About a minute and a half on two cores, most of it ``pip install`` and the two builds.
"""

from __future__ import annotations

import configparser
import json
import os
import re
import select
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tarfile
import textwrap
import tomllib
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS: dict[str, str] = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
PACKAGES = ("tls12", "netsim", "testbed", "sslsplit", "sine", "reverse_ssl", "sslacc_sim",
            "webalps_sim")
BUNDLED = "testbed/traces/bundled"
#: Left out of the copy when the checkout is not a git work tree.
NOT_SOURCES = shutil.ignore_patterns(".git", ".venv", "build", "dist", "results", "mutants",
                                     "__pycache__", ".*_cache", ".hypothesis", "*.egg-info",
                                     "*.so", "*.pyd", ".ipynb_checkpoints")

#: Run inside the installed venv; prints one JSON object for the assertions below.
CHECKS = textwrap.dedent('''
    import json, random, sys
    import testbed, tls12
    from tls12 import (ApplicationData, ClientConfig, ClientConnection, HandshakeComplete,
                       ServerConfig, ServerConnection)
    from tls12.recordcrypto import BACKEND, CRecordCipher, PyRecordCipher
    from tls12.testing import credentials, pipe, seeded_rng
    from testbed.traces.catalogue import bundled_dir
    from sslsplit.experiments.traces import load_workloads, trace_table

    rng = random.Random(23)
    compared = 0
    for cipher, key_len in (("null", 0), ("aes-128-cbc", 16), ("aes-256-cbc", 32)):
        for mac, mac_len in (("sha1", 20), ("sha256", 32)):
            for stitched in (True, False):
                enc_key, mac_key = rng.randbytes(key_len), rng.randbytes(mac_len)
                c = CRecordCipher(cipher, mac, enc_key, mac_key, stitched=stitched)
                py = PyRecordCipher(cipher, mac, enc_key, mac_key)
                for size in (0, 1, 15, 16, 17, 255, 1000, rng.randrange(2**14), 2**14):
                    seq, pt = rng.getrandbits(64), rng.randbytes(size)
                    iv = rng.randbytes(16) if key_len else b""
                    sealed = c.seal(seq, 23, 0x0303, pt, iv)
                    assert sealed == py.seal(seq, 23, 0x0303, pt, iv), (cipher, mac, size)
                    assert c.compute_mac(seq, 23, 0x0303, pt) == py.compute_mac(seq, 23, 0x0303, pt)
                    assert c.open(seq, 23, 0x0303, sealed) == pt == py.open(seq, 23, 0x0303, sealed)
                    bad = bytearray(sealed)
                    bad[rng.randrange(len(bad))] ^= 1 << rng.randrange(8)
                    for impl in (c, py):
                        try:
                            impl.open(seq, 23, 0x0303, bytes(bad))
                        except ValueError:
                            pass
                        else:
                            raise AssertionError(f"tampered record opened ({cipher}, {mac})")
                    compared += 1

    server = ServerConnection(ServerConfig(credentials=credentials(), rng=seeded_rng(1)))
    client = ClientConnection(ClientConfig(rng=seeded_rng(2)))
    events = pipe(client, server)
    done = [e for e in events.client_events + events.server_events
            if isinstance(e, HandshakeComplete)]
    client.send_data(b"ping from the client")
    to_server = pipe(client, server).server_events
    server.send_data(b"pong from the server")
    to_client = pipe(client, server).client_events

    work = load_workloads(quick=True, names=["EPA-HTTP"], synthetic=False)
    row = trace_table(quick=True, workloads=work).iloc[0]

    print(json.dumps({
        "files": [tls12.__file__, testbed.__file__, str(bundled_dir())],
        "prefix": sys.prefix,
        "backend": BACKEND,
        "compared": compared,
        "handshakes": len(done),
        "to_server": [e.data.decode() for e in to_server if isinstance(e, ApplicationData)],
        "to_client": [e.data.decode() for e in to_client if isinstance(e, ApplicationData)],
        "trace": {"name": row["trace"], "requests": int(row["requests"]),
                  "compressibility": float(row["compressibility"]), "kind": row["kind"]},
    }))
''')


def _run(cmd: list[str | Path], *, cwd: Path, env: dict[str, str] | None = None,
         timeout: float = 600, status: int = 0) -> subprocess.CompletedProcess[str]:
    """Run ``cmd``; fail with its output unless it exits with ``status``."""
    out = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True,
                         timeout=timeout, stdin=subprocess.DEVNULL)
    assert out.returncode == status, (
        f"{' '.join(map(str, cmd))}: exit {out.returncode}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return out


def _copy_sources(dest: Path) -> None:
    """The files a fresh clone plus the local edits would have (built files left behind)."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                                 "--exclude-standard"], cwd=REPO, check=True,
                                capture_output=True).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError):  # not a git work tree: copy, minus artefacts
        shutil.copytree(REPO, dest, ignore=NOT_SOURCES)
        return
    for name in listed:
        source = REPO / name
        if name and source.is_file():  # a file deleted but not yet committed is still listed
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)


def _clean_env(venv: Path) -> dict[str, str]:
    """The environment of a user who just activated ``venv``: no repository on the path."""
    drop = {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP", "SSLKEYLOGFILE",
            "TLS12_PURE_PYTHON", "TESTBED_TRACEBACK"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", PYTHONNOUSERSITE="1",
               VIRTUAL_ENV=str(venv))
    return env


def _check_archives(wheel: Path, sdist: Path) -> None:
    bundled = sorted(str(p.relative_to(REPO)) for p in (REPO / BUNDLED).rglob("*") if p.is_file())
    assert len(bundled) >= 5 and f"{BUNDLED}/manifest.json" in bundled
    with zipfile.ZipFile(wheel) as whl:
        names = set(whl.namelist())
        dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/RECORD"))
        entry_points = configparser.ConfigParser(delimiters=("=",))
        entry_points.optionxform = str  # type: ignore[assignment,method-assign]
        entry_points.read_string(whl.read(f"{dist_info}/entry_points.txt").decode())
    assert any(re.fullmatch(r"tls12/_recordcrypto\..*(so|pyd)", n) for n in names), "no C extension"
    assert "tls12/_recordcrypto.pyi" in names
    assert {f"{p}/py.typed" for p in PACKAGES} <= names
    assert set(bundled) <= names
    assert not [n for n in names if n.startswith(("tests/", "notebooks/", "benchmarks/", "docs/"))]
    assert dict(entry_points["console_scripts"]) == SCRIPTS
    with tarfile.open(sdist) as tar:
        members = {m.name.split("/", 1)[1] for m in tar.getmembers() if "/" in m.name}
    assert {"setup.py", "pyproject.toml", "MANIFEST.in", "tls12/_recordcrypto.c",
            "tls12/_recordcrypto_core.c", "tls12/_recordcrypto.h", "tls12/_recordcrypto.pyi",
            *bundled} <= members


def _check_scripts(venv: Path, env: dict[str, str], cwd: Path) -> None:
    """Every console script answers ``--help`` under its own name; errors carry that name."""
    def helped(script: str) -> subprocess.CompletedProcess[str]:
        return _run([venv / "bin" / script, "--help"], cwd=cwd, env=env, timeout=120)

    with ThreadPoolExecutor(4) as pool:
        for script, out in zip(SCRIPTS, pool.map(helped, SCRIPTS), strict=True):
            assert out.stdout.startswith(f"usage: {script} "), (script, out.stdout[:200])
    missing = str(cwd / "no-such-folder")
    cases: tuple[tuple[list[str | Path], str], ...] = (
        ([venv / "bin" / "websec-https-server", "--root", missing], "websec-https-server"),
        ([venv / "bin" / "python", "-m", "testbed.https_server", "--root", missing],
         "python -m testbed.https_server"),
        ([venv / "bin" / "webalps-ca", "init"], "webalps-ca init"),  # a subcommand's error
        ([venv / "bin" / "webalps-guardian", "--no-such-option"], "webalps-guardian"),
    )
    for cmd, prog in cases:
        err = _run(cmd, cwd=cwd, env=env, status=2, timeout=120).stderr
        assert err.splitlines()[-1].startswith(f"{prog}: error: "), err


def _check_https_server(venv: Path, env: dict[str, str], cwd: Path) -> None:
    """``websec-https-server`` on an ephemeral loopback port, fetched with Python's ssl."""
    root = cwd / "www"
    root.mkdir()
    (root / "hello.txt").write_bytes(b"hello from the installed wheel\n")
    server = subprocess.Popen([venv / "bin" / "websec-https-server", "--root", root, "--port", "0",
                               "--quiet"], cwd=cwd, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        assert server.stdout is not None
        ready, _, _ = select.select([server.stdout], [], [], 60)
        line = server.stdout.readline() if ready else ""
        match = re.fullmatch(r"listening on https://127\.0\.0\.1:(\d+)\n", line)
        assert match, f"no listening line: {line!r}"
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE  # self-signed
        context.maximum_version = ssl.TLSVersion.TLSv1_2
        with socket.create_connection(("127.0.0.1", int(match[1])), timeout=30) as raw, \
                context.wrap_socket(raw) as tls:
            tls.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            response = b""
            while chunk := tls.recv(65536):
                response += chunk
            version = tls.version()
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            _, err = server.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            _, err = server.communicate()
    assert version == "TLSv1.2"
    assert response.startswith(b"HTTP/1.1 200 "), response[:200]
    assert response.endswith(b"\r\n\r\nhello from the installed wheel\n"), response[-200:]
    assert server.returncode == 0, err


@pytest.mark.slow
def test_wheel_and_sdist_install_and_run_outside_the_repository(tmp_path: Path) -> None:
    source, dist, venv, work = (tmp_path / d for d in ("source", "dist", "venv", "work"))
    work.mkdir()
    _copy_sources(source)
    _run([sys.executable, "-m", "build", "--outdir", dist, source], cwd=work, timeout=900)
    (wheel,), (sdist,) = dist.glob("*.whl"), dist.glob("*.tar.gz")
    _check_archives(wheel, sdist)

    _run([sys.executable, "-m", "venv", venv], cwd=work)
    env = _clean_env(venv)
    _run([venv / "bin" / "python", "-m", "pip", "install", "--disable-pip-version-check",
          "--no-input", "--quiet", wheel], cwd=work, env=env, timeout=900)
    (work / "checks.py").write_text(CHECKS)
    checks = json.loads(_run([venv / "bin" / "python", "checks.py"], cwd=work, env=env).stdout)

    for path in checks["files"]:  # imported from the venv, not from the checkout
        assert Path(path).resolve().is_relative_to(venv.resolve()), path
    assert Path(checks["prefix"]).resolve() == venv.resolve()
    assert checks["backend"] == "c"
    assert checks["compared"] == 3 * 2 * 2 * 9
    assert checks["handshakes"] == 2
    assert checks["to_server"] == ["ping from the client"]
    assert checks["to_client"] == ["pong from the server"]
    trace = checks["trace"]
    assert (trace["name"], trace["requests"], trace["kind"]) == ("EPA-HTTP", 35291, "measured")
    assert trace["compressibility"] == pytest.approx(2.2926, abs=1e-3)  # manifest: 2.293

    verified = _run([venv / "bin" / "websec-traces", "verify"], cwd=work, env=env).stdout
    assert verified.count("ok ") >= 3 and str(venv.resolve()) in verified
    _check_scripts(venv, env, work)
    _check_https_server(venv, env, work)
    assert not (work / "tls12").exists() and not (REPO / "dist").exists()
