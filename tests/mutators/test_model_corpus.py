"""The committed corpus of real architectures' windows (seeds/models, mutators/model_corpus.py):
every window loads as a seed (parses, verifies, its .npz fits its params), names its model and
place, has valid inputs without repair, and the cpu_models preset mutates it."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from ir.importers.windows import read_lineage
from ir.numerics.input_search import make_valid
from mutators.model_corpus import ARCHITECTURES, INLINE
from mutators.model_seeds import load_entry
from mutators.source import ROOT

CORPUS = ROOT / "seeds" / "models"
SEEDS = load_entry(str(CORPUS)) if CORPUS.is_dir() else []


def test_the_corpus_is_windows_of_known_architectures():
    models = Counter(s.model for s in SEEDS)
    assert SEEDS and set(models) <= set(ARCHITECTURES)
    assert len(ARCHITECTURES) >= 30 and set(INLINE) <= set(ARCHITECTURES)
    for f in sorted(CORPUS.glob("*.gir")):
        lin = read_lineage(f.read_text())
        assert lin is not None and f.name.startswith(f"{lin[0]}.w"), f.name
    # small enough to commit
    assert sum(f.stat().st_size for f in CORPUS.iterdir()) < 2 << 20


#: the default suite checks each architecture's first window (the input search on a window of
#: up to 65536-element values takes seconds on 2 cores); `--runslow` checks every window
FIRST = {s.model: s for s in reversed(SEEDS)}


def _window(seed):
    marks = () if FIRST.get(seed.model) is seed else (pytest.mark.slow,)
    return pytest.param(seed, id=seed.seed_id, marks=marks)


@pytest.mark.parametrize("seed", [_window(s) for s in SEEDS])
def test_each_window_is_valid_material(seed):
    assert 5 <= seed.graph.num_insts() <= 30 and seed.graph.inputs
    valid = make_valid(seed.graph, 0, params=seed.weights or None)
    assert valid is not None and valid.dropped == [] and valid.search.ok
    for k, a in seed.weights.items():
        assert a.shape == next(p.type.shape for p in seed.graph.params if p.name == k)
        assert np.isfinite(a).all()


def test_the_factories_build_and_run():
    import torch

    for name, factory in INLINE.items():
        module, inputs = factory()
        with torch.no_grad():
            out = module.eval()(*inputs)
        assert out is not None, name
