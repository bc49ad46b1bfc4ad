"""The SSL-splitting paper's constants: its testbed's links (§6.1).

The paper's server sits behind residential ADSL with a 160 kbit/s upstream; the client and the
proxy share a 100 Mbit/s LAN. The downstream rate and the delays are not in the paper: they are
assumptions (1.5 Mbit/s, 10 ms each way, 64-packet queues), named as such wherever a figure
uses them. :data:`ADSL_UP` / :data:`ADSL_DOWN` are the SimPy links (:mod:`netsim.link`);
:data:`ADSL_PROFILE` is their kernel twin on the Linux link testbed
(:mod:`testbed.linux.linktestbed`). The synthetic ``www.lcs`` and ``amsterdam`` workloads are
:data:`sslsplit.synth.LCS_LIKE` and :data:`sslsplit.synth.AMSTERDAM_LIKE`.
"""

from __future__ import annotations

from netsim.link import LAN, LinkParams
from testbed.linux.linktestbed import LinkShape, Profile

__all__ = ["ADSL_UP", "ADSL_DOWN", "LAN", "ADSL_PROFILE", "PROFILES", "CHUNK_BYTES"]

#: The paper's server line: residential ADSL, 160 kbit/s upstream (server → Internet).
ADSL_UP = LinkParams(bandwidth=160e3, delay=0.010, queue=64)
#: Downstream direction of that line (assumed 1.5 Mbit/s; not given in the paper).
ADSL_DOWN = LinkParams(bandwidth=1.5e6, delay=0.010, queue=64)

_LAN_SHAPE = LinkShape.from_params(LAN)

#: The paper's testbed on the Linux link lab (§6.1): client and proxy on a 100 Mbit/s LAN, the
#: origin behind residential ADSL, 160 kbit/s from the origin (its upstream), 1.5 Mbit/s
#: towards it, 10 ms each way, 64-packet queues.
ADSL_PROFILE = Profile(
    name="adsl",
    access_to_origin=_LAN_SHAPE,
    access_to_client=_LAN_SHAPE,
    server_to_origin=LinkShape.from_params(ADSL_DOWN),
    server_to_client=LinkShape.from_params(ADSL_UP),
)

#: Profiles by name for ``python -m testbed.linux.linktestbed --profiles-from sslsplit.params``.
PROFILES: dict[str, Profile] = {"adsl": ADSL_PROFILE}

#: Transfer volume of the paper's replay chunks (§6.3: "approximately 10 MB of transfers"), bytes.
CHUNK_BYTES = 10_000_000
