"""The cluster update's wire form round-trips byte-exact, full and compact."""

from __future__ import annotations

import pytest

from sslacc_sim import Checkpoint
from tls12.state import Progress

FULL = Checkpoint(3, 1, "client_key_exchange", 310, 1200, 0, 0, b'{"state": 1}' * 40,
                  buffered=17)
COMPACT = Checkpoint(3, 9, "response", 400, 5000, 80, 16384, b"",
                     progress=Progress(3, 7).to_bytes(), rewind=2, raw_records=1,
                     sizes=(16384, 100), plain_start=16384, raw=b"\x15\x03\x03\x00\x02ab",
                     keys=b'{"keys": 1}', partial=b"\x17\x03\x03")


@pytest.mark.parametrize("cp", [FULL, COMPACT, Checkpoint(0, -1, "fingered", 0, 0, 0, 0, b"")])
def test_checkpoint_round_trips(cp: Checkpoint) -> None:
    wire = cp.encode()
    back = Checkpoint.decode(wire)
    assert back == cp
    assert back.encode() == wire


def test_compact_update_is_flagged_and_small() -> None:
    assert COMPACT.compact and not FULL.compact
    no_blobs = Checkpoint(**{**COMPACT.__dict__, "keys": b"", "raw": b"", "partial": b""})
    assert len(no_blobs.encode()) < 400          # a JSON header line and an 18-byte delta
