"""A fault campaign's settings (:mod:`~sslacc_sim.aio.linux.campaign`): the fault modes, the
negative controls each layout knows, the files served, and :class:`CampaignConfig`, the
command line's options as one frozen value."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["MODES", "BUCKET_MODES", "CONTROLS", "LAYOUT_CONTROLS", "SIZES", "DEATH_SPAN_S",
           "CampaignConfig", "JOIN", "JOIN_KILL", "MASTER_KILL", "DONOR_KILL", "REJOIN"]

#: ``master-kill`` and ``donor-kill``: the member dies at most this long after the newcomer
#: says ``JOINING`` (seconds, uniform; ``--death-within``): the same span as the newcomer's
#: own death in ``join-kill``, over the same join. From ``JOINING``, the master applied the
#: join itself (``JOINED``) after 0.034-0.039 s, answered the newcomer (``ADMITTED``) after
#: 0.050-0.059 s, and the newcomer said ``ready`` after 0.065-0.079 s (9 ``master-kill``
#: trials, seed 2, the lines timed as they arrived). So about a quarter of the deaths fall in
#: the master's own part -- asking the donors, telling the members -- and the rest while the
#: newcomer reads the table, links and serves with the master as its successor: every row of
#: the design's table (``docs/sslacc-cluster.md``).
DEATH_SPAN_S = 0.2
MODES = ("kill", "hang", "double")
#: What the bucket layout can do to a trial besides (:mod:`~sslacc_sim.aio.linux.campaign_buckets`):
#: ``join``, a fourth member joins the ring at the drawn instant
#: (:mod:`~sslacc_sim.aio.linux.join`), nothing taken over; ``join-kill``, that newcomer is
#: killed at an instant drawn over its join; ``master-kill``, the master is killed while
#: that newcomer joins; ``donor-kill``, another donor is; ``rejoin``, a killed member's node
#: joins again.
JOIN, JOIN_KILL, MASTER_KILL, REJOIN = "join", "join-kill", "master-kill", "rejoin"
DONOR_KILL = "donor-kill"
BUCKET_MODES = (JOIN, JOIN_KILL, MASTER_KILL, DONOR_KILL, REJOIN)
#: Negative controls: the flags each gives the owner and the buddy.
CONTROLS: dict[str, tuple[list[str], list[str]]] = {
    "none": ([], []),
    "eof-only": ([], ["--only-eof-is-death"]),
    "no-keepalive": (["--no-keepalive"], ["--no-keepalive"]),
    "no-fence": (["--no-self-fence"], ["--no-fence"]),
    "no-sniff-data": ([], ["--no-sniff-data"]),
    "no-sniff-unaccepted": ([], ["--no-sniff-unaccepted"]),
    "no-syn-replay": ([], ["--no-syn-replay"]),
    "no-ring": ([], []),  # the bucket layout's: members started without --ring
}
#: The controls each layout knows.
LAYOUT_CONTROLS = {"chain": set(CONTROLS) - {"no-ring"}, "buckets": {"none", "no-ring", "no-fence"}}
#: The files served (bytes); each connection draws one.
SIZES = (1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24)


@dataclass(frozen=True)
class CampaignConfig:
    """One campaign's settings (the command line's options)."""

    trials: int = 4
    seed: int = 1
    connections: int = 32
    modes: tuple[str, ...] = MODES
    wake_after: float = 10.0
    client_timeout: float = 60.0
    control: str = "none"
    sizes: tuple[int, ...] = SIZES
    suite: str = "AES128-SHA"
    window: tuple[float, float] = (0.0, 1.0)
    """The kill instant is drawn uniformly over this fraction of the load's length."""
    second_within: float = 1.0
    """A double's second kill comes uniformly within this many seconds of the takeover."""
    death_within: float = DEATH_SPAN_S
    """``master-kill`` and ``donor-kill``: the member dies uniformly within this many seconds
    of the newcomer's ``JOINING`` (:data:`DEATH_SPAN_S`; smaller aims at the master's own
    part of the join)."""
    tag_prefix: str = "cp"
    """Trial N's namespaces are ``sacc-<tag_prefix>N-*`` (two campaigns at once need two)."""
    stall_ms: float = 0.0
    """The owner (every member, on the bucket layout) waits this long before each accept and
    each read (``--stall-ms`` of the node): queues fill, and a fault finds connections established but not accepted, and
    client bytes acknowledged but not consumed."""
    layout: str = "chain"
    """``chain``: an owner, its buddy (and for ``double`` the buddy's buddy); ``buckets``:
    three members serving their own buckets (:mod:`~sslacc_sim.aio.linux.campaign_buckets`)."""
    baselines: int = 0
    """Trials without a fault, spread evenly among the fault trials: each measures the gap to
    every client's next byte from an instant drawn as a fault's is (``mode`` ``none``), what
    the load alone makes a client wait on this machine, beside which the faults' gaps are
    read (the summary's ``baseline``)."""
    pcap: Path | None = None
    """A folder: each trial's traffic as the client's interface saw it goes to
    ``t<N>.pcap`` there (tcpdump, headers only: :mod:`testbed.linux.capture`), to read with
    Wireshark or ``tshark`` beside ``flows.csv``. The bucket layout's members share one MAC:
    a segment's sender is its port's bucket's owner (:func:`~sslacc_sim.aio.linux.buckets.bucket_of`
    and the table), the heir's after a takeover."""

    def __post_init__(self) -> None:
        if self.layout not in LAYOUT_CONTROLS:
            raise ValueError(f"layout must be chain or buckets, got {self.layout!r}")
        if self.control not in LAYOUT_CONTROLS[self.layout]:
            raise ValueError(f"control must be one of {sorted(LAYOUT_CONTROLS[self.layout])} with "
                             f"the {self.layout} layout, got {self.control!r}")
        known = set(MODES) | (set(BUCKET_MODES) if self.layout == "buckets" else set())
        if not self.modes or set(self.modes) - known:
            raise ValueError(f"modes must be a non-empty subset of {sorted(known)} with the "
                             f"{self.layout} layout, got {self.modes}")  # fmt: skip
        if not self.tag_prefix.isalpha() or len(self.tag_prefix) > 4:
            raise ValueError(f"tag_prefix must be 1-4 letters, got {self.tag_prefix!r}")
        if self.baselines < 0:
            raise ValueError(f"baselines must be 0 or more, got {self.baselines}")
        if self.death_within <= 0 or self.second_within <= 0:
            raise ValueError("death_within and second_within must be positive")
        if not 0 <= self.window[0] <= self.window[1]:
            raise ValueError(f"window must be 0 <= start <= end, got {self.window}")
