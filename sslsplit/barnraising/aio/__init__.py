"""The Barnraising services on sockets: thin asyncio adapters around the sans-IO cores.

* :mod:`.broker` -- the broker's HTTP/1.1 join service and DNS responder on sockets, around
  :mod:`..service` (``python -m sslsplit.barnraising.broker`` is its command line);
* :mod:`.dns` -- the authoritative DNS responder over UDP and TCP, around :mod:`..zone`;
* :mod:`.sharing` -- the volunteers' cache sharing, sending what :mod:`..peers` decides;
* :mod:`.origin` -- the feedback loop on the origin, around :mod:`..feedback`;
* :mod:`.client` -- the volunteer's and the origin's client of the join protocol, around
  :mod:`..protocol`;
* :mod:`.cli` -- the start-up the broker's and the volunteer's command lines share.

The logic lives in the cores, which do no I/O and read no clock; these modules only move bytes
and pass ``now``.
"""
