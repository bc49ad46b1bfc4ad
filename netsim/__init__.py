"""Shared SimPy building blocks and web workloads for the testbed.

Workloads (no SimPy):

* :mod:`netsim.logparse` — vectorised, chunked access-log parsers (CLF/Combined, EPA,
  WorldCup98 CSV, LP DAAC, SDSC) that count malformed lines instead of failing;
* :mod:`netsim.workload` — the paper's preprocessing (GET/200, canonical URLs, (URL, size)
  objects) and ~10 MB daytime chunks;
* :mod:`netsim.tracestats` — redundancy / inherent compressibility, repetition vs window,
  request-size CDFs;
* :mod:`netsim.traces` — the trace manifest, ``fetch`` and the ``python -m netsim.traces`` CLI;
* :mod:`netsim.synth` — synthetic workloads (Zipf, heavy tails, temporal locality) fitted to a
  trace or to the paper's ``www.lcs`` statistics.

Models:

* :mod:`netsim.cache` — infinite and byte-bounded LRU caches (sans-IO);
* :mod:`netsim.host` — SimPy hosts with a CPU queue (service times from measurements);
* :mod:`netsim.link`, :mod:`netsim.tcp` — SimPy links (bandwidth, delay, FIFO queue, loss) and
  a byte-accurate TCP (sequence numbers, byte-counted windows, cumulative ACKs, timeouts,
  FIN/RST); ADSL and LAN presets;
* :mod:`netsim.drive` — runs real sans-IO protocol objects (``receive_data`` /
  ``data_to_send``) over that TCP in simulated time, charging host CPU per operation;
* :mod:`netsim.cpu` — the per-operation CPU cost table (measured from the real code, plus a
  frozen default) and the TLS 1.2 model that charges it.

The SSL-splitting cost model, trace replay, ADSL latency model and §6.3 experiments built on
these blocks live in :mod:`sslsplit` (``sslsplit.costmodel``, ``sslsplit.replay``,
``sslsplit.latency``, ``sslsplit.trace_experiments``).
"""

from .cache import InfiniteCache, LRUCache
from .cpu import DEFAULT_COSTS, CostTable, Tls12Cpu, measure_costs
from .drive import Driver, run_pair
from .host import Host, HostParams
from .link import ADSL_DOWN, ADSL_UP, LAN, Duplex, Link, LinkParams
from .logparse import LogFormat, ParseReport, iter_log, read_log
from .synth import LCS_LIKE, SynthParams, fit_params, generate
from .tcp import SeqState, TcpConnection, TcpParams
from .tracestats import compressibility, trace_stats
from .workload import canonical_url, daytime_chunks, preprocess, select_chunk

__all__ = [
    "ADSL_DOWN",
    "ADSL_UP",
    "DEFAULT_COSTS",
    "LAN",
    "LCS_LIKE",
    "CostTable",
    "Driver",
    "Duplex",
    "Host",
    "HostParams",
    "InfiniteCache",
    "LRUCache",
    "Link",
    "LinkParams",
    "LogFormat",
    "ParseReport",
    "SeqState",
    "SynthParams",
    "TcpConnection",
    "TcpParams",
    "Tls12Cpu",
    "canonical_url",
    "compressibility",
    "daytime_chunks",
    "fit_params",
    "generate",
    "iter_log",
    "measure_costs",
    "preprocess",
    "read_log",
    "run_pair",
    "select_chunk",
    "trace_stats",
]
