"""The cluster's side of TCP: buckets, fingered ISNs, port choice, gates and takeover.

Built on :mod:`netsim.tcp` (byte-accurate: sequence numbers, real payload bytes, go-back-N
retransmission).  One :class:`ClusterTcpConnection` joins a client to the cluster's virtual
IP.  Its ``a`` half carries client -> cluster bytes (the cluster end is the receiver), its
``b`` half cluster -> client bytes (the cluster end is the sender).  Which node *is* the
cluster end changes at a takeover; the TCP object stays, exactly as the client's socket does.

The mechanisms of the paper's section 4, each a small function or method here:

* :func:`bucket_of`: the 4-tuple hashed into one of ``buckets`` (1024) buckets (section 3.2);
* :func:`fingered_isn` / :func:`ack_is_fingered`: bits 3-20 of the ISN carry a cluster-secret
  MAC of the 4-tuple, so a node with no state can recognise the client's first ACK
  (section 4.2, Figure 3);
* :func:`relay_port`: the relay -> server source port chosen so that both connections of a
  relay fall into one bucket (section 4.5);
* withheld ACKs: the cluster end acknowledges only what the mirror committed, through
  :meth:`netsim.tcp.HalfConnection.set_ack_limit` (``rcv_appack``, section 4.6);
* :class:`Gate`: a node that is dead (or a bucket that has no live owner yet) neither
  receives nor transmits: segments and ACKs are lost, as on the wire;
* :meth:`ClusterTcpConnection.take_over`: the new owner's TCP state is the clustered one.
  The receiver rewinds ``rcv_nxt`` to the clustered ``rcv_appack`` (the client retransmits
  what was never acknowledged) and the sender's queue is cut back to the clustered stream
  end, so that only bytes the mirror can reproduce are ever (re)sent;
  :meth:`ClusterTcpConnection.announce` sends the single ACK the paper's mirror sends when
  it takes over (section 4.8) and :meth:`ClusterSendHalf.resend_now` sends the
  unacknowledged tail at once instead of at the next retransmission timeout;
* :class:`RstGuard`: RSTs for unknown connections are suppressed for 2MSL after a takeover
  (section 4.6).

Subclassing note: :class:`ClusterSendHalf` extends :class:`netsim.tcp.HalfConnection` with
:meth:`~ClusterSendHalf.truncate`, which edits the retransmission queue (a model of a new
node's socket that never held the dead node's unclustered bytes), and
:meth:`~ClusterSendHalf.resend_now`, which rewinds it and wakes the sender (a model of a
restored socket that goes back to the peer's ACK at once); ``netsim.tcp`` itself is
unchanged.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass

import simpy

from netsim.link import Link, Packet
from netsim.tcp import HalfConnection, TcpConnection, TcpParams

__all__ = [
    "FourTuple",
    "bucket_of",
    "fingered_isn",
    "ack_is_fingered",
    "relay_port",
    "Gate",
    "RstGuard",
    "ClusterSendHalf",
    "ClusterTcpConnection",
    "FINGER_SHIFT",
    "FINGER_BITS",
]

#: The finger occupies ISN bits 3..20 (18 bits), as in the paper.
FINGER_SHIFT = 3
FINGER_BITS = 18
_FINGER_MASK = ((1 << FINGER_BITS) - 1) << FINGER_SHIFT


@dataclass(frozen=True, slots=True)
class FourTuple:
    """Addresses and ports of one TCP connection, seen from the client."""

    src: str
    sport: int
    dst: str
    dport: int

    def encode(self) -> bytes:
        """Canonical bytes: the input of the bucket hash and of the finger MAC."""
        return f"{self.src}|{self.sport}|{self.dst}|{self.dport}".encode()


def bucket_of(t: FourTuple, buckets: int = 1024) -> int:
    """The bucket of a connection; both directions of one connection share it."""
    a, b = (t.src, t.sport), (t.dst, t.dport)
    lo, hi = min(a, b), max(a, b)
    digest = hashlib.sha256(f"{lo}|{hi}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % buckets


def _finger(secret: bytes, t: FourTuple) -> int:
    mac = hmac.new(secret, t.encode(), hashlib.sha256).digest()
    return int.from_bytes(mac[:4], "big") & ((1 << FINGER_BITS) - 1)


def fingered_isn(secret: bytes, t: FourTuple, base: int) -> int:
    """A 32-bit ISN: ``base`` with bits 3-20 replaced by the MAC of ``t`` under ``secret``."""
    if not 0 <= base < 2**32:
        raise ValueError(f"ISN base must be a 32-bit value, got {base}")
    return (base & ~_FINGER_MASK & 0xFFFFFFFF) | (_finger(secret, t) << FINGER_SHIFT)


def ack_is_fingered(secret: bytes, t: FourTuple, ack: int) -> bool:
    """Whether ``ack`` acknowledges a SYN-ACK whose ISN this cluster fingered for ``t``.

    True for the client's first ACK (``ISN + 1``: the server has sent no data yet); false,
    except by a 2**-18 chance, once server data moved the ACK on or for a forged 4-tuple.
    """
    return ((ack - 1) & _FINGER_MASK) >> FINGER_SHIFT == _finger(secret, t)


def relay_port(client: FourTuple, relay_ip: str, server: str, server_port: int,
               buckets: int = 1024, first: int = 1024) -> int:
    """The lowest source port >= ``first`` that puts relay -> server in the client's bucket."""
    want = bucket_of(client, buckets)
    for port in range(first, 65536):
        if bucket_of(FourTuple(relay_ip, port, server, server_port), buckets) == want:
            return port
    raise ValueError(f"no source port maps to bucket {want}")


class Gate:
    """A zero-time hop that passes packets only while ``is_open()``; a link-shaped object.

    Put one at the end of the client -> cluster route (the owning node receives) and at the
    start of the cluster -> client route (the owning node transmits).  While closed,
    packets vanish (counted in ``drops``): a dead node neither answers nor sends.
    """

    def __init__(self, env: simpy.Environment, is_open: Callable[[], bool],
                 name: str = "gate") -> None:
        self.env = env
        self.is_open = is_open
        self.name = name
        self.drops = 0

    def send(self, pkt: Packet) -> bool:
        """Forward ``pkt`` to its next hop (or deliver it) if open; drop it otherwise."""
        if not self.is_open():
            self.drops += 1
            return False
        pkt.hop += 1
        if pkt.hop < len(pkt.route):
            pkt.route[pkt.hop].send(pkt)
        else:
            pkt.on_arrive(pkt)
        return True


class RstGuard:
    """Decides whether a node may answer a segment of an unknown connection with a RST.

    After a takeover of a bucket, a node stays silent for ``2 * msl`` (the peers' ACKs for
    data of the dead node may arrive before the sockets are restored, section 4.6);
    ``suppressed`` counts the RSTs it held back.
    """

    def __init__(self, env: simpy.Environment, msl: float) -> None:
        self.env = env
        self.msl = msl
        self._until: dict[int, float] = {}
        self.suppressed = 0

    def took_over(self, bucket: int) -> None:
        """Start the 2MSL silence for ``bucket``."""
        self._until[bucket] = self.env.now + 2 * self.msl

    def may_reset(self, bucket: int) -> bool:
        """True if a RST may be sent now for a connection in ``bucket``; counts suppressions."""
        if self.env.now < self._until.get(bucket, float("-inf")):
            self.suppressed += 1
            return False
        return True


class ClusterSendHalf(HalfConnection):
    """The cluster -> client direction, with the takeover's queue cut (:meth:`truncate`)."""

    def truncate(self, end: int) -> None:
        """Forget queued segments from sequence number ``end`` on (a segment boundary).

        What the client already acknowledged cannot be unsent: ``end`` is raised to
        ``snd_una`` if it is below it (the client then holds bytes the new owner never
        produced, which is what the negative controls show).
        """
        st = self.seq
        end = max(end, st.snd_una)
        keep = [s for s in self._segs if s.seq < end]
        if keep and keep[-1].end > end:
            raise ValueError(f"{self.name}: {end} is not a segment boundary")
        self._segs = keep
        self._nxt = min(self._nxt, len(keep))
        self._una = min(self._una, len(keep))
        if st.fin_sent and st.snd_end > end:
            st.fin_sent = False              # the FIN was the dead node's
        st.snd_end = end
        st.snd_nxt = min(st.snd_nxt, end)
        self._deliveries.clear()

    def resend_now(self) -> int:
        """Go back to ``snd_una`` and (re)send the queue now; return the segments rewound.

        A takeover's new socket has no reason to wait for the dead node's retransmission
        timer (the fixed ``TcpParams.rto``): it starts again from the client's ACK, with the
        initial congestion window of a fresh socket (no congestion state survives a node).
        The real failover does the same (a window probe, then the socket rebased at the
        client's ACK; :mod:`sslacc_sim.aio.linux`).  Segments the client has already are
        harmless: its receiver drops them and answers with its ACK.
        """
        st = self.seq
        if st.reset:
            return 0
        rewound = self._nxt - self._una     # counted in retransmits as they are sent again
        self._nxt = self._una
        st.snd_nxt = st.snd_una
        self.cwnd = min(self.cwnd, self.p.init_cwnd * self.p.mss)
        for event in (self._ack_event, self._data_event):   # wake the sender, whichever
            if not event.triggered:                         # of the two it waits on
                event.succeed()
        return rewound


class ClusterTcpConnection(TcpConnection):
    """A client's connection to the virtual IP; ``b`` is a :class:`ClusterSendHalf`.

    ``ab`` must end with the receiving :class:`Gate` and ``ba`` start with the sending one.
    """

    b: ClusterSendHalf

    def __init__(self, env: simpy.Environment, ab: tuple[Link | Gate, ...],
                 ba: tuple[Link | Gate, ...], params: TcpParams | None = None,
                 name: str = "tcp", isn: tuple[int, int] = (0, 0)) -> None:
        params = params if params is not None else TcpParams()
        super().__init__(env, ab, ba, params, name, isn)  # type: ignore[arg-type]  # a Gate forwards packets like a Link (send)
        self.b = ClusterSendHalf(env, ba, ab, params, f"{name}:b", isn[1])  # type: ignore[arg-type]  # a Gate forwards packets like a Link (send)
        self.a.reverse, self.b.reverse = self.b, self.a

    @property
    def client_ack(self) -> int:
        """The ACK number the client's segments carry (its ``rcv_nxt`` of the b direction)."""
        return self.b.seq.rcv_nxt

    def stream_in(self) -> int:
        """Client -> cluster bytes the cluster end has received (``rcv_nxt`` as an offset)."""
        st = self.a.seq
        return st.rcv_nxt - st.isn - 1

    def stream_out(self) -> int:
        """Cluster -> client bytes queued so far (``snd_end`` as an offset)."""
        st = self.b.seq
        return st.snd_end - st.isn - 1

    def take_over(self, rcv_appack: int, snd_end: int) -> None:
        """Install clustered TCP state (stream offsets) as the new owner's socket."""
        a, b = self.a.seq, self.b.seq
        a.rcv_nxt = a.isn + 1 + rcv_appack
        a.ack_limit = a.rcv_nxt
        self.b.truncate(b.isn + 1 + snd_end)

    def announce(self) -> None:
        """Send the client one ACK of the clustered ``rcv_appack`` now (section 4.8: "a
        better approach is for the mirror to send a single ACK when it takes over"), so that
        client bytes the dead node committed but never acknowledged need no retransmission."""
        self.a._send_ack()
