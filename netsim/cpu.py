"""CPU cost per protocol operation: a measured table, and a TLS 1.2 model that charges it.

Principle 3 of the testbed (measured, then modelled): the simulated host spends, for each
operation a protocol object performs, the time the real implementation takes for it on a
reference machine. :class:`CostTable` holds those times (seconds); :func:`measure_costs` times
the real code on this machine (``tls12`` key operations, ECDHE, handshake objects, the record
cipher, ``hashlib``); :data:`DEFAULT_COSTS` is a frozen table measured once with it, so that
simulations are reproducible without timing anything.

Operations (seconds each, or per byte):

=================  =======================================================================
rsa_private        one RSA-2048 private-key operation (premaster decryption or signature)
rsa_public         one RSA-2048 public-key operation (premaster encryption or verification)
ecdhe_keygen       one x25519 key pair
ecdhe_derive       one x25519 shared secret
handshake_message  parsing or building one handshake message, transcript and PRF included
                   (what a full handshake costs beyond its public-key operations, per message)
record_fixed       sealing or opening one protected record, fixed part
record_per_byte    sealing or opening a protected record, per byte of fragment
hash_per_byte      SHA-256 per byte (``hashlib``; SINE's hash chains)
=================  =======================================================================

A *CPU model* turns what an endpoint did in one step (the bytes it received, the bytes it
produced) into a list of ``(operation, seconds)``; :class:`netsim.drive.Driver` runs them on
the endpoint's :class:`~netsim.host.Host`. :class:`Tls12Cpu` learns what the endpoint did
from the core -- the connection's trace (:mod:`tls12.trace`: records read and written, handshake
messages parsed and sent), or for bytes without a connection :class:`tls12.trace.WireTrace`
(record headers and, before ChangeCipherSpec, handshake message types; it needs no keys) -- and
charges:

* each protected record sent or received: ``record_fixed + length * record_per_byte``;
* each handshake message sent or received: ``handshake_message``;
* ClientKeyExchange received: ``rsa_private`` (RSA suites) or ``ecdhe_derive`` (ECDHE: the
  server sent a ServerKeyExchange); ClientKeyExchange sent: ``rsa_public`` or
  ``ecdhe_keygen + ecdhe_derive``; ServerKeyExchange sent: ``ecdhe_keygen + rsa_private``;
  ServerKeyExchange received: ``rsa_public``.

What it leaves out: certificate chain validation, session resumption (no public-key
operation, only ``handshake_message`` steps), memory and system-call costs.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any, Protocol

from tls12.messages import HandshakeType
from tls12.record import ContentType
from tls12.trace import WireTrace

__all__ = ["best_time", "CostTable", "DEFAULT_COSTS", "ZERO_COSTS", "CpuModel", "NoCpu", "Tls12Cpu",
           "measure_costs"]


@dataclass(frozen=True)
class CostTable:
    """Seconds per operation on the reference machine (see the module docstring)."""

    rsa_private: float = 0.0
    rsa_public: float = 0.0
    ecdhe_keygen: float = 0.0
    ecdhe_derive: float = 0.0
    handshake_message: float = 0.0
    record_fixed: float = 0.0
    record_per_byte: float = 0.0
    hash_per_byte: float = 0.0
    source: str = "assumed"

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name != "source" and not value >= 0.0:
                raise ValueError(f"{f.name} must be >= 0 s, got {value}")

    def record(self, nbytes: int) -> float:
        """Seconds to seal or open one protected record of ``nbytes`` fragment bytes."""
        return self.record_fixed + nbytes * self.record_per_byte

    def to_dict(self) -> dict[str, float | str]:
        """Plain values (for JSON: the benchmarks save measured tables, models read them)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, values: dict[str, float | str]) -> CostTable:
        """The inverse of :meth:`to_dict`; unknown keys are a ``ValueError``."""
        names = {f.name for f in fields(cls)}
        unknown = set(values) - names
        if unknown:
            raise ValueError(f"unknown cost entries: {sorted(unknown)}")
        return cls(**values)  # type: ignore[arg-type]  # names checked above; values are float or str per field


#: Measured with :func:`measure_costs` (``quick=False``) on a 2-core x86-64 virtual machine,
#: Python 3.11, OpenSSL 3 through ``cryptography`` and the ``tls12`` C record extension.
DEFAULT_COSTS = CostTable(
    rsa_private=2.4e-4,
    rsa_public=1.9e-5,
    ecdhe_keygen=3.4e-5,
    ecdhe_derive=6.6e-5,
    handshake_message=2.7e-5,
    record_fixed=5.4e-7,
    record_per_byte=7.2e-10,
    hash_per_byte=5.5e-10,
    source="default",
)

#: No CPU time at all: the network alone.
ZERO_COSTS = CostTable(source="zero")


class CpuModel(Protocol):
    """Per-endpoint: the operations one step performed, as ``(operation, seconds)`` pairs.

    A model may also have ``bind(obj)``: the driver calls it once with the endpoint's
    sans-IO object, so that the model can charge what the object reports it did.
    """

    def charge(self, received: bytes, sent: bytes) -> list[tuple[str, float]]: ...


class NoCpu:
    """A CPU model that charges nothing (the default of the driver)."""

    def charge(self, received: bytes, sent: bytes) -> list[tuple[str, float]]:
        return []


class Tls12Cpu:
    """Charges a :class:`CostTable` for what one TLS 1.2 endpoint did (see the module docstring).

    What happened comes from the core (:mod:`tls12.trace`), never from reading record bytes
    here: bound to a ``tls12`` connection (:meth:`bind`, which the driver calls) the model
    turns its trace on and charges the records and handshake messages the connection
    reports; unbound (a relay that forwards ciphertext, a replayed byte script) it asks
    :class:`tls12.trace.WireTrace` what the bytes of each direction were.
    """

    def __init__(self, costs: CostTable = DEFAULT_COSTS) -> None:
        self.costs = costs
        self._conn: Any = None
        self._untraced = False
        self._in = WireTrace()
        self._out = WireTrace()
        self._ske_sent = False
        self._ske_received = False

    def bind(self, obj: object) -> None:
        """Charge what ``obj`` reports, if it is a ``tls12`` connection (it has a trace).

        Output the connection queued before its trace was on (a client's ClientHello, built
        in its constructor) is read from the bytes of the first step by ``WireTrace``.
        """
        if hasattr(obj, "enable_trace") and hasattr(obj, "take_trace"):
            self._untraced = getattr(obj, "trace", None) is None
            obj.enable_trace()
            self._conn = obj

    def charge(self, received: bytes, sent: bytes) -> list[tuple[str, float]]:
        if self._conn is None:
            read, wrote = _wire_view(self._in.feed(received)), _wire_view(self._out.feed(sent))
            return self._charge_in(*read) + self._charge_out(*wrote)
        events = self._conn.take_trace()
        if not events and not self._untraced:     # a step that read or wrote no whole record
            return []
        read, wrote = _split_trace(events)
        if self._untraced:          # the first step also sends what was queued before bind
            self._untraced = False
            covered = sum(5 + e.data["length"] for e in events
                          if (e.category, e.name) == ("record", "sent") and e.data["length"] is not None)
            early = _wire_view(self._out.feed(sent[: max(0, len(sent) - covered)]))
            wrote = (early[0] + wrote[0], early[1] + wrote[1])
        return self._charge_in(*read) + self._charge_out(*wrote)

    def _charge_in(self, messages: list[Any], records: list[int]) -> list[tuple[str, float]]:
        c = self.costs
        ops: list[tuple[str, float]] = []
        for mtype in messages:
            ops.append(("handshake_message", c.handshake_message))
            if mtype == _SERVER_KEY_EXCHANGE:
                self._ske_received = True
                ops.append(("rsa_public", c.rsa_public))
            elif mtype == _CLIENT_KEY_EXCHANGE:
                ops.append(("ecdhe_derive", c.ecdhe_derive) if self._ske_sent
                           else ("rsa_private", c.rsa_private))
        return ops + [("record_open", c.record(n)) for n in records]

    def _charge_out(self, messages: list[Any], records: list[int]) -> list[tuple[str, float]]:
        c = self.costs
        ops: list[tuple[str, float]] = []
        for mtype in messages:
            ops.append(("handshake_message", c.handshake_message))
            if mtype == _SERVER_KEY_EXCHANGE:
                self._ske_sent = True
                ops += [("ecdhe_keygen", c.ecdhe_keygen), ("rsa_private", c.rsa_private)]
            elif mtype == _CLIENT_KEY_EXCHANGE:
                ops += ([("ecdhe_keygen", c.ecdhe_keygen), ("ecdhe_derive", c.ecdhe_derive)]
                        if self._ske_received else [("rsa_public", c.rsa_public)])
        return ops + [("record_seal", c.record(n)) for n in records]


_APPDATA = ContentType.APPLICATION_DATA
_SERVER_KEY_EXCHANGE = HandshakeType.SERVER_KEY_EXCHANGE
_CLIENT_KEY_EXCHANGE = HandshakeType.CLIENT_KEY_EXCHANGE

_View = tuple[list[Any], list[int]]
"""One direction of a step: (handshake message types, fragment lengths of protected records)."""


def _wire_view(events: list[Any]) -> _View:
    """What :class:`tls12.trace.WireTrace` saw of one direction."""
    messages = [e.data["type"] for e in events if e.category == "handshake"]
    records = [e.data["length"] for e in events if e.category == "record" and e.data["encrypted"]]
    return messages, records


def _split_trace(events: list[Any]) -> tuple[_View, _View]:
    """A connection's trace of one step, cut into (received, sent) views."""
    read: _View = ([], [])
    wrote: _View = ([], [])
    for e in events:
        if e.category == "handshake":
            (read if e.name == "message_parsed" else wrote)[0].append(e.data["type"])
        elif e.category == "record" and e.data["encrypted"]:
            length = e.data["length"]
            if e.name == "received":
                read[1].append(length)
            else:   # a record writer that emits no records (SSL splitting): its plaintext
                wrote[1].append(length if length is not None else e.data["plaintext_length"])
    return read, wrote


def best_time(fn: Callable[[], object], repeat: int, number: int) -> float:
    """Seconds per call: the best of ``repeat`` runs of ``number`` calls (least noisy)."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t0) / number)
    return best


def measure_costs(quick: bool = True) -> CostTable:
    """Time every operation of :class:`CostTable` with the real code on this machine.

    RSA-2048 with ``tls12``'s key operations (PKCS#1 v1.5 premaster decryption and
    encryption), x25519 with :mod:`tls12.ecdhe`, full in-memory RSA handshakes between real
    ``tls12`` client and server objects (``handshake_message`` is what is left once the two
    public-key operations are subtracted, per message), the ``tls12`` record cipher
    (AES-128-CBC + HMAC-SHA1) on a 64-byte and a 16 KiB record (a line through both), and
    ``hashlib.sha256``. ``quick`` takes fewer repetitions (a second or so in total).
    """
    from cryptography.hazmat.primitives.asymmetric import padding

    from tls12 import ClientConnection, ServerConnection
    from tls12.certs import generate_self_signed
    from tls12.config import ClientConfig, ServerConfig
    from tls12.ecdhe import ecdhe_keypair, ecdhe_shared_secret
    from tls12.keys import LocalKey
    from tls12.messages import NamedGroup
    from tls12.recordcrypto import RecordCipher
    from tls12.suites import CipherSuite

    repeat, number = (3, 5) if quick else (7, 20)
    creds = generate_self_signed(key_size=2048)
    assert creds.private_key is not None  # generated credentials hold their key
    key, public = LocalKey(creds.private_key), creds.private_key.public_key()
    premaster = b"\x03\x03" + os.urandom(46)
    encrypted = public.encrypt(premaster, padding.PKCS1v15())
    rsa_private = best_time(lambda: key.decrypt_premaster(encrypted), repeat, number)
    rsa_public = best_time(lambda: public.encrypt(premaster, padding.PKCS1v15()), repeat, number)
    group = NamedGroup.X25519
    seed = os.urandom(32)
    priv, pub = ecdhe_keypair(group, seed)
    keygen = best_time(lambda: ecdhe_keypair(group, seed), repeat, number * 4)
    derive = best_time(lambda: ecdhe_shared_secret(group, priv, pub), repeat, number * 4)

    suite = (CipherSuite.TLS_RSA_WITH_AES_128_CBC_SHA,)

    def handshake() -> None:
        server = ServerConnection(ServerConfig(credentials=creds, cipher_suites=suite))
        client = ClientConnection(ClientConfig(cipher_suites=suite))
        for _ in range(4):
            server.receive_data(client.data_to_send())
            client.receive_data(server.data_to_send())
        if not client.handshake_complete:  # pragma: no cover - a broken build
            raise RuntimeError("in-memory handshake did not complete")

    # ClientHello, ServerHello, Certificate, ServerHelloDone, ClientKeyExchange, 2 x Finished,
    # each built by one side and parsed by the other
    per_message = (best_time(handshake, repeat, number) - rsa_private - rsa_public) / 14
    cipher = RecordCipher("aes-128-cbc", "sha1", bytes(16), bytes(20))
    small, large = bytes(64), bytes(16384)
    iv = bytes(16)
    t_small = best_time(lambda: cipher.seal(1, _APPDATA, 0x0303, small, iv), repeat, number * 50)
    t_large = best_time(lambda: cipher.seal(1, _APPDATA, 0x0303, large, iv), repeat, number * 10)
    per_byte = max(t_large - t_small, 0.0) / (len(large) - len(small))
    block = os.urandom(1 << 20)
    hash_per_byte = best_time(lambda: hashlib.sha256(block).digest(), repeat, 2) / len(block)
    return CostTable(rsa_private, rsa_public, keygen, derive, max(per_message, 0.0),
                     max(t_small - len(small) * per_byte, 0.0), per_byte, hash_per_byte,
                     source="measured")
