"""SSL splitting: an untrusted proxy serves cached payloads, the origin sends handshakes, MACs and ids.

The package has the same rooms as every paper package of the testbed:

* **sans-IO cores** -- :mod:`sslsplit.wire` (proxy--server messages), :mod:`sslsplit.writer`
  (the server's record writer and its cipher-suite modes), :mod:`sslsplit.store` (published
  payloads), :mod:`sslsplit.splicer` (the proxy's core), :mod:`sslsplit.cache` (cache
  hierarchy); :mod:`sslsplit.state` is the splicer's state machine (an enum and the transition
  table the splicer consults) and :mod:`sslsplit.errors` the one exception root,
  :class:`~sslsplit.errors.SslSplitError`;
* **adapters** -- the subpackage :mod:`sslsplit.aio`, everything on sockets: the cache-miss
  protocol and a background loop (:mod:`~sslsplit.aio.payloads`), the programs
  (:mod:`~sslsplit.aio.server`, :mod:`~sslsplit.aio.proxy`, :mod:`~sslsplit.aio.volunteer`; run
  as ``python -m sslsplit.server`` and so on) and the loopback testbed
  (:mod:`~sslsplit.aio.testbed`);
* **models** -- :mod:`sslsplit.costmodel` (§6.3: server bytes per request, structural and
  linear, :class:`~sslsplit.costmodel.SplittingCostModel`), :mod:`sslsplit.replay` (trace
  replay through a cost model), and Figure 12's ADSL testbed in SimPy twice:
  :mod:`sslsplit.model_latency` (hand-typed flights) and :mod:`sslsplit.model_driver` (the real
  objects moved by :mod:`netsim.drive`);
* **parameters** -- :mod:`sslsplit.params` (the paper's testbed), :mod:`sslsplit.synth`
  (synthetic traces), :mod:`sslsplit.paper_points` (the published numbers);
* **experiments** -- :mod:`sslsplit.experiments`, one function per figure returning a
  DataFrame, ``variant="model" | "driver" | "measured"`` where a figure has several forms.

Barnraising (§5), the volunteers' side, is the subpackage :mod:`sslsplit.barnraising`.
"""
