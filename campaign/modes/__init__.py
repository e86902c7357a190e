"""Test modes (`campaign.modes.base.TestMode`): infer, grad, transform, repeat and cache, each
one module.

`mode_of` tells which mode a test case is; `drawn_mode` which mode the test of a seed is made
in; `MODES` holds them by their row name. docs/architecture.md, "Adding a mode", is the recipe.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from campaign.modes.base import TestMode
from campaign.modes.cache import CACHE
from campaign.modes.grad import GRAD
from campaign.modes.infer import INFER
from campaign.modes.repeat import REPEAT
from campaign.modes.transform import TRANSFORM

if TYPE_CHECKING:
    from campaign.testcase import TestCase
    from ir.gen.builder import GenConfig

#: every mode by its name (the rows' `mode`), in the order the summary lists them
MODES: dict[str, TestMode] = {m.name: m for m in (INFER, GRAD, TRANSFORM, REPEAT, CACHE)}

__all__ = ["CACHE", "GRAD", "INFER", "MODES", "REPEAT", "TRANSFORM", "TestMode", "drawn_mode",
           "mode_of"]


def mode_of(tc: TestCase) -> TestMode:
    """The mode of a made test: the last registered mode whose spec it holds (`spec_field`:
    a transform test holds a gradient test's leaves too), else inference."""
    for mode in reversed(MODES.values()):
        if mode.spec_field is not None and getattr(tc, mode.spec_field) is not None:
            return mode
    return INFER


def drawn_mode(seed: int, gen: GenConfig) -> TestMode:
    """The mode the test of `seed` is made in, by the generator's rates (`p_grad`, then
    `p_transform` among the gradient tests, `p_cache` then `p_repeat` among the others), each
    its own RNG stream of the seed."""
    from ir.numerics.grad import wants_grad, wants_transform

    if not wants_grad(seed, gen.p_grad):
        if CACHE.wanted(seed, gen):
            return CACHE
        return REPEAT if REPEAT.wanted(seed, gen) else INFER
    train = GRAD.generator(gen)
    if wants_transform(seed, train.p_transform, train.transforms) is not None:
        return TRANSFORM
    return GRAD
