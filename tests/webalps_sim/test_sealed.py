"""Sealed storage: round trip, tampering, replay of an old blob, crash between the two writes."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from webalps_sim.sealed import RollbackError, SealedStateError, SealedStore, TamperedError


def test_round_trip_survives_a_new_store_object(tmp_path: Path) -> None:
    store = SealedStore(tmp_path, "tally")
    assert store.load() is None
    assert store.save(b"v1") == 1
    assert store.save(b"v2") == 2
    again = SealedStore(tmp_path, "tally")
    assert again.load() == b"v2"
    assert again.counter == 2
    assert stat.S_IMODE(os.stat(tmp_path / "seal.key").st_mode) == 0o600


def test_blob_on_disk_hides_the_plaintext(tmp_path: Path) -> None:
    store = SealedStore(tmp_path, "tally")
    store.save(b"alice voted for carol")
    assert b"alice" not in store.blob_path.read_bytes()
    assert b"carol" not in store.blob_path.read_bytes()


@pytest.mark.parametrize("where", [0, 10, 25, -1])
def test_a_flipped_bit_anywhere_is_detected(tmp_path: Path, where: int) -> None:
    store = SealedStore(tmp_path, "tally")
    store.save(b"state")
    blob = bytearray(store.blob_path.read_bytes())
    blob[where] ^= 0x01
    store.blob_path.write_bytes(bytes(blob))
    with pytest.raises(TamperedError):
        SealedStore(tmp_path, "tally").load()


def test_truncated_blob_is_detected(tmp_path: Path) -> None:
    store = SealedStore(tmp_path, "tally")
    store.save(b"state")
    store.blob_path.write_bytes(store.blob_path.read_bytes()[:20])
    with pytest.raises(TamperedError, match="truncated"):
        SealedStore(tmp_path, "tally").load()


def test_a_blob_of_another_store_does_not_open(tmp_path: Path) -> None:
    SealedStore(tmp_path, "other").save(b"x")
    mine = SealedStore(tmp_path, "tally")
    with pytest.raises(TamperedError):
        mine.unseal((tmp_path / "other.sealed").read_bytes())


def test_a_blob_sealed_under_another_key_does_not_open(tmp_path: Path) -> None:
    SealedStore(tmp_path / "a", "tally").save(b"x")
    with pytest.raises(TamperedError):
        SealedStore(tmp_path / "b", "tally").unseal((tmp_path / "a" / "tally.sealed").read_bytes())


def test_host_replaying_an_old_blob_is_detected(tmp_path: Path) -> None:
    store = SealedStore(tmp_path, "tally")
    store.save(b"one vote")
    old = store.blob_path.read_bytes()
    store.save(b"two votes")
    store.blob_path.write_bytes(old)  # the host puts the older copy back
    with pytest.raises(RollbackError, match="replayed"):
        SealedStore(tmp_path, "tally").load()


def test_host_deleting_the_blob_is_detected(tmp_path: Path) -> None:
    store = SealedStore(tmp_path, "tally")
    store.save(b"state")
    store.blob_path.unlink()
    with pytest.raises(RollbackError, match="missing"):
        SealedStore(tmp_path, "tally").load()


def test_crash_between_blob_and_counter_keeps_the_newer_blob(tmp_path: Path) -> None:
    store = SealedStore(tmp_path, "tally")
    store.save(b"v1")
    # The guardian died after renaming the version-2 blob into place, before the counter write.
    store.blob_path.write_bytes(store.seal(b"v2", 2))
    restarted = SealedStore(tmp_path, "tally")
    assert restarted.counter == 1
    assert restarted.load() == b"v2"
    assert restarted.counter == 2
    assert (tmp_path / "tally.counter").read_text().strip() == "2"


def test_a_blob_more_than_one_ahead_means_the_counter_was_rolled_back(tmp_path: Path) -> None:
    store = SealedStore(tmp_path, "tally")
    store.blob_path.write_bytes(store.seal(b"v5", 5))
    with pytest.raises(RollbackError, match="counter was rolled back"):
        store.load()


def test_separate_blob_dir_and_bad_inputs(tmp_path: Path) -> None:
    store = SealedStore(tmp_path / "card", "tally", blob_dir=tmp_path)
    store.save(b"x")
    assert (tmp_path / "tally.sealed").exists()
    assert not (tmp_path / "card" / "tally.sealed").exists()
    with pytest.raises(ValueError):
        SealedStore(tmp_path, "../escape")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "seal.key").write_bytes(b"short")
    with pytest.raises(SealedStateError, match="32-byte key"):
        SealedStore(tmp_path / "bad", "tally")
