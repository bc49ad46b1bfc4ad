"""Write ``guardian_frames.json`` from ``GOLDEN_MESSAGES`` (run only when the protocol changes).

Usage, from the repository root::

    python -m tests.webalps_sim.vectors.generate [--check]

Each entry is the message's ``repr``, the request id (0xDEADBEEF) and the frame's bytes in hex,
as :func:`webalps_sim.protocol.message_frame` makes them now.  A protocol change must show in
``git diff`` as changed entries for the changed messages only: an entry that changes although
its message did not means the wire format moved by accident.  ``--check`` writes nothing and
exits 1 if the file differs from what would be written.
"""

from __future__ import annotations

import argparse
import json
import sys

from tests.webalps_sim.test_protocol_golden import GOLDEN_MESSAGES, VECTORS
from webalps_sim import protocol as p

REQUEST_ID = 0xDEADBEEF


def vectors() -> list[dict[str, object]]:
    """One entry per golden message, in order."""
    return [{"message": repr(m), "request_id": REQUEST_ID,
             "frame": p.message_frame(m, REQUEST_ID).hex()}  # type: ignore[arg-type]
            for m in GOLDEN_MESSAGES]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.webalps_sim.vectors.generate",
                                     description="Write the guardian frame vectors.")
    parser.add_argument("--check", action="store_true",
                        help="compare with the file instead of writing it (status 1 if it differs)")
    args = parser.parse_args(argv)
    text = json.dumps(vectors(), indent=1)
    if args.check:
        same = VECTORS.read_text() == text
        print(f"{VECTORS.name}: {'up to date' if same else 'differs'}")
        return 0 if same else 1
    VECTORS.write_text(text)
    print(f"wrote {len(GOLDEN_MESSAGES)} frames to {VECTORS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
