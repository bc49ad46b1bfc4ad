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

* :mod:`netsim.costmodel` — server bytes and round trips per request for HTTP, HTTPS and SSL
  splitting (structural and paper-style linear);
* :mod:`netsim.cache` — infinite and byte-bounded LRU caches (sans-IO);
* :mod:`netsim.replay` — vectorised trace replay through a cost model (cold / warm / preloaded);
* :mod:`netsim.host` — SimPy hosts with a CPU queue (service times from measurements);
* :mod:`netsim.link`, :mod:`netsim.tcp` — SimPy links (bandwidth, delay, FIFO queue, loss) and
  a TCP transfer model (set-up, slow start, ACK clocking, timeouts); ADSL and LAN presets;
* :mod:`netsim.latency` — per-request latency over the paper's ADSL testbed (Figure 12);
* :mod:`netsim.experiments` — the §6.3 figures as DataFrames.
"""

from .cache import InfiniteCache, LRUCache
from .costmodel import CostModel, LinearCost, Protocol, WireModel, WireParams, paper_model
from .host import Host, HostParams
from .link import ADSL_DOWN, ADSL_UP, LAN, Duplex, Link, LinkParams
from .logparse import LogFormat, ParseReport, iter_log, read_log
from .replay import replay
from .synth import LCS_LIKE, SynthParams, fit_params, generate
from .tcp import TcpConnection, TcpParams
from .tracestats import compressibility, trace_stats
from .workload import canonical_url, daytime_chunks, preprocess, select_chunk

__all__ = [
    "ADSL_DOWN",
    "ADSL_UP",
    "LAN",
    "LCS_LIKE",
    "CostModel",
    "Duplex",
    "Host",
    "HostParams",
    "InfiniteCache",
    "LRUCache",
    "LinearCost",
    "Link",
    "LinkParams",
    "LogFormat",
    "ParseReport",
    "Protocol",
    "SynthParams",
    "TcpConnection",
    "TcpParams",
    "WireModel",
    "WireParams",
    "canonical_url",
    "compressibility",
    "daytime_chunks",
    "fit_params",
    "generate",
    "iter_log",
    "paper_model",
    "preprocess",
    "read_log",
    "replay",
    "select_chunk",
    "trace_stats",
]
