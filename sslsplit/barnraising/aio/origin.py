"""The origin's side of the feedback loop (§7.4) on asyncio: redirects, watching, reports.

:class:`OriginFeedback` wraps a :class:`~.feedback.FeedbackMonitor` for one site:

* it keeps the site's live volunteers (the broker's ``lookup``, refreshed every ``refresh``
  seconds and at once after a report);
* :meth:`start_trusted` serves the ``trusted.`` name on a plain HTTPS port of the origin:
  every ``GET``/``HEAD`` is answered with a 302 to ``https://<volunteer label>.<mirror>:PORT
  /path?br=TOKEN`` (:class:`FeedbackFileHandler`, role ``trusted``); with no live volunteer the
  origin serves the file itself, so the site never goes dark;
* the splitting server (:class:`~sslsplit.aio.server.SplittingServer` with ``feedback=``) serves
  its proxies through the same handler in role ``mirror``, which tells the monitor when a
  redirected request *arrives* from the volunteer it was sent to, and :meth:`closed` passes
  on fatal alerts clients sent through a volunteer;
* a task runs the monitor's timer and reports every verdict to the broker (op ``report`` with
  the site's token), which removes the volunteer from DNS at once.  :attr:`removals` records
  each report with its timings -- the measured removal time.

Every decision is the monitor's, sans-IO (:meth:`~.feedback.FeedbackMonitor.route` for a
``trusted`` request, :meth:`~.feedback.FeedbackMonitor.arrived_target` for a ``mirror`` one,
:func:`~.feedback.redirect_location` for the 302); this module passes it the loop's time and
the peers' addresses and moves the bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

import h11

from testbed.apps.file_handler import HTTPFileHandler
from testbed.apps.stats import ServerStats
from tls12.aio import TLSStream, serve
from tls12.config import ServerConfig
from tls12.errors import AlertLevel

from ..feedback import TOKEN_PARAM, FeedbackMonitor, Removal, Verdict, redirect_location
from ..protocol import ProtocolError
from .client import BrokerClient

__all__ = ["OriginFeedback", "FeedbackFileHandler", "Removal", "TOKEN_PARAM"]

logger = logging.getLogger("sslsplit.barnraising.origin")


class OriginFeedback:
    """Redirects ``trusted`` names to volunteers under ``mirror``; reports the bad ones."""

    def __init__(self, client: BrokerClient, report_token: str, *, mirror: str,
                 monitor: FeedbackMonitor | None = None, refresh: float = 2.0) -> None:
        self.client = client
        self.report_token = report_token
        self.mirror = mirror.lower().rstrip(".")
        self.monitor = monitor if monitor is not None else FeedbackMonitor()
        self.refresh = refresh
        self.volunteers: list[tuple[str, int]] = []
        self.removals: list[Removal] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._servers: list[asyncio.AbstractServer] = []
        self.trusted_port = 0

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    async def start(self) -> None:
        await self.refresh_volunteers()
        self._task = asyncio.create_task(self._loop())

    async def refresh_volunteers(self) -> None:
        self.volunteers = list((await self.client.lookup()).addresses)

    def poke(self) -> None:
        """New evidence may be waiting: run the loop now."""
        self._wake.set()

    async def _loop(self) -> None:
        next_refresh = self.now() + self.refresh
        while True:
            timer = self.monitor.get_timer()
            wake_at = next_refresh if timer is None else min(timer, next_refresh)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), max(0.0, wake_at - self.now()))
            self._wake.clear()
            now = self.now()
            self.monitor.handle_timer(now)
            verdicts = self.monitor.verdicts()
            for verdict in verdicts:
                await self._report(verdict)
            if verdicts or now >= next_refresh:
                with contextlib.suppress(ProtocolError, OSError, TimeoutError):
                    await self.refresh_volunteers()
                next_refresh = now + self.refresh

    async def _report(self, verdict: Verdict) -> None:
        self.volunteers = [v for v in self.volunteers if v[0] != verdict.volunteer]
        try:
            removed = await self.client.report(verdict.volunteer, self.report_token,
                                               reason=verdict.reason)
        except (ProtocolError, OSError, TimeoutError) as exc:
            logger.warning("report of %s failed: %s", verdict.volunteer, exc)
            return
        self.removals.append(Removal(verdict, self.now(), removed))
        logger.warning("reported volunteer %s (%s): %d removed", verdict.volunteer,
                       verdict.reason, removed)

    def location(self, volunteer: tuple[str, int], target: str, token: str) -> str:
        return redirect_location(volunteer, self.mirror, target, token)

    def closed(self, stream: TLSStream) -> None:
        """``on_close`` of the splitting port: a client's fatal alert blames the volunteer."""
        if any(a.level == AlertLevel.FATAL for a in stream.alerts):
            peer = stream.peername
            if isinstance(peer, tuple) and peer[0] in {v[0] for v in self.volunteers}:
                self.monitor.alert(peer[0], self.now())
                self.poke()

    def handler(self, role: str, root: Path, stats: ServerStats, idle_timeout: float,
                *, coalesce: bool) -> Callable[[TLSStream], Awaitable[None]]:
        """The per-connection handler of the ``trusted`` port or the ``mirror`` (splitting) port."""
        async def run(stream: TLSStream) -> None:
            await FeedbackFileHandler(stream, root, stats, idle_timeout, coalesce=coalesce,
                                      feedback=self, role=role).run()
        return run

    async def start_trusted(self, root: Path, config: ServerConfig, host: str, port: int,
                            stats: ServerStats | None = None) -> int:
        """Serve the ``trusted.`` name (plain HTTPS) on ``host:port``; return the port."""
        the_stats = stats if stats is not None else ServerStats()
        root = Path(root).resolve(strict=True)  # the file handler's path checks expect it
        server = await serve(self.handler("trusted", root, the_stats, 30.0, coalesce=True),
                             host, port, config, on_open=the_stats.open,
                             on_close=the_stats.record)
        self._servers.append(server)
        self.trusted_port = server.sockets[0].getsockname()[1]
        return self.trusted_port

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for server in self._servers:
            server.close()
        for server in self._servers:
            await server.wait_closed()
        await self.client.close()


class FeedbackFileHandler(HTTPFileHandler):
    """The file handler with the feedback loop: redirect (``trusted``) or watch (``mirror``)."""

    def __init__(self, stream: TLSStream, root: Path, stats: ServerStats, idle_timeout: float,
                 *, coalesce: bool, feedback: OriginFeedback, role: str) -> None:
        super().__init__(stream, root, stats, idle_timeout, coalesce=coalesce)
        if role not in ("trusted", "mirror"):
            raise ValueError(f"role must be 'trusted' or 'mirror', not {role!r}")
        self.feedback = feedback
        self.role = role

    def _peer_host(self) -> str:
        peer = self.stream.peername
        return str(peer[0]) if isinstance(peer, tuple) else str(peer)

    async def _respond_inner(self, request: h11.Request) -> tuple[int, int]:
        fb = self.feedback
        target = request.target.decode("ascii", "replace")
        now = fb.now()
        if self.role == "mirror":
            fb.monitor.arrived_target(target, self._peer_host(), now)
            return await super()._respond_inner(request)
        if request.method not in (b"GET", b"HEAD"):
            return await super()._respond_inner(request)
        routed = fb.monitor.route(self._peer_host(), target, fb.volunteers, now)
        fb.poke()
        if routed is None:  # nobody to send the client to: serve it here
            return await super()._respond_inner(request)
        volunteer, token = routed
        return await self._simple(302, "302 found\n", request.method == b"HEAD",
                                  (("Location", fb.location(volunteer, target, token)),))
