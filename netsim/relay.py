"""Middleboxes on the driver: a relay that terminates one TCP connection and opens another.

A :class:`Relay` is the proxy of a two-hop path (client -- relay -- server): two
:class:`~netsim.drive.Driver` instances, the relay's side of each an internal object whose
bytes go to a :class:`RelayApplication` that decides what to forward and when.
:class:`Forward` cuts through or stores and forwards whole units (:func:`tls_records`, the
core's record framing); a protocol-aware relay (``sslsplit.model_driver.SplitProxy``)
rewrites the stream.  The relay's work runs on its own :class:`~netsim.host.Host`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import simpy

from .cpu import CpuModel
from .drive import Application, Driver, SansIO, Side, Started, tls_records
from .host import Host
from .tcp import TcpConnection

if TYPE_CHECKING:
    from .pcap import PcapWriter

__all__ = ["Relay", "RelayApplication", "Forward", "tls_records"]


class RelayApplication(Protocol):
    """What a :class:`Relay` does with the bytes each side sends it (the middlebox's logic).

    ``from_client`` / ``from_server`` get every chunk as it arrives in order (``b""``: that
    side's FIN). They answer through the relay: :meth:`Relay.send_to_server`,
    :meth:`Relay.send_to_client`, :meth:`Relay.close_server`, :meth:`Relay.close_client` --
    now, or later from a SimPy process of their own (e.g. after fetching something).
    """

    def from_client(self, relay: Relay, data: bytes) -> None: ...

    def from_server(self, relay: Relay, data: bytes) -> None: ...


class _Half:
    """The relay's sans-IO object on one leg: bytes in go to the application, bytes out wait."""

    def __init__(self, deliver: Callable[[bytes], None]) -> None:
        self._deliver = deliver
        self.out = bytearray()
        self.busy = False     # inside receive_data: data_to_send follows anyway, no wake needed

    def receive_data(self, data: bytes) -> list[Any]:
        self.busy = True
        try:
            self._deliver(data)
        finally:
            self.busy = False
        return []

    def data_to_send(self) -> bytes:
        out = bytes(self.out)
        self.out.clear()
        return out


class Relay:
    """A middlebox: terminates the client's TCP connection ``front`` and opens ``back``.

    The proxy of a two-hop path (client -- relay -- server). ``front`` carries client (a) to
    relay (b), ``back`` relay (a) to server (b); each is run by its own :class:`Driver`
    (``relay.front`` at once, ``relay.back`` created when ``front`` is open: the relay
    connects to the server as soon as the client has connected, as a TCP proxy does).
    What crosses the relay, and when, is up to ``app`` (a :class:`RelayApplication`):
    :class:`Forward` passes bytes on as they arrive (*cut through*) or in whole units
    (*store and forward*); a protocol-aware relay (an SSL-splitting proxy) rewrites them.

    The relay's own work runs on ``relay_host`` (default: a private one-core host), priced by
    ``front_cpu`` (what it receives from and sends to the client) and ``back_cpu`` (the same
    toward the server); default no CPU time. ``client_*`` / ``server_*`` are as for
    :class:`Driver`. The relay's sides are named ``"relay"`` in both drivers' flights and
    events; they keep relaying after one side's FIN until the application closes the other
    (a half-close passes through). ``capture``: a :class:`~netsim.pcap.PcapWriter` for both
    connections (the relay's host is the server of ``front`` and the client of ``back``; the
    servers on ``port``); connections the application opens may use it too (``relay.capture``).

    Example -- a TLS handshake and GET through a store-and-forward relay (whole records only),
    the client on the relay's LAN, the server behind a 160 kbit/s line::

        >>> from netsim.drive import HttpFileServer, HttpGetClient
        >>> from netsim.link import LAN, Duplex, LinkParams
        >>> from tls12 import ClientConnection, ServerConnection
        >>> from tls12.certs import generate_self_signed
        >>> from tls12.config import ClientConfig, ServerConfig
        >>> env = simpy.Environment()
        >>> lan, line = Duplex(env, LAN), Duplex(env, LinkParams(160e3, 0.010))
        >>> front = TcpConnection(env, (lan.ab,), (lan.ba,))
        >>> back = TcpConnection(env, (line.ab,), (line.ba,))
        >>> server = ServerConnection(ServerConfig(credentials=generate_self_signed(key_size=1024)))
        >>> get = HttpGetClient("/")
        >>> relay = Relay(env, front, back, ClientConnection(ClientConfig()), server,
        ...               Forward(tls_records), client_app=get,
        ...               server_app=HttpFileServer(b"x" * 3000))
        >>> env.run()
        >>> get.body == b"x" * 3000, relay.finished_at is not None
        (True, True)
    """

    def __init__(self, env: simpy.Environment, front: TcpConnection, back: TcpConnection,
                 client: SansIO, server: SansIO, app: RelayApplication, *,
                 client_app: Application | None = None, server_app: Application | None = None,
                 client_host: Host | None = None, server_host: Host | None = None,
                 relay_host: Host | None = None, client_cpu: CpuModel | None = None,
                 server_cpu: CpuModel | None = None, front_cpu: CpuModel | None = None,
                 back_cpu: CpuModel | None = None, start: float = 0.0,
                 capture: PcapWriter | None = None, port: int = 443) -> None:
        self.env = env
        self.app = app
        self.capture = capture
        self._port = port
        self.host = relay_host or Host(env, "relay")
        self._back_conn = back
        self._server = (server, server_app, server_host, server_cpu, back_cpu)
        self._front_half = _Half(lambda data: app.from_client(self, data))
        self._back_half = _Half(lambda data: app.from_server(self, data))
        self._close_back = False
        self.back: Driver | None = None
        self.front = Driver(env, front, client, self._front_half, client_app=client_app,
                            server_app=self._front_started, client_host=client_host,
                            server_host=self.host, client_cpu=client_cpu, server_cpu=front_cpu,
                            start=start, capture=capture, port=port)
        self.front.server.name = "relay"
        self.front.server.linger = True

    def _front_started(self, side: Side, event: Any) -> None:
        if not isinstance(event, Started) or self.back is not None:
            return
        server, server_app, server_host, server_cpu, back_cpu = self._server
        self.back = Driver(self.env, self._back_conn, self._back_half, server,
                           server_app=server_app, client_host=self.host, server_host=server_host,
                           client_cpu=back_cpu, server_cpu=server_cpu, capture=self.capture,
                           port=self._port)
        self.back.client.name = "relay"
        self.back.client.linger = True
        if self._close_back:
            self.back.client.shutdown()

    @property
    def now(self) -> float:
        return self.env.now

    # -- what the application calls -----------------------------------------------------
    def send_to_server(self, data: bytes) -> None:
        """Queue ``data`` on the server connection (written at the relay side's next step)."""
        if data:
            self._back_half.out += data
            self._wake(self.back.client if self.back else None, self._back_half)

    def send_to_client(self, data: bytes) -> None:
        """Queue ``data`` on the client connection."""
        if data:
            self._front_half.out += data
            self._wake(self.front.server, self._front_half)

    def close_server(self) -> None:
        """FIN toward the server once the bytes queued for it are written."""
        if self.back is None:
            self._close_back = True
            return
        self.back.client.shutdown()
        self._wake(self.back.client, self._back_half)

    def close_client(self) -> None:
        """FIN toward the client once the bytes queued for it are written."""
        self.front.server.shutdown()
        self._wake(self.front.server, self._front_half)

    @staticmethod
    def _wake(side: Side | None, half: _Half) -> None:
        if side is not None and not half.busy:
            side.wake()

    # -- results -------------------------------------------------------------------------
    @property
    def drivers(self) -> list[Driver]:
        """The front driver, then the back one once it exists."""
        return [self.front] + ([self.back] if self.back is not None else [])

    @property
    def finished_at(self) -> float | None:
        """When both connections had ended (``None`` while one is still open)."""
        if self.back is None or self.front.finished_at is None or self.back.finished_at is None:
            return None
        return max(self.front.finished_at, self.back.finished_at)


class Forward:
    """Relay application that passes both directions on unchanged, FINs included.

    ``unit=None``: *cut through* -- every chunk is sent on as it arrives. Otherwise *store
    and forward*: ``unit(buffered)`` says how many leading bytes form whole units (e.g.
    :func:`tls_records`); only those leave, the rest waits for more (and leaves as it is at
    the sender's FIN).
    """

    def __init__(self, unit: Callable[[bytes], int] | None = None) -> None:
        self.unit = unit
        self._held = {"client": bytearray(), "server": bytearray()}

    def from_client(self, relay: Relay, data: bytes) -> None:
        self._pass("client", data, relay.send_to_server, relay.close_server)

    def from_server(self, relay: Relay, data: bytes) -> None:
        self._pass("server", data, relay.send_to_client, relay.close_client)

    def _pass(self, sender: str, data: bytes, send: Callable[[bytes], None],
              close: Callable[[], None]) -> None:
        held = self._held[sender]
        if not data:
            send(bytes(held))
            held.clear()
            close()
        elif self.unit is None:
            send(data)
        else:
            held += data
            n = self.unit(bytes(held))
            if n:
                send(bytes(held[:n]))
                del held[:n]
