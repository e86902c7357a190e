"""The option reducer (`ir.shrink.options`): options go back to their defaults while the
predicate holds, to a fixed point, within a budget."""
from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ir.shrink.options import reduce_options


def _needs(*names: str):
    calls: list[dict[str, Any]] = []

    def predicate(opts: dict[str, Any]) -> bool:
        calls.append(opts)
        return all(n in opts for n in names)

    return predicate, calls


def test_drops_every_option_the_predicate_does_not_need_and_keeps_the_rest():
    pred, calls = _needs("a", "c")
    res = reduce_options({"a": 1, "b": True, "c": "x", "d": None}, pred)
    assert res.options == {"a": 1, "c": "x"} and res.stopped == "fixed point"
    assert [s.dropped for s in res.steps] == [(("b", True),), (("d", None),)]
    assert res.steps[-1].left == ("a", "c")
    assert res.tests == len(calls)
    # nothing evaluated twice; the all-at-once candidate first
    assert calls[0] == {} and len({repr(sorted(c.items())) for c in calls}) == len(calls)


def test_a_configuration_the_failure_does_not_need_goes_at_once():
    pred, calls = _needs()
    res = reduce_options({"a": 1, "b": 2, "c": 3}, pred)
    assert res.options == {} and res.tests == 1 and calls == [{}]
    assert res.summary()["steps"] == [{"pass": "drop_options",
                                       "desc": "a=1, b=2, c=3 back to default", "left": []}]


def test_options_that_only_fail_together_are_kept_together():
    pred, _ = _needs("a", "b")
    assert reduce_options({"a": 1, "b": 2}, pred).options == {"a": 1, "b": 2}


def test_a_raising_predicate_rejects_and_is_logged():
    lines: list[str] = []

    def predicate(opts: dict[str, Any]) -> bool:
        if "a" not in opts:
            raise RuntimeError("boom")
        return True

    res = reduce_options({"a": 1, "b": 2}, predicate, log=lines.append)
    assert res.options == {"a": 1}
    assert lines[0] == "predicate raised on options []: RuntimeError: boom"
    assert lines[-1] == "keep_part: b=2 back to default -> 1 options left"


def test_the_budget_stops_it():
    pred, calls = _needs("c")
    opts = {k: i for i, k in enumerate("abcdefgh")}
    res = reduce_options(opts, pred, max_tests=2)
    assert res.stopped == "max_tests" and res.tests == 2 == len(calls)
    assert calls == [{}, {"a": 0, "b": 1, "c": 2, "d": 3}]
    assert res.options == {"a": 0, "b": 1, "c": 2, "d": 3}  # the half kept; no more tried
    assert reduce_options({"a": 1, "b": 2}, pred, max_seconds=0).stopped == "max_seconds"


def test_one_needed_option_of_sixteen_costs_a_few_compiles_not_sixteen():
    pred, calls = _needs("k")
    res = reduce_options({f"{c}": i for i, c in enumerate("abcdefghijklmnop")}, pred)
    assert res.options == {"k": 10}
    # {} then halving: keep 8 (miss), keep 8 (hit), keep 4 x2, keep 2 x2, keep 1 x2 at most
    assert len(calls) <= 9 and [s.pass_name for s in res.steps] == ["keep_part"] * 4


@given(st.sets(st.sampled_from("abcdefghij"), min_size=1),
       st.sets(st.sampled_from("abcdefghij")))
@settings(max_examples=200, deadline=None)
def test_a_monotone_failure_reduces_to_exactly_the_options_it_needs(have, need):
    """For a failure that needs a set of options (any superset of it fails), the reducer finds
    that set, evaluates no candidate twice, and accepts only candidates that fail."""
    pred, calls = _needs(*need)
    opts = {k: ord(k) for k in sorted(have)}
    if not pred(opts):
        return
    calls.clear()
    res = reduce_options(opts, pred)
    assert res.options == {k: ord(k) for k in need}
    forms = [repr(sorted(c)) for c in calls]
    assert len(set(forms)) == len(forms) == res.tests
    assert all(pred(dict((k, ord(k)) for k in s.left)) for s in res.steps)
