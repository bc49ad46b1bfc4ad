"""The one exception root of :mod:`webalps_sim`: catch :class:`WebAlpsError` to catch them all.

Every exception this package raises derives from :class:`WebAlpsError`, directly or through a
subclass, and keeps the standard base its callers already catch where it has one:

* refusals on the wire -- :class:`webalps_sim.codec.ProtocolError` (a frame that does not
  parse), :class:`webalps_sim.service.GuardianFailure` (a request the guardian refuses, carried
  back as an ``ERROR`` frame), :class:`webalps_sim.state.ChannelStateError` (a request out of
  order for its channel);
* the host's end of the channel -- ``GuardianUnavailable`` and ``GuardianRefused`` (also
  :class:`tls12.delegate.DelegateError`, which the TLS connection handles) and
  ``RecordRejected`` (also ``ValueError``: the connection answers ``bad_record_mac``), in
  :mod:`webalps_sim.aio.remote`;
* set-up and configuration -- :class:`webalps_sim.app.AppUnavailable`,
  :class:`webalps_sim.ca.CAError`, :class:`webalps_sim.identity.NotCertified`,
  :class:`webalps_sim.evoting.ElectionConfigError`, ``CostModelError`` (also ``ValueError``);
* stored state -- :class:`webalps_sim.sealed.SealedStateError` and its tamper and rollback
  subclasses;
* measurement -- ``FetchError`` of the load generator (:mod:`webalps_sim.aio.loadgen`).

This module imports nothing, so the guardian (whose loaded sources are measured) can use it.
"""

from __future__ import annotations

__all__ = ["WebAlpsError"]


class WebAlpsError(Exception):
    """Root of every exception raised by :mod:`webalps_sim`."""
