"""The SINE paper's constants: the client bandwidths of Figure 5 and the testbed's links.

:func:`sine_profile` builds the Linux link-lab profile (:mod:`testbed.linux.linktestbed`) of one
point of the sweep: the client's line of ``client_bw`` bit/s on the access hop, a ``wan_bw``
wide-area path to the origin (defaults as ``sine.model_latency.Scenario``).
"""

from __future__ import annotations

from testbed.linux.linktestbed import LinkShape, Profile

__all__ = ["SINE_BANDWIDTHS", "sine_profile", "PROFILES"]

#: The SINE paper's client bandwidths (Figure 5), bit/s.
SINE_BANDWIDTHS: tuple[float, ...] = (
    128e3, 256e3, 512e3, 1e6, 2e6, 4e6, 10e6, 20e6, 50e6, 100e6)


def sine_profile(client_bw: float, wan_bw: float = 4e6, client_delay: float = 0.0005,
                 wan_delay: float = 0.050) -> Profile:
    """The SINE testbed (defaults as ``sine.model_latency.Scenario``): the client's line of
    ``client_bw`` bit/s on the access hop, a ``wan_bw`` wide-area path to the origin."""
    client = LinkShape(client_bw, client_delay)
    wan = LinkShape(wan_bw, wan_delay)
    return Profile(f"sine-{client_bw / 1e3:g}k", client, client, wan, wan)


#: The sweep's profiles by name (``sine-<kbit/s>k``), for
#: ``python -m testbed.linux.linktestbed --profiles-from sine.params``.
PROFILES: dict[str, Profile] = {p.name: p for p in map(sine_profile, SINE_BANDWIDTHS)}
