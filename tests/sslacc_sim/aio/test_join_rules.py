"""A join's rules and frames, in process (no namespaces): :mod:`sslacc_sim.aio.linux.join`.

The master's shares leave the newcomer an even share taken from the fullest members; the
table a join makes gives every bucket a mirror in the larger ring; the kernel's socket list
(``/proc/net/tcp``) says which buckets are busy; and every frame of a join, fuzzed with
Hypothesis, is either read or refused with a :class:`JoinError`, never another exception.
"""

from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sslacc_sim.aio.linux.buckets import BucketFilter, bucket_of
from sslacc_sim.aio.linux.join import (
    JoinError,
    Joining,
    admit,
    busy_buckets,
    connections,
    join_frame,
    joined_frame,
    read_buckets,
    read_newcomer,
    shares,
)
from sslacc_sim.buckets import BucketTable

VIP = "10.88.0.100"


def _proc_line(i: int, local: tuple[str, int], remote: tuple[str, int], state: str) -> str:
    def hexed(address: tuple[str, int]) -> str:
        host = int.from_bytes(socket.inet_aton(address[0]), sys.byteorder)
        return f"{host:08X}:{address[1]:04X}"

    return (f"{i:4d}: {hexed(local)} {hexed(remote)} {state} 00000000:00000000 00:00000000 "
            "00000000     0        0 12345 1 0000000000000000 20 4 30 10 -1")


def test_shares_leave_the_newcomer_an_even_share_from_the_fullest() -> None:
    table = BucketTable(3, 16)  # A 6, B 5, C 5
    plan = shares(table, 3)
    assert plan == {0: 2, 1: 1, 2: 1}
    assert sum(plan.values()) == 16 // 4
    admit(table, 3, [3, 9, 1, 5])
    counts = [len(table.owned_by(m)) for m in table.members]
    assert counts == [4, 4, 4, 4]


@given(st.integers(2, 6), st.integers(8, 256))
def test_after_a_join_every_member_holds_an_even_share(members: int, buckets: int) -> None:
    table = BucketTable(members, buckets)
    plan = shares(table, members)
    given_up = [b for m, n in plan.items() for b in table.owned_by(m)[:n]]
    admit(table, members, given_up)
    counts = [len(table.owned_by(m)) for m in table.members]
    assert max(counts) - min(counts) <= 1
    assert len(table.owned_by(members)) == buckets // (members + 1)


def test_a_join_puts_the_newcomer_into_the_ring() -> None:
    """D joins A, B, C: C's buckets are mirrored by D, D's by A; A's and B's keep theirs."""
    table = BucketTable(3, 16)
    admit(table, 3, [1, 3, 5, 9])
    for b in range(16):
        owner = table.owner[b]
        assert table.mirror[b] == {0: 1, 1: 2, 2: 3, 3: 0}[owner]
    with pytest.raises(JoinError):
        admit(table, 3, [])
    with pytest.raises(JoinError):
        admit(table, 4, [16])


def test_busy_buckets_are_those_with_a_connection_in_the_kernel(tmp_path: Path) -> None:
    """Established, half-open (SYN answered) and closing count; listening, TIME_WAIT and
    connections to another address or port do not."""
    client = "10.88.0.2"
    lines = ["  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid",
             _proc_line(0, (VIP, 443), ("0.0.0.0", 0), "0A"),
             _proc_line(1, (VIP, 443), (client, 40001), "01"),
             _proc_line(2, (VIP, 443), (client, 40002), "03"),
             _proc_line(3, (VIP, 443), (client, 40003), "08"),
             _proc_line(4, (VIP, 443), (client, 40004), "06"),
             _proc_line(5, (VIP, 80), (client, 40005), "01"),
             _proc_line(6, ("10.90.0.11", 443), (client, 40006), "01")]  # fmt: skip
    path = tmp_path / "tcp"
    path.write_text("\n".join(lines) + "\n")
    expected = {bucket_of(client, p, 64) for p in (40001, 40002, 40003)}
    assert busy_buckets(VIP, 443, 64, path) == expected
    assert connections(path.read_text())[1] == ((VIP, 443), (client, 40001), "01")


@given(st.text(max_size=400))
def test_the_socket_list_parser_reads_or_refuses(text: str) -> None:
    try:
        rows = connections("heading\n" + text)
    except JoinError:
        return
    for local, remote, state in rows:
        socket.inet_aton(local[0])
        assert 0 <= local[1] < 65536 and 0 <= remote[1] < 65536 and len(state) == 2


def test_frames_round_trip() -> None:
    assert read_newcomer(join_frame(3, "10.90.0.14", "pd")) == (3, "10.90.0.14", "pd")
    frame = joined_frame(3, "10.90.0.14", "pd", [9, 1, 5, 3])
    assert read_newcomer(frame) == (3, "10.90.0.14", "pd")
    assert read_buckets(frame) == [1, 3, 5, 9]


_JSON = st.recursive(st.none() | st.booleans() | st.integers(-2, 70000) | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=5)
                     | st.dictionaries(st.text(max_size=12), inner, max_size=5), max_leaves=20)


@given(st.dictionaries(st.sampled_from(["type", "member", "address", "switch_port", "buckets",
                                        "count"]), _JSON, max_size=6))  # fmt: skip
def test_a_garbled_join_frame_is_refused_with_a_join_error(header: dict[str, Any]) -> None:
    for read in (read_newcomer, read_buckets):
        try:
            read(header)
        except JoinError:
            continue


@pytest.mark.parametrize("header", [
    {"type": "join", "member": -1, "address": "10.0.0.1", "switch_port": "pd"},
    {"type": "join", "member": True, "address": "10.0.0.1", "switch_port": "pd"},
    {"type": "join", "member": 3, "address": "10.0.0", "switch_port": "pd"},
    {"type": "join", "member": 3, "address": "10.0.0.1", "switch_port": "p d"},
    {"type": "joined", "member": 3, "address": "10.0.0.1", "switch_port": "pd", "buckets": [1, 1]},
    {"type": "joined", "member": 3, "address": "10.0.0.1", "switch_port": "pd", "buckets": [-1]},
    {"type": "joined", "member": 3, "address": "10.0.0.1", "switch_port": "pd", "buckets": "1"},
])  # fmt: skip
def test_each_bad_field_is_refused(header: dict[str, Any]) -> None:
    with pytest.raises(JoinError):
        read_newcomer(header)
        read_buckets(header)


class _Recording:
    """An nftables stand-in that keeps the scripts it is given (:class:`Nft`)."""

    def __init__(self) -> None:
        self.scripts: list[str] = []

    def run(self, script: str) -> None:
        self.scripts.append(script.strip())


class _Donor(Joining):
    """Member 0 of three, with its filter on a recording nftables (the host a donor's part
    runs in; its own rules are the code under test)."""

    def __init__(self) -> None:
        self.index, self.buckets, self.vip, self.port = 0, 16, VIP, 443
        self.table = BucketTable(3, 16)
        self._ring_lock = threading.Lock()
        self._filtered = set(self.table.owned_by(0))
        self._gifts, self._tries, self._gift_lock = {}, {}, threading.RLock()
        self.nft = _Recording()
        self._nft = BucketFilter(self.nft, VIP, 443, 16)

    def _own(self, buckets: Iterable[int]) -> None:
        new = set(buckets) - self._filtered
        self._filtered |= new
        assert self._nft is not None
        self._nft.own(new)


def test_a_donor_gives_idle_buckets_and_takes_back_those_no_join_took() -> None:
    donor = _Donor()
    given = donor._give(2)  # no connection on the service here: every bucket is idle
    assert given == [0, 3] and donor._filtered == {6, 9, 12, 15}
    assert donor.nft.scripts[-1].startswith("delete element") and "{ 0, 3 }" in donor.nft.scripts[-1]
    donor._take_back(given, after=0.01)  # no joined came: served again
    assert donor._filtered == {0, 3, 6, 9, 12, 15}
    assert donor.nft.scripts[-1].startswith("add element") and "{ 0, 3 }" in donor.nft.scripts[-1]
    again = donor._give(1)
    admit(donor.table, 3, again)  # this time the join ended: the bucket is the newcomer's
    before = list(donor.nft.scripts)
    donor._take_back(again, after=0.01)
    assert donor.nft.scripts == before and 0 not in donor._filtered


class _SynOnDisown(_Recording):
    """A recording nftables that, when the donor takes buckets out of its filter, lets a SYN
    of ``bucket`` reach the kernel (a SYN_RECV line in the socket list the donor reads): the
    race the donor's second look closes."""

    def __init__(self, sockets: Path, client: tuple[str, int]) -> None:
        super().__init__()
        self.sockets, self.client = sockets, client

    def run(self, script: str) -> None:
        super().run(script)
        if script.strip().startswith("delete element"):
            with self.sockets.open("a") as out:
                out.write(_proc_line(1, (VIP, 443), self.client, "03") + "\n")


def _client_in(bucket: int) -> tuple[str, int]:
    """A client address whose connection falls in ``bucket`` (of 16)."""
    return next(("10.88.0.2", p) for p in range(40000, 65536) if bucket_of("10.88.0.2", p, 16) == bucket)


def test_a_donor_keeps_a_busy_bucket_and_takes_back_one_a_syn_reached_while_it_gave(
        tmp_path: Path) -> None:  # fmt: skip
    donor = _Donor()
    donor.sockets = tmp_path / "tcp"
    heading = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt\n"
    # a connection of bucket 0 is established (01): the donor gives the next idle ones
    donor.sockets.write_text(heading + _proc_line(0, (VIP, 443), _client_in(0), "01") + "\n")
    donor.nft = _SynOnDisown(donor.sockets, _client_in(3))
    donor._nft = BucketFilter(donor.nft, VIP, 443, 16)
    given = donor._give(2)
    # it chose 3 and 6; a SYN of bucket 3 came while they left its filter: 3 is served again
    assert given == [6]
    assert donor._filtered == {0, 3, 9, 12, 15}
    assert donor.nft.scripts[-1].startswith("add element") and "{ 3 }" in donor.nft.scripts[-1]
