"""A tiny blocking client of the guardian's frame protocol, and a client's side of its sessions.

The guardian tests talk to a guardian the way a host would, without a host: frames of
:mod:`webalps_sim.protocol` on a Unix socket (:class:`RawGuardian`), or messages handed to a
:class:`webalps_sim.service.GuardianService` directly.  :class:`RsaSession` plays the *client*
of a full RSA handshake so the guardian's answers can be checked: it picks the premaster,
encrypts it to the guardian's key, computes the master secret and the keys as the client does,
so it can make a right client Finished (``FINISH``), encrypt an application-data record the
guardian must open (``OPEN``) and read the records the guardian seals.

Nothing here uses the host's code (:mod:`webalps_sim.aio.remote`, :mod:`webalps_sim.aio.channel`):
a test that passes with this client checks the guardian alone.  :func:`provision_small_key`
certifies a guardian with a small key (fast RSA), :class:`GuardianChild` is the helpers'
guardian process (``tests/webalps_sim/guardian_helpers.py``), and :func:`proc_status` reads the
child's ``/proc/PID/status`` (RSS, threads).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Sequence
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric import padding, rsa

from tests.webalps_sim.guardian_helpers import GuardianProcess
from tls12 import prf
from tls12.record import (
    IV_KEY_LABEL,
    ContentType,
    DirectionKeys,
    OutgoingRecord,
    WriteProtection,
)
from tls12.suites import SUITES, CipherSuite
from webalps_sim import protocol as p
from webalps_sim.ca import init_ca
from webalps_sim.identity import certify

SUITE = 0x002F  # TLS_RSA_WITH_AES_128_CBC_SHA
TLS12 = 0x0303
REPO = Path(__file__).resolve().parents[2]


def provision_small_key(tmp: Path, app: str = "null") -> Path:
    """A CA in ``tmp/ca`` and a guardian state directory ``tmp/guardian`` it certified, with a
    1024-bit guardian key (an RSA decryption costs a fraction of a 2048-bit one, for tests that
    make thousands of sessions); returns the state directory."""
    init_ca(tmp / "ca")
    certify(tmp / "guardian", tmp / "ca", app, key_size=1024)
    return tmp / "guardian"


def proc_status(pid: int, field: str) -> int:
    """An integer field of ``/proc/PID/status``: ``VmRSS`` (KiB), ``Threads``..."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name == field:
            return int(value.split()[0])
    raise KeyError(field)


GuardianChild = GuardianProcess
"""The guardian as a child process (``guardian.pid`` for ``/proc`` and signals)."""


class RawGuardian:
    """A blocking connection to a guardian socket: send frames, read replies."""

    def __init__(self, path: str | Path, timeout: float = 30.0) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(path))  # blocking: waits for room in a full listen backlog
        self.sock.settimeout(timeout)
        self._decoder = p.FrameDecoder()
        self._pending: list[p.Frame] = []
        self._ids = 0

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def frames(self, count: int) -> list[p.Frame]:
        """The next ``count`` reply frames; fewer if the guardian closes the connection."""
        while len(self._pending) < count:
            chunk = self.sock.recv(1 << 18)
            if not chunk:
                break
            self._pending += self._decoder.feed(chunk)
        out, self._pending = self._pending[:count], self._pending[count:]
        return out

    def pipeline(self, messages: Sequence[p.Message]) -> list[object]:
        """Send every request in one write, then read one reply each (request ids checked)."""
        first = self._ids + 1
        self._ids += len(messages)
        self.send_raw(b"".join(p.message_frame(m, first + i) for i, m in enumerate(messages)))
        frames = self.frames(len(messages))
        assert [f.request_id for f in frames] == list(range(first, first + len(messages)))
        return [p.decode_message(f) for f in frames]

    def request(self, message: p.Message) -> object:
        """One request, its reply."""
        (reply,) = self.pipeline([message])
        return reply

    def closed_by_guardian(self) -> bool:
        """Whether the guardian has closed this connection (reads what is left first)."""
        try:
            while chunk := self.sock.recv(1 << 16):
                self._pending += self._decoder.feed(chunk)
        except (TimeoutError, ConnectionResetError):
            return False
        return True

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawGuardian:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def key_block_keys(master: bytes, suite: int, client_random: bytes, server_random: bytes
                   ) -> tuple[DirectionKeys, DirectionKeys]:
    """The client-write and server-write keys of a session, as both ends derive them."""
    params = SUITES[CipherSuite(suite)]
    block = prf.key_block(master, client_random, server_random, params.mac_length,
                          params.key_length, params.fixed_iv_length)
    client_iv_key = server_iv_key = b""
    if params.block_size:
        iv_keys = prf.prf(master, IV_KEY_LABEL, server_random + client_random, 32)
        client_iv_key, server_iv_key = iv_keys[:16], iv_keys[16:]
    return (DirectionKeys(params, block.client_key, block.client_mac_key, block.client_iv,
                          client_iv_key),
            DirectionKeys(params, block.server_key, block.server_mac_key, block.server_iv,
                          server_iv_key))


class RsaSession:
    """The client's side of one full RSA handshake with the guardian (see the module docstring)."""

    def __init__(self, public_key: rsa.RSAPublicKey, suite: int = SUITE,
                 rng: Callable[[int], bytes] = os.urandom) -> None:
        self.suite = suite
        self.client_random = rng(32)
        self.server_random = rng(32)
        self.premaster = TLS12.to_bytes(2, "big") + rng(46)
        self.encrypted = public_key.encrypt(self.premaster, padding.PKCS1v15())
        self.master = prf.master_secret(self.premaster, self.client_random, self.server_random)
        self.client_keys, self.server_keys = key_block_keys(
            self.master, suite, self.client_random, self.server_random)
        self._rng = rng
        self._writer = WriteProtection(self.client_keys, rng)
        self.client_seq = 0  # the next client record the guardian opens
        self.handle_id = 0

    def derive(self) -> p.Derive:
        return p.Derive(self.encrypted, TLS12, self.client_random, self.server_random,
                        self.suite, None)

    def finish(self, handle_id: int) -> p.Finish:
        """``FINISH`` with the right client verify_data (transcript hashes made up: the
        guardian sees hashes only)."""
        self.handle_id = handle_id
        client_hash = self._rng(32)
        verify = prf.verify_data(self.master, True, client_hash)
        return p.Finish(handle_id, self.suite, client_hash, verify, self._rng(32), TLS12)

    def open_request(self, plaintext: bytes,
                     content_type: int = ContentType.APPLICATION_DATA) -> p.Open:
        """``OPEN`` of one record the client encrypted (next client seq); application data
        unless ``content_type`` says otherwise (an alert: ``b"\\x01\\x00"`` is close_notify)."""
        seq = self.client_seq
        self.client_seq += 1
        record = self._writer.seal(OutgoingRecord(content_type, TLS12, seq, plaintext))
        return p.Open(self.handle_id, self.suite, True, ((seq, content_type, TLS12, record[5:]),))

    def read_server_record(self, record: bytes, seq: int) -> bytes:
        """The plaintext of one record the guardian sealed at server sequence number ``seq``."""
        cipher = self.server_keys.cipher()
        return cipher.open(seq, record[0], int.from_bytes(record[1:3], "big"),  # type: ignore[attr-defined]
                           record[5:])
