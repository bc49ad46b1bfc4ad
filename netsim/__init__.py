"""SimPy building blocks and the generic driver that runs real sans-IO protocol objects on them.

* :mod:`netsim.cache` — infinite and byte-bounded LRU caches (sans-IO);
* :mod:`netsim.host` — SimPy hosts with a CPU queue (service times from measurements);
* :mod:`netsim.link`, :mod:`netsim.tcp` — SimPy links (bandwidth, delay, FIFO queue, loss) and
  a byte-accurate TCP (sequence numbers, byte-counted windows, cumulative ACKs, timeouts,
  FIN/RST); a generic 100 Mbit/s :data:`~netsim.link.LAN` preset;
* :mod:`netsim.drive` — runs real sans-IO protocol objects (``receive_data`` /
  ``data_to_send``) over that TCP in simulated time, charging host CPU per operation;
* :mod:`netsim.pcap` — writes every packet the TCP model sends as a pcap file (real
  Ethernet/IPv4/TCP headers, simulated send times) for Wireshark; off unless attached;
* :mod:`netsim.relay` — middleboxes on the driver: a relay that terminates one connection and
  opens another, forwarding (cut through, or whole TLS records) or rewriting the stream;
* :mod:`netsim.cpu` — the per-operation CPU cost table (measured from the real code, plus a
  frozen default) and the TLS 1.2 model that charges it from what the connection reports it
  did (its trace, :mod:`tls12.trace`).

This package knows no paper: the papers' links and workloads (the SSL-splitting ADSL line, the
SINE client bandwidths, the synthetic ``www.lcs`` trace) live in their packages
(``sslsplit.params``, ``sine.params``, ``sslsplit.synth``). The trace catalogue, run tooling
(``testbed.results``, ``testbed.sweep``) and the Linux link lab (``testbed.linux``) live one
floor up, in :mod:`testbed`.
"""

from .cache import InfiniteCache, LRUCache
from .cpu import DEFAULT_COSTS, CostTable, Tls12Cpu, measure_costs
from .drive import Driver, run_pair
from .host import Host, HostParams
from .link import LAN, Duplex, Link, LinkParams
from .logparse import LogFormat, ParseReport, iter_log, read_log
from .tcp import SeqState, TcpConnection, TcpParams

__all__ = [
    "DEFAULT_COSTS",
    "LAN",
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
    "TcpConnection",
    "TcpParams",
    "Tls12Cpu",
    "iter_log",
    "measure_costs",
    "read_log",
    "run_pair",
]
