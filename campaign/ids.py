"""Run ids, test ids and per-test seeds.

Invariant: `test_seed(base, i)` depends only on (base, i), so test i of a campaign is reproducible
from the config alone, whichever worker ran it and in whatever order.
"""
from __future__ import annotations

import hashlib
import os
import time


def new_run_id() -> str:
    """A sortable, practically unique id for one campaign run: UTC time plus 4 random hex."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + os.urandom(2).hex()


def test_id(run_id: str, index: int) -> str:
    return f"{run_id}-{index:06d}"


def test_seed(base_seed: int, index: int) -> int:
    """The seed of test `index`: a hash of (base_seed, index), in [0, 2**32) so any RNG accepts
    it (numpy's legacy seeding takes < 2**32) and it fits the int64 `seed` column."""
    digest = hashlib.blake2b(f"{base_seed}:{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % (2**32)
