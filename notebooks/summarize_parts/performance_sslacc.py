"""The real SSLACC cluster's rows of the performance table (``bench_sslacc_cluster.py``): the
mirrored pair, and the bucket layout with 1, 2 and 3 members, against the same node program
alone, in the same run."""

from __future__ import annotations

from .base import Source
from .performance import cmd, load, med, n_of, rng, row, verdict


@row("performance")
def _sslacc_cluster(src: Source) -> list[str]:
    d = load(src, "benchmarks/sslacc_cluster.json")
    down, hs = d["download"], d["handshakes"]
    return [
        f"SSLACC on Linux, the mirrored pair (cluster, then commit) vs the same node alone "
        f"(`--standalone`): {d['streams']} threads each downloading a 16 MiB file again and "
        f"again for {d['seconds']:g} s; {d['streams']} threads of 1 KiB requests on new "
        f"connections (full RSA-2048 handshakes) for {d['seconds']:g} s; Python `ssl` clients "
        "at the nodes' priority" + n_of(d),
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


@row("performance")
def _sslacc_members(src: Source) -> list[str]:
    d = load(src, "benchmarks/sslacc_cluster.json")
    down, hs = d["download"], d["handshakes"]
    n = (1, 2, 3)
    return [
        "SSLACC on Linux, the bucket layout (every member serves its buckets, mirrored to the "
        "next) with 1 / 2 / 3 members, same load and run as above, two cores shared" + n_of(d),
        cmd("python benchmarks/bench_sslacc_cluster.py", "sslacc_cluster.json"),
        " / ".join(f"{med(down[f'members{i}_MB_per_s']):.0f}" for i in n) + " MB/s; "
        + " / ".join(f"{med(hs[f'members{i}_handshakes_per_s']):.0f}" for i in n)
        + " handshakes/s",
        f"alone {med(down['standalone_MB_per_s']):.0f} MB/s, "
        f"{med(hs['standalone_handshakes_per_s']):.0f} handshakes/s",
        "goodput " + " / ".join(rng(down[f"members{i}_over_standalone"]) for i in n)
        + "; handshakes " + " / ".join(rng(hs[f"members{i}_over_standalone"]) for i in n),
        "report",
        "measured",
    ]
