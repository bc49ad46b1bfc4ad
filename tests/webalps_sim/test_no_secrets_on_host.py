"""The host never holds, and the host<->guardian channel never carries, a session secret.

The guardian runs as its own process with its debug switch ``--debug-reveal-secrets`` on, so
the test knows every premaster, master secret and record key the guardian used.  Python's
``ssl`` client also writes its key log (``SSLKEYLOGFILE`` format), an independent record of each
connection's master secret: every one must be among the guardian's, so the search below looks
for the right values.  Then:

* every byte the host sent to or received from the guardian (a tap on
  :class:`webalps_sim.aio.channel.GuardianChannel`) is searched for each secret -- the ECDHE
  suites' ephemeral private keys included;
* every ``bytes``/``bytearray``/``memoryview`` the garbage collector can reach in this process
  -- which runs the host, with a client connection still open -- is searched for each secret,
  except the test's own copies.  A control plants a copy of one secret in a container and
  checks that the same scan finds it;
* everything reachable through the attributes of the live connections, the remote delegate and
  the server's statistics (the walk of ``tests/tls12/test_delegate.py``) is searched too.
"""

from __future__ import annotations

import gc
import http.client
import json
from pathlib import Path

import pytest

from tests.tls12.test_delegate import _leaves
from tests.webalps_sim.guardian_helpers import (
    SUITE_NAMES,
    GuardianProcess,
    client_context,
    curl_get,
    provision,
    webalps_host,
)
from tls12.server_connection import ServerConnection
from tls12.suites import SUITES, KeyExchange
from webalps_sim.aio.host import WEBALPS_SUITES

pytestmark = pytest.mark.interop


def _reachable_buffers(skip: set[int]) -> list[bytes]:
    """Every bytes-like object referenced by any container the collector tracks.

    CPython stops tracking a dict or tuple that holds only atomic values (bytes among them), so
    such containers are not in ``gc.get_objects()``: the scan descends into them from the
    tracked objects that refer to them.
    """
    found: list[bytes] = []
    seen: set[int] = set(skip)
    stack = list(gc.get_objects())
    while stack:
        for ref in gc.get_referents(stack.pop()):
            if id(ref) in seen:
                continue
            if isinstance(ref, (bytes, bytearray, memoryview)):
                seen.add(id(ref))
                data = bytes(ref)
                if len(data) >= 16:
                    found.append(data)
            elif isinstance(ref, (dict, tuple, list, set, frozenset)) and not gc.is_tracked(ref):
                seen.add(id(ref))
                stack.append(ref)
    return found


def _secrets_in(buffers: list[bytes], secrets: list[bytes]) -> list[str]:
    return [s.hex()[:16] for s in secrets if any(s in b for b in buffers)]


def test_no_premaster_master_secret_or_key_on_the_host(tmp_path: Path) -> None:
    prov = provision(tmp_path)
    docroot = tmp_path / "www"
    docroot.mkdir()
    (docroot / "page").write_bytes(b"<p>public page</p>" * 200)
    reveal = tmp_path / "revealed.jsonl"
    keylog = tmp_path / "keylog.txt"
    channel: dict[str, bytearray] = {"out": bytearray(), "in": bytearray()}

    def tap(direction: str, data: bytes) -> None:
        channel[direction] += data

    sock = tmp_path / "guardian.sock"
    with GuardianProcess(prov.state_dir, sock, "--debug-reveal-secrets", str(reveal)):
        server, remote = webalps_host(docroot, sock, tap=tap)
        with server:
            names = [SUITE_NAMES[s] for s in WEBALPS_SUITES]
            for name in names:
                out = curl_get(f"https://localhost:{server.port}/page", prov.ca_pem, name)
                assert out.returncode == 0, out.stderr
            # Python clients write a key log; the last connection stays open during the scan
            open_conns = []
            for name in names:
                ctx = client_context(prov.ca_pem, name)
                ctx.keylog_filename = str(keylog)
                conn = http.client.HTTPSConnection("localhost", server.port, context=ctx)
                conn.request("GET", "/page")
                assert conn.getresponse().read() == (docroot / "page").read_bytes()
                open_conns.append(conn)

            revealed = [json.loads(line) for line in reveal.read_text().splitlines()]
            masters = {bytes.fromhex(r["master_secret"]) for r in revealed}
            logged = {bytes.fromhex(line.split()[2]) for line in keylog.read_text().splitlines()
                      if line.startswith("CLIENT_RANDOM")}
            assert len(logged) == len(names) and logged <= masters  # the switch tells the truth
            ephemerals = {bytes.fromhex(r["ephemeral_private"]) for r in revealed
                          if r.get("ephemeral_private")}
            secrets = sorted(masters | {bytes.fromhex(r["premaster"]) for r in revealed}
                             | {bytes.fromhex(k) for r in revealed for k in r["keys"]}
                             | ephemerals)
            assert len(revealed) == 2 * len(names) and len(secrets) >= 2 * len(names) * 6
            ecdhe = sum(1 for s in WEBALPS_SUITES if SUITES[s].key_exchange is KeyExchange.ECDHE_RSA)
            assert ecdhe >= 2 and len(ephemerals) == 2 * ecdhe  # the ECDHE keys are searched too

            # 1. the channel
            assert len(channel["out"]) > 10_000 and len(channel["in"]) > 10_000
            assert _secrets_in([bytes(channel["out"]), bytes(channel["in"])], secrets) == []

            # 2. the host's memory, with live delegated connections
            live = [o for o in gc.get_objects()
                    if isinstance(o, ServerConnection) and o.asks_by_event]
            assert live, "no open WebALPS connection to search"
            skip = {id(s) for s in (*secrets, *masters, *logged)}
            buffers = _reachable_buffers(skip)
            assert any(live[0].server_random in b for b in buffers)  # the scan reaches them
            assert _secrets_in(buffers, secrets) == []
            held = [b for c in live for b in _leaves((c, remote, server.stats), set(), skip=None)]
            assert any(live[0].server_random in h for h in held)  # the attribute walk works
            assert _secrets_in(held, secrets) == []

            # control: the same scan finds a secret someone kept
            kept = [{"leak": bytearray(secrets[0])}]  # an untracked dict in a list
            assert _secrets_in(_reachable_buffers(skip), secrets[:1]) != []
            del kept
            for conn in open_conns:
                conn.close()
        remote.close()
