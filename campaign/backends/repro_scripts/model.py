"""What a torch body sees of the graph's module: the script defines `Model` itself, printed by
`ir.materialize.torch_source` from the graph (this stub is never copied into a script). A cache
test's script holds its two programs as source text instead (`TEST_PROGRAM`, `TWIN_PROGRAM`:
each defines `Model`), run when their turn comes (campaign/backends/inductor/repro_cache.py)."""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch


class Model(torch.nn.Module):
    """`Model(params)(*inputs)`: the graph's outputs as a tuple of tensors; a param `w` is the
    module's `p_w` (a buffer, an `nn.Parameter` or a number, by the form)."""

    def __init__(self, params: Mapping[str, np.ndarray]) -> None:
        super().__init__()
        raise NotImplementedError("the repro script defines Model")


#: a cache test's program and its near-twin's, each the source of a module defining `Model`
TEST_PROGRAM = ""
TWIN_PROGRAM = ""
