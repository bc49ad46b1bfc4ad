"""Timed byte-range fetches through a warm cache: the client side of the measured chain vs tree.

``python -m sine.aio.range_runner PLAN.json`` runs inside the link testbed's client namespace
(started by :func:`sine.experiments.ranges_link.measure_ranges`) and prints one JSON object per
plan item, in order.  An item asks for one byte range of one document in one mode:

==============  ==============================================================================
``mode``        what the fetch does (a fresh :class:`sine.aio.client.SineClient` session each)
==============  ==============================================================================
``tree``        ``SineClient(mode="tree", tree=item["tree"])``: signed tree tag, range proof,
                ``Range:`` of the covering chunk groups; released once the slice matches the
                signed root (:mod:`sine.aio.tree_fetch`)
``sine``        ``SineClient(mode="sine")``: the ``Content-Encoding: sine`` body from byte 0,
                the chain verified block by block, stopped (connection dropped) once the range
                is complete -- the prefix is what a chain costs
``mice``        the same with ``mi-sha256-03`` under its RFC 9421 signed head
``unverified``  the reference: one ``GET`` with ``Range: bytes=first-last`` and nothing else
==============  ==============================================================================

``first``/``last`` of ``None`` fetch the whole document (how the plan warms the cache).

What is recorded per item (every number **measured** here):

* ``elapsed_s``: :func:`time.perf_counter` from before the session's TCP connect until the
  range's last byte was released verified (unverified: read); ``first_byte_s``: until the
  first byte *of the range* was released (a tree slice releases all of it at once);
* ``app_bytes``: bytes the client read from its socket (HTTP heads and bodies);
* ``wire_rx_bytes`` / ``wire_tx_bytes``: the change in the namespace's interface counters
  (``/proc/net/dev``: Ethernet frames, TCP/IP headers included) from before the fetch until
  ``settle`` seconds after it -- so the bytes a cache had in flight when a chain client hung
  up are counted too;
* ``ok`` (the mode's verifier released the range, status 200/206), ``match`` (SHA-256 of the
  released bytes equals the plan's ``sha256`` of the document's slice), ``cache`` (the cache's
  ``X-Cache-Status`` of the document's response), ``requests``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..algorithms import VerifyingKey
from ..tree_http import ByteRange
from .client import SineClient
from .http import HttpConnection

__all__ = ["interface_bytes", "run_range_plan", "main"]

#: Seconds to wait after a fetch before reading the interface counters (the frames a cache
#: had queued when a chain client hung up still arrive; the next fetch starts on a quiet line).
SETTLE_S = 0.3


def interface_bytes(dev_file: str = "/proc/net/dev") -> tuple[int, int]:
    """``(received, sent)`` bytes over every interface but loopback of this network namespace
    (``/proc/net/dev`` is per namespace)."""
    rx = tx = 0
    for line in Path(dev_file).read_text().splitlines()[2:]:
        name, _, fields = line.partition(":")
        if name.strip() == "lo" or not fields:
            continue
        values = fields.split()
        rx, tx = rx + int(values[0]), tx + int(values[8])
    return rx, tx


def _byte_range(item: dict[str, Any]) -> ByteRange | None:
    if item.get("first") is None:
        return None
    return ByteRange(int(item["first"]), int(item["last"]))


async def _verified(plan: dict[str, Any], item: dict[str, Any], key: VerifyingKey
                    ) -> dict[str, Any]:
    """One fetch with the verifying client; times from before the TCP connect."""
    marks: list[float] = []

    def first_released(_path: str, _where: int, data: bytes) -> None:
        if data and not marks:
            marks.append(time.perf_counter())

    t0 = time.perf_counter()
    client = SineClient(plan["origin"], mode=item["mode"], public_key=key,
                        tree=item.get("tree") or "sha256-1024", on_block=first_released)
    async with client:
        r = await client.get(item["path"], _byte_range(item))
        done = time.perf_counter()
    first = item.get("first") or 0
    return {"ok": r.ok and r.offset == first, "status": r.status,
            "error": None if r.error is None else f"{type(r.error).__name__}: {r.error}",
            "digest": hashlib.sha256(r.data).hexdigest(), "released": len(r.data),
            "elapsed_s": done - t0, "first_byte_s": (marks[0] if marks else done) - t0,
            "app_bytes": client.counters.bytes_received, "requests": client.counters.requests,
            "cache": r.headers.get("x-cache-status", "")}


async def _unverified(plan: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
    """The reference: the same range, one plain ``GET``, no verification."""
    origin = urlsplit(plan["origin"])
    conn = HttpConnection(origin.hostname or "127.0.0.1", origin.port or 80)
    headers = [("Host", origin.netloc)]
    if item.get("first") is not None:
        headers.append(("Range", f"bytes={item['first']}-{item['last']}"))
    t0 = time.perf_counter()
    first: float | None = None
    chunks: list[bytes] = []
    try:
        resp, body = await conn.request(item["path"], headers)
        async for chunk in body:
            first = first or time.perf_counter()
            chunks.append(chunk)
        done = time.perf_counter()
    finally:
        await conn.close()
    data = b"".join(chunks)  # checked after the clock stopped: the reference only reads
    cache = dict((k.decode().lower(), v.decode("latin-1")) for k, v in resp.headers)
    return {"ok": resp.status_code in (200, 206), "status": resp.status_code, "error": None,
            "digest": hashlib.sha256(data).hexdigest(), "released": len(data),
            "elapsed_s": done - t0,
            "first_byte_s": (first or done) - t0, "app_bytes": conn.bytes_received,
            "requests": 1, "cache": cache.get("x-cache-status", "")}


async def _run(plan: dict[str, Any]) -> list[dict[str, Any]]:
    key = VerifyingKey.from_pem(plan["public_key"].encode())
    settle = float(plan.get("settle_s", SETTLE_S))
    out = []
    for item in plan["items"]:
        rx0, tx0 = interface_bytes()
        if item["mode"] == "unverified":
            row = await _unverified(plan, item)
        else:
            row = await _verified(plan, item, key)
        await asyncio.sleep(settle)
        rx1, tx1 = interface_bytes()
        row.update(wire_rx_bytes=rx1 - rx0, wire_tx_bytes=tx1 - tx0,
                   match=row.pop("digest") == item["sha256"])
        out.append(row)
    return out


def run_range_plan(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """Run every item of ``plan`` in order, one fresh session each (module docstring); the
    plan holds ``origin`` (the cache's URL), ``public_key`` (PEM), ``items`` and optionally
    ``settle_s``.  Never raises for a fetch that fails to verify: its row says so."""
    return asyncio.run(_run(plan))


def main(argv: list[str] | None = None) -> int:
    """``python -m sine.aio.range_runner PLAN.json``: print one JSON row per item, as a list."""
    import argparse

    from testbed import cli

    parser = argparse.ArgumentParser(prog=cli.program_name("sine.aio.range_runner"),
                                     description=(__doc__ or "").splitlines()[0])
    parser.add_argument("plan", metavar="PLAN.json",
                        help="the plan sine.experiments.ranges_link wrote")

    def body(args: argparse.Namespace) -> int:
        try:
            plan = json.loads(cli.read_file_arg("PLAN.json", args.plan))
        except ValueError as exc:  # also UnicodeDecodeError
            raise cli.UsageError(f"{args.plan}: not a JSON plan ({exc})") from None
        print(json.dumps(run_range_plan(plan)))
        return 0

    return cli.run_main(parser, body, argv)


if __name__ == "__main__":
    import sys

    sys.exit(main())
