"""The fault campaign on the bucket layout (issue 22): three members, a random one failing.

In network namespaces (root, iproute2, nftables and the four clients; never skipped): the same
load as the chain's campaign (``test_campaign.py``) against three members that each serve their
own buckets, mirrored to the next; each trial kills or hangs a member drawn from the seed (or kills it and then its successor) at an
instant drawn over the load. Every connection must be byte-exact, and a hung member woken again
must put no frame on the LAN (counted on its switch port). The negative controls start the
members without ``--ring`` (a death is only reported, and connections are lost) or without
the fence (a woken member's frames get through).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pandas as pd
import pytest

from sslacc_sim.aio.linux.campaign import CampaignConfig, run_campaign
from sslacc_sim.aio.linux.campaign_buckets import JOIN_SPAN_S, donor_of
from sslacc_sim.aio.linux.campaign_config import DEATH_SPAN_S
from sslacc_sim.aio.linux.spells import client_segments

pytestmark = [pytest.mark.interop, pytest.mark.usefixtures("namespaces")]

SIZES = (1 << 10, 1 << 14, 1 << 18, 1 << 20, 1 << 22)


def test_a_small_seeded_bucket_campaign_keeps_every_connection_byte_exact(tmp_path: Path) -> None:
    """A kill, a hang and a double kill (the victim, then its successor within a second of
    its takeover), and a baseline trial (no fault, the gaps measured from an instant)."""
    cfg = CampaignConfig(trials=3, seed=3, connections=32, modes=("kill", "hang", "double"), wake_after=1.5,
                         client_timeout=40, sizes=SIZES, window=(0.05, 0.8), tag_prefix="tb",
                         layout="buckets", stall_ms=10, baselines=1)  # fmt: skip
    summary = run_campaign(cfg, tmp_path, progress=False)
    trials = (tmp_path / "trials.csv").read_text()
    assert summary["connections"] == 3 * 32 and summary["kills"] == 3
    # the baseline trial: its connections byte-exact too, its flows measured from its instant
    # and kept out of the faults' gaps (test_campaign_baseline.py)
    base = pd.read_csv(tmp_path / "trials.csv").query("mode == 'none' and trial > 0")
    assert len(base) == 1 and base["failed"].tolist() == [0], trials
    flows = pd.read_csv(tmp_path / "flows.csv")
    assert (flows["trial"] == base["trial"].iloc[0]).sum() >= 32, trials  # a resumption: two
    assert summary["baseline"]["trials"] == 1
    assert summary["completed_exact"] == summary["connections"], trials
    assert summary["control_trial_ok"] and summary["silently_wrong"] == 0
    assert summary["took_over"] == 3, trials
    assert summary["config"]["layout"] == "buckets"
    # the hung member's frames after it woke, counted on its switch port: none got through
    hang = pd.read_csv(tmp_path / "trials.csv").query("mode == 'hang'")
    assert hang["zombie_frames"].tolist() == [0], trials
    # each heir's watch heard its death before, or as, it began to fence (detect_s)
    faults = pd.read_csv(tmp_path / "trials.csv").query("mode != 'none'")
    assert faults["woke_s"].notna().all(), trials
    assert (faults["woke_s"] <= faults["detect_s"]).all(), trials


def test_a_second_kill_right_after_the_first_loses_nothing(tmp_path: Path) -> None:
    """Double kills, the second within 30 ms of the first takeover: the last member's own
    mirror (the first victim) died just before, and its heartbeat hears of it only once the
    watch has made the table two members. It must judge that mirror dead (its listener
    refuses) and serve what it restored alone; before, it waited a second for a verdict that
    never came and dropped the connection (three of 106 doubles in a full run at 440783e)."""
    cfg = CampaignConfig(trials=4, seed=1, connections=32, modes=("double",), client_timeout=30,
                         window=(0.3, 0.7), tag_prefix="td", layout="buckets",
                         second_within=0.03)  # fmt: skip
    summary = run_campaign(cfg, tmp_path, progress=False)
    trials = pd.read_csv(tmp_path / "trials.csv").query("mode == 'double'")
    assert summary["completed_exact"] == summary["connections"], trials.to_string()
    assert (trials["claimed_s"] < 0.5).all(), trials.to_string()  # no second-long adopt wait


def test_a_member_joins_at_a_random_instant_and_every_connection_arrives(tmp_path: Path) -> None:
    """``--modes join``: D joins the ring at an instant drawn over the load, while C's
    connections run (C hands them to D) and connections start; every one byte-exact, and
    nobody judged a death."""
    cfg = CampaignConfig(trials=3, seed=6, connections=32, modes=("join",), client_timeout=40,
                         sizes=SIZES, window=(0.05, 0.8), tag_prefix="tj",
                         layout="buckets", pcap=tmp_path / "pcap")  # fmt: skip
    summary = run_campaign(cfg, tmp_path, progress=False)
    trials = (tmp_path / "trials.csv").read_text()
    assert summary["connections"] == 3 * 32
    assert summary["completed_exact"] == summary["connections"], trials
    assert summary["silently_wrong"] == 0 and summary["control_trial_ok"]
    assert summary["took_over"] == 0, trials  # no member took another over: no death judged
    assert not (tmp_path / "failed").exists(), trials  # no trial kept as evidence of a loss
    # --pcap: each trial's client-side capture, and the join's instant on its clock
    for t in (1, 2, 3):
        assert (tmp_path / "pcap" / f"t{t}.pcap").stat().st_size > 10_000
        instant = json.loads((tmp_path / "pcap" / f"t{t}.json").read_text())
        assert instant["mode"] == "join" and instant["kill_epoch"] > 1.7e9
    # the clients' own segments read back from a capture (spells.py, with tshark)
    segments = client_segments(tmp_path / "pcap" / "t1.pcap", instant["kill_epoch"])
    assert len(segments) > 100 and segments["port"].nunique() >= 16
    assert (segments["window"] >= 0).all()


def test_a_newcomer_killed_during_its_join_and_a_member_that_rejoins_lose_nothing(
        tmp_path: Path) -> None:  # fmt: skip
    """``--modes join-kill,join-kill,rejoin``: D starts to join at an instant drawn over the
    load and is killed 0.02 s and 0.11 s after it says ``JOINING`` (the seed's draws over
    ``JOIN_SPAN_S``), during its join or just after; then a member is killed and its node joins
    again within a second of its heir's takeover. Every connection byte-exact; a newcomer the
    master admitted is taken over by its successor; after each trial every bucket answers."""
    cfg = CampaignConfig(trials=3, seed=74, connections=32,
                         modes=("join-kill", "join-kill", "rejoin"), client_timeout=40,
                         sizes=SIZES, window=(0.05, 0.6), tag_prefix="tk",
                         layout="buckets")  # fmt: skip
    summary = run_campaign(cfg, tmp_path, progress=False)
    trials = pd.read_csv(tmp_path / "trials.csv")
    text = trials.to_string()
    assert summary["connections"] == 3 * 32
    assert summary["completed_exact"] == summary["connections"], text
    assert summary["silently_wrong"] == 0 and summary["control_trial_ok"]
    killed = trials[trials["mode"] == "join-kill"]
    drawn = [random.Random(f"74-{t}").random() * JOIN_SPAN_S for t in (1, 2)]  # 0.023, 0.112
    late = [k - d for k, d in zip(killed["killed_after_s"], drawn, strict=True)]
    # at the drawn instant, never before; a little after when the harness's timer waits for a
    # core the other test worker holds (0.05 s was once exceeded in CI)
    assert all(0 <= x < 0.25 for x in late), text
    admitted = killed[killed["admitted"].astype(bool)]
    assert admitted["took_over"].astype(bool).all(), text  # judged dead, its buckets taken
    joins = summary["joins"]
    assert joins["join-kill"]["unserved_buckets"] == 0 and joins["rejoin"]["unserved_buckets"] == 0
    assert joins["rejoin"]["rejoined"] == 1 and joins["rejoin"]["rejoin_errors"] == 0, text
    assert not (tmp_path / "failed").exists(), text


def test_the_masters_death_during_a_join_loses_nothing(tmp_path: Path) -> None:
    """``--modes master-kill``: D starts to join at an instant drawn over the load, and the
    master A is killed within ``DEATH_SPAN_S`` of D's ``JOINING``, wherever its admission of D
    is then. Every connection byte-exact; B, A's successor, takes A over; once every donor's
    take-back is due (``JOIN_WITHIN_S`` after the kill) every bucket answers: none is
    orphaned for good, whatever the survivors believe about D; and B, C and D once it said
    ``ready``, which all lived, end on the LAN (nobody took them over)."""
    cfg = CampaignConfig(trials=3, seed=1324, connections=32, modes=("master-kill",),
                         client_timeout=40, sizes=SIZES, window=(0.05, 0.6), tag_prefix="tm",
                         layout="buckets")  # fmt: skip
    summary = run_campaign(cfg, tmp_path, progress=False)
    trials = pd.read_csv(tmp_path / "trials.csv")
    killed = trials[trials["mode"] == "master-kill"]
    text = killed.to_string()
    for column in ("killed_after_s", "master_phase", "newcomer_alive", "newcomer_ready",
                   "unserved_after_load", "unserved", "on_lan_at_end", "healthy_off_lan",
                   "exits", "crashed"):
        assert column in killed, (column, text)
    assert killed["master_phase"].notna().all() and killed["unserved"].notna().all(), text
    drawn = [random.Random(f"1324-{t}").random() * DEATH_SPAN_S for t in (1, 2, 3)]
    late = [k - d for k, d in zip(killed["killed_after_s"], drawn, strict=True)]
    # at the drawn instant, never before; a little after when the harness's timer waits for a
    # core the other test worker holds (0.05 s was once exceeded in CI)
    assert all(0 <= x < 0.25 for x in late), text
    assert summary["connections"] == 3 * 32
    assert summary["completed_exact"] == summary["connections"], text
    assert summary["silently_wrong"] == 0 and summary["control_trial_ok"]
    assert killed["unserved"].tolist() == [0, 0, 0], text  # no bucket orphaned for good
    assert killed["took_over"].astype(bool).all(), text  # B took A's buckets over
    # no member that lived was taken over: B, C and a D that said ready end alive, their
    # switch ports up
    assert killed["healthy_off_lan"].isna().all(), text
    # none died of a signal the campaign never sends (a crash in a C library prints nothing)
    assert killed["crashed"].isna().all() and summary["crashed"] == [], text
    assert killed["exits"].str.contains("a:SIGKILL").all(), text
    joins = summary["joins"]["master-kill"]
    assert joins["trials"] == 3 and joins["unserved_buckets"] == 0, joins
    assert sum(joins["master_phase"].values()) == 3, joins


def test_a_donors_death_during_a_join_loses_nothing(tmp_path: Path) -> None:
    """``--modes donor-kill``: D starts to join at an instant drawn over the load, and a donor
    other than the master (B or C, drawn: here B, C, C) is killed within ``DEATH_SPAN_S`` of
    D's ``JOINING``. Every connection byte-exact; the victim's successor takes it over; the
    join ends all the same (D serving, given up and tried again if the donor died before it
    answered); every bucket answers once the take-back is due; the members that lived end on
    the LAN."""
    cfg = CampaignConfig(trials=3, seed=1324, connections=32, modes=("donor-kill",),
                         client_timeout=40, sizes=SIZES, window=(0.05, 0.6), tag_prefix="tg",
                         layout="buckets")  # fmt: skip
    summary = run_campaign(cfg, tmp_path, progress=False)
    trials = pd.read_csv(tmp_path / "trials.csv")
    killed = trials[trials["mode"] == "donor-kill"]
    text = killed.to_string()
    assert [donor_of(1324, t) for t in (1, 2, 3)] == ["b", "c", "c"]
    assert killed["donor_phase"].notna().all() and "master_phase" not in killed, text
    assert summary["completed_exact"] == summary["connections"] == 3 * 32, text
    assert summary["silently_wrong"] == 0 and summary["control_trial_ok"]
    assert killed["took_over"].astype(bool).all(), text  # the donor's successor took it over
    assert killed["newcomer_ready"].astype(bool).all(), text  # the join ended all the same
    assert killed["unserved"].tolist() == [0, 0, 0], text
    assert killed["healthy_off_lan"].isna().all() and killed["crashed"].isna().all(), text
    exits = killed["exits"].tolist()
    assert "b:SIGKILL" in exits[0] and "c:SIGKILL" in exits[1] and "a:running" in exits[1], text
    joins = summary["joins"]["donor-kill"]
    assert joins["trials"] == 3 and joins["unserved_buckets"] == 0, joins
    assert sum(joins["donor_phase"].values()) == 3 and joins["donor_taken_over"] == 3, joins
    assert killed["given_up"].notna().all(), text  # the master's GAVE UP lines, counted


def test_control_without_the_fence_a_woken_member_reaches_the_clients(tmp_path: Path) -> None:
    """``--no-fence``: the hung member's switch port stays up, and once woken it writes on
    (its port's capture sees its frames); with the fence none passes (the test above)."""
    cfg = CampaignConfig(trials=2, seed=4, connections=16, modes=("hang",), wake_after=1.0,
                         client_timeout=10, sizes=SIZES[:4], stall_ms=50, window=(0.1, 0.3),
                         control="no-fence", tag_prefix="tz", layout="buckets")  # fmt: skip
    summary = run_campaign(cfg, tmp_path, progress=False)
    assert summary["control_trial_ok"]
    assert summary["zombie_frames"] > 0, (tmp_path / "trials.csv").read_text()


def test_control_without_the_ring_the_bucket_campaign_loses_connections(tmp_path: Path) -> None:
    cfg = CampaignConfig(trials=2, seed=5, connections=16, modes=("kill",), client_timeout=10,
                         sizes=SIZES, window=(0.1, 0.3), control="no-ring", tag_prefix="tr",
                         layout="buckets")  # fmt: skip
    summary = run_campaign(cfg, tmp_path, progress=False)
    assert summary["control_trial_ok"]  # the load alone passes: the fault did the damage
    assert summary["completed_exact"] < summary["connections"]
    assert summary["silently_wrong"] == 0


def test_the_chain_layouts_controls_are_refused_on_the_buckets() -> None:
    with pytest.raises(ValueError, match="control must be one of"):
        CampaignConfig(layout="buckets", control="no-sniff-data")
    with pytest.raises(ValueError, match="control must be one of"):
        CampaignConfig(control="no-ring")
