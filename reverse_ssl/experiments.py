"""Experiments of the Reverse SSL paper, each a function returning a pandas DataFrame.

=============================  ===================================================================
function                       what it re-measures
=============================  ===================================================================
:func:`table2`                 RSA private / public key operation at 512-4096 bits (paper Table 2)
:func:`table3`                 online server cost, original vs reverse, and the speedup (Table 3)
:func:`table4`                 RSA key generation (Table 4), OpenSSL and the Python puzzle solver
:func:`handshake_cpu`          server CPU per *whole* handshake of this implementation, by mode
:func:`ots_costs`              offline token, online signing and verification per one-time scheme
:func:`puzzle_costs`           puzzle solving time vs K and vs p, and the cost of each check
:func:`throughput`             handshakes/s of the asyncio server under closed-loop load
:func:`dos_sweep`              the SimPy DoS model calibrated with measured costs
:func:`dos_driver_comparison`  the same flood, old model vs real handshake bytes on the driver
:func:`dos`                    the DoS figure by ``variant``: ``"model"`` or ``"driver"``
=============================  ===================================================================

Every function takes ``quick``: CI-sized repetitions (the whole quick set
runs in a few minutes on two cores).  The paper's numbers sit in ``paper_*``
columns next to ours; absolute times depend on the machine (the paper used a
1 GHz UltraSPARC), *ratios* are what should travel.  The paper measured with
``openssl speed``; we call OpenSSL through ``cryptography`` (PKCS#1 v1.5,
SHA-256, e = 65537), so a Python call overhead of a few microseconds is
included -- visible mostly in the public-key operation.

Times are CPU seconds of this process (``time.process_time``), not wall
clock, so that other load on a shared machine does not inflate them
(contention still disturbs caches; medians are used where it matters).

512-bit keys: ``cryptography`` refuses to *generate* them, so the 512-bit
key of Tables 2-3 is built from primes of :mod:`reverse_ssl.primes` and
Table 4's 512-bit row uses the Python generator (marked in ``generator``).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from functools import cache, partial
from typing import Any

import pandas as pd
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from tls12.certs import Credentials, generate_self_signed
from tls12.config import ClientConfig, ServerConfig
from tls12.messages import frame_handshake
from tls12.testing import pipe

from . import ots
from .aio.measure import openssl_speed, run_server_and_load
from .aio.pool import SignaturePool
from .client_connection import ReverseClientConnection
from .config import RSA_SUITES, ReverseClientConfig, ReverseServerConfig
from .errors import PuzzleRefused
from .messages import Mode, ReverseHandshakeType
from .model_dos import DoSParams, run_dos, sweep_attack_rates
from .model_dos_driver import (
    NET,
    TCP,
    Endpoints,
    HandshakeCosts,
    Scripts,
    record_scripts,
    run_driver_dos,
)
from .onoff import make_offline_token, sign_online
from .primes import random_prime
from .puzzle import (
    Construction,
    PuzzleParams,
    PuzzleReply,
    ReplayCache,
    make_puzzle,
    min_feasible_k,
    push_puzzle_reply,
    solve,
    verify_reply,
)
from .server_connection import ReverseServerConnection

__all__ = [
    "PAPER_TABLE2",
    "PAPER_TABLE3",
    "PAPER_TABLE4",
    "table2",
    "table3",
    "table4",
    "handshake_cpu",
    "ots_costs",
    "puzzle_costs",
    "throughput",
    "server_puzzle_path_costs",
    "measure_handshake_costs",
    "openssl_speed",
    "dos",
    "calibrated_dos_params",
    "dos_sweep",
    "dos_driver_comparison",
    "run_config",
]

BITS = (512, 1024, 2048, 4096)
_MSG = b"table 2"
PAPER_TABLE2 = {512: (1.7, 0.2), 1024: (8.1, 0.5), 2048: (50.0, 1.5), 4096: (339.7, 5.3)}
"""bits -> (private ms, public ms), paper Table 2."""
PAPER_TABLE3 = {512: (1.9, 0.2), 1024: (8.6, 0.5), 2048: (51.5, 1.5), 4096: (345.0, 5.3)}
"""bits -> (original ms, reverse ms), paper Table 3."""
PAPER_TABLE4 = {512: 91.0, 1024: 310.0, 2048: 2924.0, 4096: 24332.0}
"""bits -> RSA key generation ms, paper Table 4 (mean of 10)."""


def _rng(n: int) -> bytes:
    return os.urandom(n)


def _time_per_call(fn: Callable[[], object], min_seconds: float, min_calls: int = 3) -> float:
    """Seconds per call: repeat ``fn`` for at least ``min_seconds`` and ``min_calls`` calls."""
    calls = 0
    start = time.process_time()
    while True:
        fn()
        calls += 1
        elapsed = time.process_time() - start
        if elapsed >= min_seconds and calls >= min_calls:
            return elapsed / calls


@cache
def rsa_key(bits: int) -> rsa.RSAPrivateKey:
    """An RSA key with e = 65537 (512 bits: built from :func:`random_prime`, see the module doc)."""
    if bits >= 1024:
        return rsa.generate_private_key(65537, bits)
    e = 65537
    while True:
        p, q = random_prime(bits // 2, _rng), random_prime(bits // 2, _rng)
        if p != q and (p * q).bit_length() == bits:
            break
    d = pow(e, -1, (p - 1) * (q - 1))
    return rsa.RSAPrivateNumbers(
        p, q, d, rsa.rsa_crt_dmp1(d, p), rsa.rsa_crt_dmq1(d, q), rsa.rsa_crt_iqmp(p, q),
        rsa.RSAPublicNumbers(e, p * q),
    ).private_key()


@cache
def credentials(bits: int, name: str = "localhost") -> Credentials:
    return generate_self_signed(name, key_size=bits)


def table2(quick: bool = True) -> pd.DataFrame:
    """RSA private-key (sign) and public-key (verify) operation times; ratio private / public.

    Two measurements: through ``cryptography`` (what the handshake code pays,
    Python call overhead included) and ``openssl speed`` (``cli_*`` columns,
    the paper's tool, NaN if the CLI is missing).
    """
    cli = openssl_speed(BITS, seconds=1 if quick else 3)
    rows = []
    for bits in BITS:
        key = rsa_key(bits)
        sig = key.sign(_MSG, padding.PKCS1v15(), hashes.SHA256())
        pub = key.public_key()
        budget = 0.2 if quick else 1.0
        def sign(k: rsa.RSAPrivateKey = key) -> bytes:
            return k.sign(_MSG, padding.PKCS1v15(), hashes.SHA256())

        def verify(p: rsa.RSAPublicKey = pub, s: bytes = sig) -> None:
            p.verify(s, _MSG, padding.PKCS1v15(), hashes.SHA256())

        priv_s = _time_per_call(sign, budget)
        pub_s = _time_per_call(verify, budget)
        paper_priv, paper_pub = PAPER_TABLE2[bits]
        rows.append({
            "bits": bits, "private_ms": priv_s * 1e3, "public_ms": pub_s * 1e3, "ratio": priv_s / pub_s,
            "cli_private_ms": cli.get(bits, (float("nan"),) * 2)[0],
            "cli_public_ms": cli.get(bits, (float("nan"),) * 2)[1],
            "paper_private_ms": paper_priv, "paper_public_ms": paper_pub, "paper_ratio": paper_priv / paper_pub,
        })
    df = pd.DataFrame(rows)
    df["cli_ratio"] = df["cli_private_ms"] / df["cli_public_ms"]
    df["ratio_vs_paper"] = df["ratio"] / df["paper_ratio"]
    df["cli_ratio_vs_paper"] = df["cli_ratio"] / df["paper_ratio"]
    return df


def _ots_sign_seconds(scheme: ots.OTSScheme, quick: bool) -> float:
    """Median online one-time signing time (tokens made first; only ``sign`` is timed)."""
    key = rsa_key(1024)
    tokens = [make_offline_token(key, _rng, scheme) for _ in range(50 if quick else 500)]
    times = []
    for token in tokens:
        start = time.perf_counter()
        sign_online(token, b"transcript hash of the handshake")
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def table3(quick: bool = True, t2: pd.DataFrame | None = None) -> pd.DataFrame:
    """Online server cost: original = private + public op; reverse = public op (+ our one-time signing).

    ``speedup_paper_style`` uses the paper's accounting (public op only);
    ``speedup_with_ots`` adds the measured Lamport signing time.
    """
    t2 = table2(quick) if t2 is None else t2
    ots_ms = _ots_sign_seconds(ots.OTSScheme.LAMPORT, quick) * 1e3
    df = pd.DataFrame({"bits": t2["bits"]})
    df["original_ms"] = t2["private_ms"] + t2["public_ms"]
    df["reverse_ms"] = t2["public_ms"]
    df["reverse_with_ots_ms"] = t2["public_ms"] + ots_ms
    df["speedup_paper_style"] = df["original_ms"] / df["reverse_ms"]
    df["speedup_with_ots"] = df["original_ms"] / df["reverse_with_ots_ms"]
    df["cli_speedup"] = (t2["cli_private_ms"] + t2["cli_public_ms"]) / t2["cli_public_ms"]
    df["paper_original_ms"] = [PAPER_TABLE3[b][0] for b in df["bits"]]
    df["paper_reverse_ms"] = [PAPER_TABLE3[b][1] for b in df["bits"]]
    df["paper_speedup"] = df["paper_original_ms"] / df["paper_reverse_ms"]
    df["speedup_vs_paper"] = df["speedup_paper_style"] / df["paper_speedup"]
    df["cli_speedup_vs_paper"] = df["cli_speedup"] / df["paper_speedup"]
    df["ots_sign_us"] = ots_ms * 1e3
    return df


def table4(quick: bool = True) -> pd.DataFrame:
    """RSA key generation: OpenSSL (mean, sd over repetitions) and the Python puzzle solver."""
    reps = {512: 3, 1024: 5, 2048: 3, 4096: 2} if quick else {512: 10, 1024: 10, 2048: 10, 4096: 10}
    rows = []
    for bits in BITS:
        times = []
        for _ in range(reps[bits]):
            start = time.process_time()
            if bits >= 1024:
                rsa.generate_private_key(65537, bits)
            else:
                rsa_key.__wrapped__(bits)  # the Python generator (OpenSSL refuses 512 bits here)
            times.append(time.process_time() - start)
        rows.append({
            "bits": bits, "generator": "openssl" if bits >= 1024 else "python", "reps": len(times),
            "keygen_ms": statistics.mean(times) * 1e3,
            "keygen_sd_ms": statistics.stdev(times) * 1e3 if len(times) > 1 else float("nan"),
            "paper_keygen_ms": PAPER_TABLE4[bits],
        })
    df = pd.DataFrame(rows)
    df["keygen_vs_1024"] = df["keygen_ms"] / df.loc[df.bits == 1024, "keygen_ms"].iloc[0]
    df["paper_vs_1024"] = df["paper_keygen_ms"] / PAPER_TABLE4[1024]
    solver_reps = {512: 3, 1024: 3, 2048: 1, 4096: 0} if quick else {512: 10, 1024: 10, 2048: 5, 4096: 1}
    solver = []
    for bits in BITS:
        times = []
        for _ in range(solver_reps[bits]):
            challenge = make_puzzle(PuzzleParams(n_bits=bits), _rng)
            start = time.process_time()
            solve(challenge.request, _rng)
            times.append(time.process_time() - start)
        solver.append(statistics.mean(times) * 1e3 if times else float("nan"))
    df["puzzle_solve_ms"] = solver
    return df


class _ServerClock:
    """The server seen through a stopwatch: sums the CPU seconds spent inside its methods."""

    def __init__(self, server: ReverseServerConnection) -> None:
        self.server = server
        self.seconds = 0.0

    def receive_data(self, data: bytes) -> list[Any]:
        start = time.process_time()
        try:
            return self.server.receive_data(data)
        finally:
            self.seconds += time.process_time() - start

    def data_to_send(self) -> bytes:
        start = time.process_time()
        try:
            return self.server.data_to_send()
        finally:
            self.seconds += time.process_time() - start


def _pump_timed(client: ReverseClientConnection, server: ReverseServerConnection) -> float:
    """Run a handshake in memory; return the seconds spent inside the *server* only."""
    clock = _ServerClock(server)
    pipe(client, clock, max_rounds=20)
    if not server.handshake_complete:
        raise RuntimeError("handshake did not complete")
    return clock.seconds


def handshake_cpu(quick: bool = True, bits: tuple[int, ...] | None = None) -> pd.DataFrame:
    """Server CPU per full handshake of this implementation (sans-IO, in memory), by mode and key size.

    Original = RSA key exchange (server decrypts); reverse modes with a warm pool.
    The puzzle mode asks for 1024-bit client keys with the default window.
    """
    bits = bits or (1024, 2048, 4096)
    reps = {"original": 20, "client_auth": 20, "puzzle": 4} if quick else {"original": 100, "client_auth": 100, "puzzle": 20}
    rows = []
    for b in bits:
        creds, client_creds = credentials(b), credentials(b, "client")
        pool = SignaturePool(sum(reps.values()) + 1)
        server_key = creds.private_key
        assert server_key is not None  # generate_self_signed makes the key
        pool.fill(partial(make_offline_token, server_key, _rng))
        cfg = ReverseServerConfig(ServerConfig(credentials=creds, cipher_suites=RSA_SUITES), pool=pool)
        for mode, modes in (("original", ()), ("client_auth", (Mode.CLIENT_AUTH,)), ("puzzle", (Mode.PUZZLE,))):
            times = []
            for _ in range(reps[mode]):
                client = ReverseClientConnection(ReverseClientConfig(
                    ClientConfig(server_name="localhost", cipher_suites=RSA_SUITES), modes=modes,
                    credentials=client_creds))
                times.append(_pump_timed(client, ReverseServerConnection(cfg)))
            rows.append({"bits": b, "mode": mode, "reps": len(times), "server_ms": statistics.median(times) * 1e3})
    df = pd.DataFrame(rows)
    base = df[df["mode"] == "original"].set_index("bits")["server_ms"]
    df["speedup_vs_original"] = base.loc[df["bits"]].to_numpy() / df["server_ms"].to_numpy()
    return df


def ots_costs(quick: bool = True) -> pd.DataFrame:
    """Per one-time scheme: offline token (2048-bit W), online signing, verification, sizes.

    Tokens are made first and signed afterwards (as from a pool), so the
    online time is not flattered by caches still warm from key generation.
    """
    key = rsa_key(2048)
    reps = 20 if quick else 200
    rows = []
    for scheme in (s for s in ots.OTSScheme if s is not ots.OTSScheme.RSA_FALLBACK):
        offline, online, verify = [], [], []
        tokens = []
        for _ in range(reps):
            t0 = time.process_time()
            tokens.append(make_offline_token(key, _rng, scheme))
            offline.append(time.process_time() - t0)
        for token in tokens:
            t1 = time.perf_counter()
            sig = sign_online(token, b"M")
            t2 = time.perf_counter()
            ok = ots.verify(scheme, sig.public_key, b"M", sig.one_time_signature)
            t3 = time.perf_counter()
            assert ok
            online.append(t2 - t1)
            verify.append(t3 - t2)
        rows.append({
            "scheme": scheme.name, "offline_ms": statistics.median(offline) * 1e3,
            "online_sign_us": statistics.median(online) * 1e6, "verify_us": statistics.median(verify) * 1e6,
            "public_key_bytes": ots.public_key_size(scheme), "signature_bytes": ots.signature_size(scheme),
        })
    return pd.DataFrame(rows)


def server_puzzle_path_costs(bits: int = 2048, reps: int = 50) -> dict[str, float]:
    """Server CPU seconds, whole stack, to (a) answer a ClientHello with a puzzle, (b) refuse a bogus reply.

    (a) is what a flood of ClientHellos costs -- the puzzle is only issued
    after the hello, so this work is not protected by it; (b) parses a
    PuzzleReply with a random modulus and refuses it at the range check.
    """
    creds = credentials(bits)
    cfg = ReverseServerConfig(ServerConfig(credentials=creds, cipher_suites=RSA_SUITES), modes=(Mode.PUZZLE,))
    hello = ReverseClientConnection(ReverseClientConfig(
        ClientConfig(server_name="localhost", cipher_suites=RSA_SUITES), modes=(Mode.PUZZLE,))).data_to_send()
    body = push_puzzle_reply(PuzzleReply(b"", b"\xc5" * (cfg.puzzle.n_bits // 8), 65537, b"\x01" * 128))
    framed = frame_handshake(ReverseHandshakeType.PUZZLE_REPLY, body)
    bogus = bytes([22, 3, 3]) + len(framed).to_bytes(2, "big") + framed
    issue, reject = [], []
    for _ in range(reps):
        t0 = time.process_time()
        server = ReverseServerConnection(cfg)
        server.receive_data(hello)
        server.data_to_send()
        t1 = time.process_time()
        try:
            server.receive_data(bogus)
        except PuzzleRefused:
            pass
        server.data_to_send()
        t2 = time.process_time()
        issue.append(t1 - t0)
        reject.append(t2 - t1)
    return {"issue": statistics.median(issue), "reject": statistics.median(reject)}


def puzzle_costs(quick: bool = True) -> dict[str, pd.DataFrame]:
    """Three tables: ``vs_k`` (solve time against K), ``vs_p`` (against pre-image bits), ``verify``."""
    n_bits = 1024
    reps = 3 if quick else 10
    k_min = min_feasible_k(n_bits)
    rows = []
    for k in (k_min, k_min + 2, k_min + 4, k_min + 8, n_bits // 2 + 16, n_bits // 2 + 64):
        params = PuzzleParams(n_bits=n_bits, k=k)
        times, attempts = [], []
        for _ in range(reps):
            challenge = make_puzzle(params, _rng)
            start = time.process_time()
            sol = solve(challenge.request, _rng)
            times.append(time.process_time() - start)
            attempts.append(sol.p_attempts)
        rows.append({"n_bits": n_bits, "k": k, "k_minus_half": k - n_bits // 2, "solve_ms": statistics.mean(times) * 1e3,
                     "p_attempts": statistics.mean(attempts), "reps": reps})
    vs_k = pd.DataFrame(rows)
    p_bits = (0, 8, 12, 16, 18) if quick else (0, 8, 12, 16, 20, 22)
    rows = []
    for p in p_bits:
        construction = Construction.HASH_AND_RANGE if p else Construction.RANGE
        params = PuzzleParams(construction, n_bits=512, preimage_bits=p)
        times, hashes_tried = [], []
        for _ in range(reps):
            challenge = make_puzzle(params, _rng)
            start = time.process_time()
            sol = solve(challenge.request, _rng)
            times.append(time.process_time() - start)
            hashes_tried.append(sol.hashes_tried)
        rows.append({"n_bits": 512, "preimage_bits": p, "solve_ms": statistics.mean(times) * 1e3,
                     "hashes_tried": statistics.mean(hashes_tried), "expected_hashes": 2 ** (p - 1) if p else 0})
    vs_p = pd.DataFrame(rows)
    params = PuzzleParams(Construction.HASH_AND_RANGE, n_bits=1024, preimage_bits=8)
    challenge = make_puzzle(params, _rng)
    sol = solve(challenge.request, _rng)
    wrong_x = replace(sol.reply, preimage=bytes([sol.reply.preimage[0] ^ 1]))
    outside = replace(sol.reply, modulus=(int.from_bytes(sol.reply.modulus, "big") ^ (1 << 900)).to_bytes(128, "big"))

    def attempt(reply: PuzzleReply, check: bool) -> None:
        try:
            verify_reply(challenge, reply, verify_signature=check, replay_cache=ReplayCache())
        except Exception:  # noqa: BLE001 - the refusals are what is timed
            pass

    budget = 0.2 if quick else 1.0
    checks = [
        ("reject wrong pre-image (step 1)", lambda: attempt(wrong_x, True)),
        ("reject modulus outside window (step 2)", lambda: attempt(outside, True)),
        ("accept, signature skipped", lambda: attempt(sol.reply, False)),
        ("accept, signature verified (step 3)", lambda: attempt(sol.reply, True)),
    ]
    verify = pd.DataFrame([{"check": name, "us": _time_per_call(fn, budget) * 1e6} for name, fn in checks])
    return {"vs_k": vs_k, "vs_p": vs_p, "verify": verify}


def throughput(quick: bool = True, bits: tuple[int, ...] = (2048, 4096)) -> pd.DataFrame:
    """Handshakes/s of the real asyncio server (subprocess) under closed-loop load, original vs reverse.

    The load generator runs in this process on the other core; with two cores
    it, not the server, may be the bottleneck (reverse SSL moves the private-key
    operation to the clients).  So the server's own CPU seconds per handshake
    (``server_cpu_ms_per_hs``) and the capacity they imply
    (``server_capacity_hs`` = handshakes per CPU second) are reported next to
    the wall-clock rate; the ratio compares capacities.  The pool is filled
    before the clock starts and not refilled (``--refill-rate 0``), so the
    server's CPU time holds only online work.
    """
    duration = 4.0 if quick else 20.0
    concurrency = 8 if quick else 32
    rows = []
    for b in bits:
        pool = (3000 if b <= 2048 else 1000) * (1 if quick else 5)
        rows += [run_server_and_load(mode, b, duration, concurrency, pool) for mode in ("original", "client-auth")]
    df = pd.DataFrame(rows)
    base = df[df["mode"] == "original"].set_index("bits")
    df["capacity_ratio_vs_original"] = df["server_capacity_hs"].to_numpy() / base.loc[df["bits"], "server_capacity_hs"].to_numpy()
    df["wall_ratio_vs_original"] = df["wall_rate_hs"].to_numpy() / base.loc[df["bits"], "wall_rate_hs"].to_numpy()
    return df


def measure_handshake_costs(quick: bool = True, hs: pd.DataFrame | None = None,
                  puzzles: dict[str, pd.DataFrame] | None = None) -> dict[str, float]:
    """The per-operation costs the DoS model needs (seconds), measured on this machine."""
    hs = handshake_cpu(quick, bits=(2048,)) if hs is None else hs
    puzzles = puzzle_costs(quick) if puzzles is None else puzzles
    at = hs[hs["bits"] == 2048].set_index("mode")["server_ms"] / 1e3
    path = server_puzzle_path_costs(2048, 30 if quick else 200)
    default_k = puzzles["vs_k"].set_index("k_minus_half")["solve_ms"] / 1e3
    key = rsa_key(2048).public_key()
    encrypt = _time_per_call(lambda: key.encrypt(b"\x03\x03" + bytes(46), padding.PKCS1v15()), 0.1)
    return {
        "cost_original": float(at["original"]),
        "cost_reverse": float(at["puzzle"]),
        "cost_reject": path["reject"],
        "cost_issue": path["issue"],
        "solve_time": float(default_k.loc[16]),
        "attack_request_cost": float(encrypt),
    }


def calibrated_dos_params(costs: dict[str, float], **overrides: Any) -> DoSParams:
    """A :class:`DoSParams` whose service times are the measured ``costs``."""
    return DoSParams(**{**costs, **overrides})


def dos_sweep(costs: dict[str, float], quick: bool = True, seed: int = 1) -> pd.DataFrame:
    """Legitimate success rate, server utilisation, attacker cost per accepted handshake vs attack rate.

    The legitimate load is 30 % of the server's measured capacity for the
    standard handshake.
    """
    legit = 0.3 / costs["cost_original"]
    capacity = 1.0 / costs["cost_original"]
    multiples = (0.0, 0.5, 1.0, 2.0, 5.0, 10.0) if quick else (0.0, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0)
    base = calibrated_dos_params(costs, legit_rate=legit, duration=20.0 if quick else 120.0, seed=seed)
    rows = sweep_attack_rates(base, [m * capacity for m in multiples])
    df = pd.DataFrame(rows)
    df["puzzles"] = df["puzzles"].astype(bool)
    df["attack_rate_x_capacity"] = df["attack_rate"] / capacity
    return df


def dos_driver_comparison(costs: dict[str, float], quick: bool = True, seed: int = 1,
                          scripts: Scripts | None = None,
                          models: tuple[str, ...] = ("old", "driver")) -> pd.DataFrame:
    """Old model (:mod:`reverse_ssl.model_dos`) vs driver (:mod:`reverse_ssl.model_dos_driver`), same sweep.

    One row per (``model``, ``puzzles``, attack rate).  The flood is :func:`dos_sweep`'s
    (legitimate load 30 % of the standard handshake's capacity, attack rates in multiples
    of that capacity, four attacker cores, the measured ``costs``); both models run every
    point with the same parameters and seed.  Quick mode runs 6 simulated seconds with a
    2 s handshake timeout (the driver moves every legitimate handshake's bytes over TCP:
    about 25 segments and their ACKs each); the full run 60 s with the default 5 s.
    ``scripts``: recorded handshakes to replay (default: recorded here with a 2048-bit
    server key and the default 1024-bit puzzle, about a second).  ``models`` picks which of the
    two run (both by default).

    Extra columns: ``wall_s`` (this point's wall-clock seconds), ``simulated_connections``
    and ``simulated_legit_connections`` (expected counts: rate x duration), and the same per
    wall second, ``conn_per_wall_s`` and ``legit_conn_per_wall_s`` (the legitimate ones are
    the driver's TCP connections; its attackers are abstract, as in the old model).
    """
    capacity = 1.0 / costs["cost_original"]
    multiples = (0.0, 0.5, 1.0, 2.0, 5.0, 10.0) if quick else (0.0, 0.25, 0.5, 1.0, 2.0, 5.0,
                                                               10.0, 20.0)
    base = calibrated_dos_params(costs, legit_rate=0.3 * capacity, seed=seed,
                                 duration=6.0 if quick else 60.0, timeout=2.0 if quick else 5.0)
    if scripts is None:
        scripts = record_scripts(Endpoints(credentials(2048)), HandshakeCosts.from_params(base))
    rows = []
    for puzzles in (False, True):
        for m in multiples:
            p = replace(base, attack_rate=m * capacity, puzzles=puzzles)
            runs = (("old", run_dos), ("driver", lambda q: run_driver_dos(q, scripts)))
            for model, run in (r for r in runs if r[0] in models):
                t0 = time.perf_counter()
                r = run(p)
                wall = time.perf_counter() - t0
                conns, legit = (p.legit_rate + p.attack_rate) * p.duration, p.legit_rate * p.duration
                rows.append({"model": model, "puzzles": puzzles, "attack_rate": p.attack_rate,
                             "attack_rate_x_capacity": m, **r, "wall_s": wall,
                             "simulated_connections": conns, "simulated_legit_connections": legit,
                             "conn_per_wall_s": conns / wall, "legit_conn_per_wall_s": legit / wall})
    return pd.DataFrame(rows)


def dos(costs: dict[str, float], variant: str = "model", quick: bool = True, seed: int = 1,
        scripts: Scripts | None = None) -> pd.DataFrame:
    """The DoS figure -- legitimate success under a handshake flood, with and without puzzles.

    ``variant="model"``: the hand-written SimPy model (:mod:`reverse_ssl.model_dos`) over the
    attack rates of :func:`dos_sweep` (its DataFrame).  ``variant="driver"``: the same flood with
    the bytes of real handshakes on the driver (:mod:`reverse_ssl.model_dos_driver`), the ``driver`` rows
    of :func:`dos_driver_comparison` (``scripts`` as there).  ``costs`` are the measured
    per-operation costs (:func:`measure_handshake_costs`).
    """
    if variant == "model":
        return dos_sweep(costs, quick, seed)
    if variant == "driver":
        return dos_driver_comparison(costs, quick, seed, scripts, models=("driver",))
    raise ValueError(f"variant must be 'model' or 'driver', not {variant!r}")


def run_config() -> dict[str, Any]:
    """What this module's results depend on beyond the code and the quick flag, for ``run.json``.

    The DoS model's default parameters and the driver's link and TCP; the notebook passes this to
    :func:`testbed.results.start_run`, which adds the git revision, versions and CPU count.
    """
    return {"dos_defaults": asdict(DoSParams()),
            "dos_driver": {"link": asdict(NET), "tcp": asdict(TCP)}}
