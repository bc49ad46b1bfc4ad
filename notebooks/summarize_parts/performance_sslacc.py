"""The real SSLACC cluster's row of the performance table (``bench_sslacc_cluster.py``): the
mirrored pair against the same node program alone, in the same run."""

from __future__ import annotations

from .base import Source
from .performance import cmd, load, med, n_of, rng, row, verdict


@row("performance")
def _sslacc_cluster(src: Source) -> list[str]:
    d = load(src, "benchmarks/sslacc_cluster.json")
    down, hs = d["download"], d["handshakes"]
    return [
        f"SSLACC on Linux, the mirrored pair (cluster, then commit) vs the same node alone "
        f"(`--standalone`): {d['streams']} concurrent 16 MiB downloads; {d['streams']} threads of "
        "1 KiB requests on new connections (full RSA-2048 handshakes), Python `ssl` clients"
        + n_of(d),
        cmd("python benchmarks/bench_sslacc_cluster.py", "sslacc_cluster.json"),
        f"pair {med(down['pair_MB_per_s']):.0f} MB/s, {med(hs['pair_handshakes_per_s']):.0f} "
        f"handshakes/s; {med(down['replication_bytes_per_payload_byte']):.4f} cluster bytes "
        "per payload byte (download)",
        f"alone {med(down['standalone_MB_per_s']):.0f} MB/s, "
        f"{med(hs['standalone_handshakes_per_s']):.0f} handshakes/s",
        f"goodput {rng(down['pair_over_standalone'])}; handshakes {rng(hs['pair_over_standalone'])}",
        verdict(f"goodput ≥ {d['goodput_target']:g}", d["goodput_target_met"]),
        "measured",
    ]
