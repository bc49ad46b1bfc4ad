"""The measuring plumbing of :mod:`reverse_ssl.experiments`: external tools and subprocesses.

* :func:`openssl_speed` -- the paper's own tool, ``openssl speed rsaN``, parsed into
  milliseconds per private- and public-key operation;
* :func:`run_server_and_load` -- the throughput experiment's two programs,
  ``python -m reverse_ssl.server`` and ``python -m reverse_ssl.client --load``, started as
  subprocesses on the loopback; the server writes its port and its statistics to files in a
  temporary directory and both sides' counters come back as one dict.

The experiments module turns these into DataFrames; nothing here knows about figures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["openssl_speed", "run_server_and_load", "REPO"]

#: The repository root, put on the subprocesses' ``PYTHONPATH``.
REPO = Path(__file__).resolve().parent.parent.parent


def openssl_speed(bits: tuple[int, ...] = (512, 1024, 2048, 4096), seconds: int = 1) -> dict[int, tuple[float, float]]:
    """bits -> (sign ms, verify ms) from the ``openssl speed`` CLI (the paper's tool); {} if unavailable."""
    cmd = ["openssl", "speed", "-seconds", str(seconds), *[f"rsa{b}" for b in bits]]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60 + 4 * seconds * len(bits)).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    result = {}
    for line in out.splitlines():
        parts = line.split()
        # "rsa 2048 bits 0.000598s 0.000034s   1672.7  29068.1"
        if len(parts) >= 5 and parts[0] == "rsa" and parts[2] == "bits" and parts[3].endswith("s"):
            result[int(parts[1])] = (float(parts[3][:-1]) * 1e3, float(parts[4][:-1]) * 1e3)
    return result


def run_server_and_load(mode: str, bits: int, duration: float, concurrency: int, pool: int) -> dict[str, Any]:
    """Server and load generator as two subprocesses (the CLIs); returns both sides' counters."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    with tempfile.TemporaryDirectory() as tmp:
        port_file, stats_file = Path(tmp) / "port", Path(tmp) / "stats.json"
        cmd = [sys.executable, "-m", "reverse_ssl.server", "--key-bits", str(bits), "--pool", str(pool), "--prefill",
               "--refill-rate", "0", "--port-file", str(port_file), "--stats-json", str(stats_file),
               "--duration", str(duration + 30.0), "--modes", "client-auth"]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 300
            while not (port_file.exists() and port_file.read_text()) and time.monotonic() < deadline:
                if proc.poll() is not None:
                    raise RuntimeError("server exited early")
                time.sleep(0.05)
            client = subprocess.run(
                [sys.executable, "-m", "reverse_ssl.client", "--port", port_file.read_text(), "--mode", mode,
                 "--key-bits", str(bits), "--load", "--concurrency", str(concurrency), "--duration", str(duration)],
                env=env, capture_output=True, text=True, timeout=duration + 300, check=True)
            load = json.loads(client.stdout)
            proc.terminate()  # SIGTERM: the server would stop by itself at --duration; do not wait for it
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        stats = json.loads(stats_file.read_text()) if stats_file.exists() else None
    if stats is None:
        raise RuntimeError("the server wrote no statistics")
    done = sum(stats["handshakes"].values())
    return {"mode": mode, "bits": bits, "concurrency": concurrency, "client_handshakes": load["handshakes"],
            "client_errors": load["errors"], "wall_rate_hs": load["rate"], "server_handshakes": done,
            "server_cpu_s": stats["cpu_seconds"], "server_cpu_ms_per_hs": stats["cpu_seconds"] / done * 1e3 if done else float("nan"),
            "server_capacity_hs": done / stats["cpu_seconds"] if stats["cpu_seconds"] > 0 else float("nan"),
            "fallback_signatures": stats["fallback_signatures"]}


