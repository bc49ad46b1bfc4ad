"""asyncio runners of the SINE client that experiments start as programs of their own.

``python -m sine.aio run-plan PLAN.json`` (:mod:`sine.aio.__main__`, which only imports
:func:`main`) runs a measurement plan written by
:func:`sine.experiments.link.measure` inside the link testbed's client namespace: the
:class:`sine.aio.client.SineClient` sessions of each item, prepared untimed (SINEX's index page,
filling Squid for ``warm``, SINEB's open TLS connections), then timed together, and prints one
time per item as a JSON list.  It is the I/O side of :mod:`sine.experiments.link`, which builds
the testbed, writes the plan and compares the times with the model.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from ..algorithms import VerifyingKey
from .client import SineClient

__all__ = ["run_plan", "main"]


# --- the timed plan: runs inside the link testbed's client namespace ----------------------------------------


def _client(plan: dict[str, Any], protocol: str, key: VerifyingKey, ca: bytes) -> SineClient:
    """A fresh session for ``protocol`` (``-proxy``: through the plan's proxy; ``https`` and
    ``sineb`` also know the origin's TLS listener)."""
    base, _, via = protocol.partition("-")
    https = base in ("https", "sineb")
    return SineClient(plan["origin"], mode=base, public_key=key,
                      proxy=plan.get("proxy") if via == "proxy" else None,
                      tls_origin=plan["tls_origin"] if https else None,
                      tls_ca=ca if https else None)


async def _prepare(plan: dict[str, Any], item: dict[str, Any], key: VerifyingKey, ca: bytes
                   ) -> dict[str, bytes]:
    """The untimed part: for ``sinex`` the digests of the index page's Forward Authenticator
    (read and verified by signature in a session of its own); for ``warm`` proxied items one
    fetch of each path to fill Squid."""
    trusted: dict[str, bytes] = {}
    if item["protocol"].startswith("sinex"):
        async with _client(plan, item["protocol"], key, ca) as primer:
            r = await primer.get("/index.html")
            if not r.ok:
                raise RuntimeError(f"index.html did not verify: {r.error}")
            trusted = dict(primer.trusted)
    if item.get("warm") and item["protocol"].endswith("-proxy"):
        for path in item["paths"]:
            async with _client(plan, item["protocol"], key, ca) as filler:
                await filler.get(path)
    return trusted


async def _established(plan: dict[str, Any], item: dict[str, Any], key: VerifyingKey,
                       ca: bytes) -> list[SineClient | None]:
    """The untimed part of SINEB: one session per path with its TLS connection to the origin
    already open (:meth:`sine.aio.client.SineClient.open_tls`; the handshake is paid once per
    browsing session, and :func:`sine.model_latency.fetch_latency` times a fetch of an open session).
    Other protocols open their sessions inside the timed fetch: ``None`` per path."""
    if not item["protocol"].startswith("sineb"):
        return [None] * len(item["paths"])
    sessions = [_client(plan, item["protocol"], key, ca) for _ in item["paths"]]
    await asyncio.gather(*(s.open_tls() for s in sessions))
    return list(sessions)


async def _timed(plan: dict[str, Any], protocol: str, path: str, trusted: dict[str, bytes],
                 key: VerifyingKey, ca: bytes, session: SineClient | None = None) -> float:
    """One fetch, in ``session`` or else a fresh one; returns :func:`time.perf_counter` when the
    last byte has verified (before the session closes: closing a TLS connection waits for the
    peer's ``close_notify``, a round trip the fetch does not need). Raises unless it verified."""
    c = session or _client(plan, protocol, key, ca)
    c.trusted.update(trusted)
    async with c:
        r = await c.get(path)
        done = time.perf_counter()
    if not r.ok:
        raise RuntimeError(f"{protocol} {path}: {r.error or r.status}")
    return done


async def _run_plan(plan: dict[str, Any]) -> list[float]:
    key = VerifyingKey.from_pem(plan["public_key"].encode())
    ca = plan["tls_ca"].encode()
    out = []
    for item in plan["items"]:
        trusted = await _prepare(plan, item, key, ca)
        sessions = await _established(plan, item, key, ca)
        t0 = time.perf_counter()
        # one session per path, all at once (the portal page); one path is a single fetch
        done = await asyncio.gather(*(_timed(plan, item["protocol"], p, trusted, key, ca, s)
                                      for p, s in zip(item["paths"], sessions, strict=True)))
        out.append(max(done) - t0)
    return out


def run_plan(plan: dict[str, Any]) -> list[float]:
    """Run a measurement plan (what the client namespace runs; see :func:`measure`) and return
    one time per item: seconds from the start of the first session's connect until every path
    of the item has verified (its sessions run in parallel). The preparation (SINEX's index
    page, filling Squid for ``warm``, SINEB's open TLS connections) runs before and is not
    timed."""
    return asyncio.run(_run_plan(plan))


def main(argv: list[str] | None = None) -> int:
    """``python -m sine.aio run-plan PLAN.json``: the client-namespace side of
    :func:`sine.experiments.link.measure`; prints the times as a JSON list."""
    import argparse

    from testbed import cli

    parser = argparse.ArgumentParser(prog=cli.program_name("sine.aio"),
                                     description=(__doc__ or "").splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run-plan", help="(internal, run by measure() in the client namespace) "
                         "time the plan's fetches; print the times as a JSON list")
    run.add_argument("plan", metavar="PLAN.json", help="the plan measure() wrote")

    def body(args: argparse.Namespace) -> int:
        try:
            plan = json.loads(cli.read_file_arg("PLAN.json", args.plan))
        except ValueError as exc:  # also UnicodeDecodeError
            raise cli.UsageError(f"{args.plan}: not a JSON plan ({exc})") from None
        print(json.dumps(run_plan(plan)))
        return 0

    return cli.run_main(parser, body, argv)
