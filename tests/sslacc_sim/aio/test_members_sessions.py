"""Sessions on the bucket layout: a session made on one member resumes on every other member.

SSLACC §4.9: "the SSL session cache must be shared across the entire cluster". On the bucket
layout a client's next connection hashes, by its new source port, to any member. The member's
mirror holds each session from the connection's updates (cluster, then commit); the third
member gets it from the member's gossip (:class:`~sslacc_sim.aio.linux.sessions.SessionGossip`,
with ``--ring``). In network namespaces (root, iproute2, nftables; never skipped), with
``openssl s_client -bind`` choosing the source port, and so the member, of each connection.
The negative control starts the members without ``--ring``: no gossip, and the third member
answers the resumption with a full handshake.
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

import pytest

from sslacc_sim.aio.linux.cluster import start_members
from sslacc_sim.aio.linux.failover import site_credentials
from sslacc_sim.aio.linux.netns import ADDRESSES, Topology

from .member_loads import ports_of_members
from .test_shared_sessions import _BODY, _fetch

pytestmark = [pytest.mark.interop, pytest.mark.usefixtures("namespaces")]

_BUCKETS = 16


def _resumes(tmp_path: Path, tag: str, ring: bool) -> list[bool]:
    """A new session on member A, then a resumption of it from a port of C's, B's, and A's."""
    docroot = tmp_path / "www"
    docroot.mkdir()
    (docroot / "page").write_bytes(_BODY)
    cert, key = site_credentials(tmp_path)
    a, b, c, again = ports_of_members(4, 3, _BUCKETS)  # source ports in A's, B's, C's, A's buckets
    sess = tmp_path / "session.pem"
    with ExitStack() as stack:
        topo = stack.enter_context(Topology(tag=tag, shared_vip=True))
        start_members(topo, stack, members=3, docroot=docroot, cert=cert, key=key,
                      buckets=_BUCKETS, ring=ring)  # fmt: skip
        reused, _ = _fetch(topo, cert, sess, resume=False, bind=f"{ADDRESSES['client']}:{a}")
        assert not reused
        got = []
        for i, port in enumerate((c, b, again)):  # C first: B's resumption would mirror it to C
            copy = tmp_path / f"resume{i}.pem"  # s_client writes the session it ends with here
            copy.write_bytes(sess.read_bytes())
            got.append(_fetch(topo, cert, copy, resume=True, bind=f"{ADDRESSES['client']}:{port}")[0])
        return got


def test_a_session_made_on_one_member_resumes_on_every_member(tmp_path: Path) -> None:
    assert _resumes(tmp_path, "t3ss", ring=True) == [True, True, True]


def test_control_without_gossip_the_third_member_makes_a_full_handshake(tmp_path: Path) -> None:
    """Without ``--ring``, C does not have the session; the mirror, B, still has it from the
    updates."""
    assert _resumes(tmp_path, "t3sn", ring=False) == [False, True, True]
