"""The repeat mode: an inference test that runs its first input set once more, after the
others, on the same compiled program. A compiled module must not carry state from one call
to the next: a recompile for a later set whose guards also admit set 0 (its cache entry
served first), a specialization on a value of the last call, a buffer the next call writes
over; set 0 run first, as every test runs it, sees none of these. The repeat must give set
0's outputs again (the reference's, by construction of the input sets).

A plain inference test to a backend: its sets are data (a backend needs nothing new, and the
reproducer runs every set in order, the repeat included). Drawn by seed among the inference
tests (`GenConfig.p_repeat`, its own RNG stream); no dynamic shapes (their shape sets are
drawn with the inputs).
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from campaign.modes.infer import InferMode

if TYPE_CHECKING:
    from campaign.testcase import TestCase
    from ir.gen.builder import GenConfig


@dataclass(frozen=True)
class RepeatSpec:
    """Which input set the test's last set repeats (`of_set`: 0, the first call's)."""

    of_set: int = 0


class RepeatMode(InferMode):
    """Owns `TestCase.repeat` (`RepeatSpec`): the last input set is a copy of set `of_set`,
    and the reference's outputs of the last set are that set's."""

    name = "repeat"
    spec_field = "repeat"
    combines_with_dynshape = False
    #: the repeat is the point: the reducer keeps every set
    per_set = False
    mergeable = False

    @staticmethod
    def wanted(seed: int, gen: GenConfig) -> bool:
        """Whether the (inference) test of `seed` repeats a set, at `gen.p_repeat`."""
        return gen.p_repeat > 0 and random.Random(f"repeat/{seed}").random() < gen.p_repeat

    def make(self, tc: TestCase, seed: int, gen: GenConfig) -> TestCase:
        if tc.shapes.dynamic and not self.combines_with_dynshape:
            return tc
        spec = RepeatSpec()
        first = tc.value_sets()[spec.of_set]
        tc.extra_inputs.append({v.name: np.array(first[v.name], copy=True)
                                for v in tc.graph.inputs})
        if tc.ref_outputs is not None:  # the search's outputs: set `of_set`'s again
            n = len(tc.graph.outputs)
            tc.ref_outputs = [*tc.ref_outputs, *tc.ref_outputs[spec.of_set * n:(spec.of_set + 1) * n]]
        tc.repeat = spec
        return tc

    def row_mode(self, trains: bool) -> str:
        return self.name


REPEAT = RepeatMode()
