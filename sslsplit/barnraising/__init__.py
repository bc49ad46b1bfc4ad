"""Barnraising (SSL splitting paper §5): volunteers lend their bandwidth to a site.

A volunteer knows only a URI, ``barnraising://BROKER/some/site``; it joins the site through
the *broker*, runs an SSL-splitting proxy for it, and renews its lease while it serves.  The
broker keeps the volunteers in SQLite and answers the site's DNS names with the live
volunteers' addresses, so unmodified browsers reach them and still check the site's own
certificate (HTTPS reference integrity, §5.2).

Modules, sans-IO cores first:

* :mod:`.errors` -- every Barnraising error, one hierarchy (:class:`~.errors.BarnraisingError`,
  an :class:`~sslsplit.errors.SslSplitError`);
* :mod:`.uri` -- ``barnraising://`` URIs;
* :mod:`.protocol` -- the versioned join protocol (join, renew, leave, report, lookup);
* :mod:`.state` -- the operations (:class:`~.state.Operation`) and a volunteer's lease as an
  enum and a transition table, which the registry asks before it renews;
* :mod:`.ratelimit` -- token buckets per source address;
* :mod:`.zone` -- authoritative DNS answers from a live address list (dnspython), TCP framing;
* :mod:`.service` -- the broker's decisions and its HTTP/1.1 connections, bytes in, bytes out;
* :mod:`.ring` -- consistent hashing of stub ids onto the live volunteers (why not a DHT);
* :mod:`.peers` -- which peer to ask for a payload, which to avoid (one message a lookup);
* :mod:`.feedback` -- the origin's feedback loop: redirects, no-shows, verdicts;

then the modules that do I/O around them:

* :mod:`.registry` -- sites, the SQLite volunteer database, leases and bans;
* :mod:`.aio.broker` -- the broker on sockets, ``python -m sslsplit.barnraising.broker``;
* :mod:`.aio.dns` -- the DNS responder on UDP and TCP;
* :mod:`.aio.client` -- the volunteer's side of the join protocol;
* :mod:`.aio.sharing` -- cache sharing between volunteers on asyncio;
* :mod:`.aio.origin` -- the feedback loop on the origin's sockets (``trusted.`` redirects, reports);
* :mod:`.aio.cli` -- the start-up the broker's and the volunteer's command lines share.

The volunteer itself is :mod:`sslsplit.aio.volunteer` (``python -m sslsplit.volunteer URI``).
"""

from .errors import BarnraisingError, ConfigError, ProtocolError, URIError
from .protocol import SiteInfo
from .uri import BarnraisingURI, parse_uri

__all__ = ["BarnraisingURI", "URIError", "parse_uri", "BarnraisingError", "ConfigError",
           "ProtocolError", "SiteInfo"]
