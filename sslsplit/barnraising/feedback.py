"""The origin's URL-level feedback loop (SSL splitting paper §7.4), sans-IO.

SSL splitting stops a volunteer from changing a byte unnoticed, but not from *denying
service*: accepting clients and never answering (a black hole), or answering with bytes the
client rejects (flipped payloads, another site's records).  The paper's remedy, built here:

* the site's pages link only to ``trusted.`` names, which always reach the origin itself (a
  plain HTTPS port; it sends only redirects);
* the origin answers each such request with an HTTP 302 to a *mirror* name that names one
  live volunteer, ``https://v127-0-0-2.mirror.example/path?br=TOKEN`` (:func:`volunteer_label`;
  the broker's DNS answers that name with that volunteer's address only, and the site's
  certificate covers ``*.mirror.example``, so HTTPS reference integrity holds);
* a volunteer that forwards the request connects to the origin's splitting port *from its own
  address*, with the token in the request: the origin checks both (:meth:`arrived`);
* a redirect whose request has not arrived from that volunteer within ``deadline`` seconds
  is a **no-show**; a client that asks the trusted name for the same target again within
  ``retry_window`` seconds of a redirect is a **retry** (it did not get good bytes -- a MAC
  failure, a reset); a fatal alert the client sends through the volunteer is an **alert**.
  Each is a :class:`Verdict`, which the origin reports to the broker (op ``report`` with the
  site's token); the broker removes the volunteer from DNS and bans its address.

Which volunteer to blame is never in doubt, because the origin chose it: the redirect names
one volunteer (DNS round robin on a shared ``mirror.`` name would hide which one a client got).
The removal time is bounded by ``deadline`` plus one broker round trip for a black hole, and
by the client's retry for a bit-flipper.  Trade-off of the retry rule: a client can get a
volunteer it was sent to reported by asking twice; the window is short, and an origin that
fears framing can count strikes from distinct clients before reporting (``strikes``).

:class:`FeedbackMonitor` is sans-IO (``now`` is passed in, tokens come from an injected
function); :mod:`.aio.origin` puts it on the origin's sockets.
"""

from __future__ import annotations

import heapq
import ipaddress
import secrets
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["TOKEN_PARAM", "Verdict", "Removal", "FeedbackMonitor", "volunteer_label",
           "label_host", "redirect_location", "redirect_tokens"]

TOKEN_PARAM = "br"
"""The query parameter that carries a redirect's token: ``/path?br=TOKEN``."""


def volunteer_label(host: str) -> str:
    """The DNS label naming volunteer ``host``: ``v127-0-0-2``, ``v6-2001-db8--1`` for IPv6."""
    ip = ipaddress.ip_address(host)
    if ip.version == 4:
        return "v" + str(ip).replace(".", "-")
    return "v6-" + ip.compressed.replace(":", "-")


def label_host(label: str) -> str | None:
    """The address a :func:`volunteer_label` names, or ``None`` if ``label`` is not one."""
    try:
        if label.startswith("v6-"):
            return str(ipaddress.IPv6Address(label[3:].replace("-", ":")))
        if label.startswith("v"):
            return str(ipaddress.IPv4Address(label[1:].replace("-", ".")))
    except ValueError:
        return None
    return None


def redirect_location(volunteer: tuple[str, int], mirror: str, target: str, token: str) -> str:
    """The ``Location`` of a redirect of ``target`` to ``volunteer`` (host, port) under the
    ``mirror`` zone: ``https://v127-0-0-2.mirror.example:4433/path?br=TOKEN``."""
    sep = "&" if "?" in target else "?"
    return (f"https://{volunteer_label(volunteer[0])}.{mirror}:{volunteer[1]}"
            f"{target}{sep}{TOKEN_PARAM}={token}")


def redirect_tokens(target: str) -> list[str]:
    """The redirect tokens a request target carries (usually none or one)."""
    return urllib.parse.parse_qs(urllib.parse.urlsplit(target).query).get(TOKEN_PARAM, [])


@dataclass(frozen=True, slots=True)
class Verdict:
    """Evidence against one volunteer: ``reason`` is ``no-show``, ``retry`` or ``alert``."""

    volunteer: str
    reason: str
    redirected_at: float
    detected_at: float


@dataclass(frozen=True, slots=True)
class Removal:
    """One report: the verdict, when the broker confirmed it, how many registrations it removed."""

    verdict: Verdict
    reported_at: float
    removed: int

    @property
    def seconds(self) -> float:
        """From the redirect that went wrong to the broker's confirmation."""
        return self.reported_at - self.verdict.redirected_at


@dataclass(slots=True)
class _Redirect:
    token: str
    client: str
    target: str
    volunteer: str
    at: float
    arrived: bool = False


class FeedbackMonitor:
    """Redirect bookkeeping of one site: who was sent where, and who never showed up."""

    def __init__(self, deadline: float = 2.0, *, retry_window: float = 10.0, strikes: int = 1,
                 new_token: Callable[[], str] = lambda: secrets.token_urlsafe(12)) -> None:
        if not deadline > 0 or retry_window < 0 or strikes < 1:
            raise ValueError("deadline must be positive, retry_window >= 0, strikes >= 1")
        self.deadline = deadline
        self.retry_window = retry_window
        self.strikes = strikes
        self.new_token = new_token
        self._by_token: dict[str, _Redirect] = {}
        self._last: dict[tuple[str, str], _Redirect] = {}
        self._due: list[tuple[float, str]] = []
        self._strikes: dict[str, set[str]] = {}
        self._verdicts: list[Verdict] = []
        self._reported: set[str] = set()
        self._sent: dict[str, float] = {}
        self._next = 0
        self.redirects = 0

    def choose(self, volunteers: Sequence[tuple[str, int]]) -> tuple[str, int] | None:
        """Round robin over ``volunteers``, skipping those already judged; ``None`` if none."""
        usable = [v for v in volunteers if v[0] not in self._reported]
        if not usable:
            return None
        self._next += 1
        return usable[self._next % len(usable)]

    def forget(self, volunteer: str) -> None:
        """``volunteer`` may be chosen again (it rejoined after its ban)."""
        self._reported.discard(volunteer)
        self._strikes.pop(volunteer, None)
        self._sent.pop(volunteer, None)

    def requested(self, client: str, target: str, now: float) -> None:
        """``client`` asks the trusted name for ``target`` (call before :meth:`choose`).

        A repeat of the same (client, target) within ``retry_window`` of its last redirect is
        a retry: evidence against the volunteer of that redirect.
        """
        last = self._last.pop((client, target), None)
        if last is not None and now - last.at <= self.retry_window:
            self._by_token.pop(last.token, None)  # a no-show is not counted twice
            self._blame(last.volunteer, client, "retry", last.at, now)

    def redirect(self, client: str, target: str, volunteer: str, now: float) -> str:
        """Record that ``client`` is sent to ``volunteer`` for ``target``; the token to embed."""
        token = self.new_token()
        r = _Redirect(token, client, target, volunteer, now)
        self._sent[volunteer] = now
        self._by_token[token] = r
        self._last[(client, target)] = r
        heapq.heappush(self._due, (now + self.deadline, token))
        self.redirects += 1
        return token

    def route(self, client: str, target: str, volunteers: Sequence[tuple[str, int]],
              now: float) -> tuple[tuple[str, int], str] | None:
        """``client`` asks the trusted name for ``target``: judge a retry (:meth:`requested`),
        choose a volunteer among ``volunteers`` and record the redirect.  The volunteer and the
        token to send the client there with, or ``None``: nobody to send it to (the origin
        serves the request itself)."""
        self.requested(client, target, now)  # a retry judges the last volunteer ...
        volunteer = self.choose(volunteers)  # ... so it is not chosen again
        if volunteer is None:
            return None
        return volunteer, self.redirect(client, target, volunteer[0], now)

    def arrived_target(self, target: str, via: str, now: float) -> None:
        """A request for ``target`` reached the splitting port from ``via``: every token it
        carries is checked with :meth:`arrived`."""
        for token in redirect_tokens(target):
            self.arrived(token, via, now)

    def arrived(self, token: str, via: str, now: float) -> bool:
        """A request carrying ``token`` reached the splitting port from address ``via``.

        True when it is the expected volunteer in time; a token arriving from another address
        does not count (a volunteer cannot vouch for another).
        """
        r = self._by_token.get(token)
        if r is None or r.volunteer != via or now > r.at + self.deadline:
            return False
        r.arrived = True
        del self._by_token[token]
        return True

    def alert(self, via: str, now: float) -> None:
        """A client sent a fatal alert through volunteer ``via`` (its MAC check failed).

        The verdict's ``redirected_at`` is the last redirect to ``via`` (``now`` if none).
        """
        self._blame(via, via, "alert", self._sent.get(via, now), now)

    def _blame(self, volunteer: str, client: str, reason: str, at: float, now: float) -> None:
        if volunteer in self._reported:
            return
        witnesses = self._strikes.setdefault(volunteer, set())
        witnesses.add(client)  # distinct clients: one client cannot make up several strikes
        if len(witnesses) >= self.strikes:
            self._reported.add(volunteer)
            self._verdicts.append(Verdict(volunteer, reason, at, now))

    def get_timer(self) -> float | None:
        """When :meth:`handle_timer` must next run, or ``None``."""
        while self._due and self._due[0][1] not in self._by_token:
            heapq.heappop(self._due)
        return self._due[0][0] if self._due else None

    def handle_timer(self, now: float) -> None:
        """Turn every redirect whose request did not arrive by its deadline into a verdict."""
        while self._due and self._due[0][0] <= now:
            _, token = heapq.heappop(self._due)
            r = self._by_token.pop(token, None)
            if r is not None:
                self._blame(r.volunteer, r.client, "no-show", r.at, now)
        if len(self._last) > 4 * len(self._by_token) + 1024:  # forget redirects past any retry
            self._last = {k: r for k, r in self._last.items() if now - r.at <= self.retry_window}

    def verdicts(self) -> list[Verdict]:
        """The verdicts reached since the last call (each volunteer is judged once)."""
        out, self._verdicts = self._verdicts, []
        return out
