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


def index_of(test_id: str) -> int:
    """The index of a test id made by `test_id` (its part after the last '-')."""
    return int(test_id.rsplit("-", 1)[1])


def sample_point(seed: int, backend: str) -> float:
    """A number in [0, 1) fixed by (test seed, backend): the test runs on a backend sampled at
    rate r iff this is < r, so a rerun or a resumed campaign samples the same tests."""
    digest = hashlib.blake2b(f"{seed}/{backend}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def sampled(seed: int, backend: str, rate: float) -> bool:
    return rate >= 1.0 or sample_point(seed, backend) < rate


def test_seed(base_seed: int, index: int) -> int:
    """The seed of test `index`: a hash of (base_seed, index), in [0, 2**32) so any RNG accepts
    it (numpy's legacy seeding takes < 2**32) and it fits the int64 `seed` column."""
    digest = hashlib.blake2b(f"{base_seed}:{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % (2**32)
