"""Capability routing and known bugs (campaign.driver.routing.Router), without Ray: which
backend gets a made test, and which tests are made for a backend that would idle."""
from __future__ import annotations

from campaign.driver.actor_pool import Pool, PoolLimits
from campaign.driver.routing import Router
from campaign.driver.work import Item, PipelineTest

LIMITS = PoolLimits(in_flight_per_worker=2, max_batch=16, queue_s=5.0, test_timeout_s=300.0,
                    sandbox_timeout_s=60.0)


def made(index: int, ops: list[str], backends=("ort", "tvm")) -> PipelineTest:
    test = PipelineTest(index, f"t{index}", index, list(backends))
    test.base = {"ops": ops}
    return test


def pools(actors: dict[str, int]) -> dict[str, Pool]:
    return {b: Pool(b, n, {}, lambda name: None, "evaluate", LIMITS, by_ref={},
                    upstream_backlog=lambda: 0) for b, n in actors.items()}


def test_a_test_holding_an_op_a_backend_lacks_is_not_sent_to_it_and_counted_by_that_op():
    router = Router(["ort", "tvm"], {"tvm": frozenset({"loop", "scan"})}, known_rate=1.0)
    test = made(0, ["add", "scan", "loop"])
    assert router.route(test, "ort", {})
    assert not router.route(test, "tvm", {})
    assert router.not_applicable == {"ort": {}, "tvm": {"loop": 1}}  # the first, sorted


def test_a_test_matching_a_known_bug_is_held_back_from_that_backend_only():
    router = Router(["ort", "tvm"], {}, known_rate=0.0)
    test = made(0, ["add"])
    assert not router.route(test, "ort", {"ort": "bucket-1"})
    assert router.route(test, "tvm", {"ort": "bucket-1"})
    assert router.held_known == {"ort": {"bucket-1": 1}, "tvm": {}}
    always = Router(["ort"], {}, known_rate=1.0)
    assert always.route(test, "ort", {"ort": "bucket-1"})


def test_a_trigger_matching_over_a_tenth_of_a_backends_tests_stops_holding_any_back():
    """A lone `scan` skeleton (F28's: the bug needs reverse=True and a carry returned twice,
    which the skeleton leaves out) matches most control-flow tests: after 20 tests offered to
    the backend it holds none back; a specific trigger matching 1 in 20 still does."""
    from campaign.driver.routing import GENERAL_AFTER

    router = Router(["inductor"], {}, known_rate=0.0)
    held = [router.route(made(i, ["scan"]), "inductor",
                         {"inductor": "scan-bug"} if i % 2 == 0 else {})
            for i in range(GENERAL_AFTER + 10)]
    assert held[:GENERAL_AFTER] == [i % 2 == 1 for i in range(GENERAL_AFTER)]  # held back
    assert all(held[GENERAL_AFTER:])  # then let through: half the tests match it
    assert router.too_general == {"inductor": {"scan-bug": 5}}
    assert router.held_known == {"inductor": {"scan-bug": 10}}
    specific = Router(["inductor"], {}, known_rate=0.0)
    went = [specific.route(made(i, ["topk"]), "inductor",
                           {"inductor": "topk-bug"} if i % 20 == 0 else {}) for i in range(60)]
    assert went.count(False) == 3 and specific.too_general == {"inductor": {}}


def test_the_most_specific_matching_trigger_is_named():
    from campaign.known import Trigger, matching
    from ir import parse

    g = parse("""graph main(%c: f32[3], %xs: f32[2,3]) {
  %r, %ys = scan[num_carries=1, reverse=false](%c, %xs) : f32[3], f32[2,3] {
    graph body(%b: f32[3], %x: f32[3]) {
      %n = neg(%b) : f32[3]
      return %n, %x
    }
  }
  %t = tanh(%r) : f32[3]
  return %t
}""")
    general = Trigger("general", "inductor", frozenset({"scan"}), frozenset())
    specific = Trigger("specific", "inductor", frozenset({"scan", "tanh(f32)->f32"}),
                       frozenset({("scan", "tanh")}))
    assert matching([general, specific], g, ["inductor"]) == {"inductor": "specific"}


def test_tests_are_made_for_a_backend_that_lacks_ops_while_it_has_fewer_waiting_than_actors():
    evals = pools({"ort": 1, "tvm": 2})
    router = Router(["ort", "tvm"], {"tvm": frozenset({"loop"})}, known_rate=1.0)
    first, second, third = made(0, []), made(1, []), made(2, [])
    router.make_for_starving(first, evals)
    assert (first.made_for, first.avoid) == ("tvm", frozenset({"loop"}))
    evals["tvm"].queue.append(Item(made(9, [])))  # one queued and one being made: 2 actors
    router.make_for_starving(second, evals)
    assert second.made_for is None and second.avoid == frozenset()
    router.generated(first)  # made: it is queued now, not in generation
    evals["tvm"].queue.clear()
    router.make_for_starving(third, evals)
    assert third.made_for == "tvm" and router.made_for == {"tvm": 2}
    assert router.making_for["tvm"] == 1


def test_an_invalid_tests_rows_leave_out_backends_that_lack_its_ops_unless_none_is_left():
    class Report:
        def __init__(self, backends):
            self.rows = [{"backend": b, "ops": ["loop"]} for b in backends]

    router = Router(["ort", "tvm"], {"tvm": frozenset({"loop"})}, known_rate=1.0)
    assert [r["backend"] for r in router.applicable(Report(["ort", "tvm"])).rows] == ["ort"]
    assert [r["backend"] for r in router.applicable(Report(["tvm"])).rows] == ["tvm"]


def test_a_gradient_test_holding_an_op_the_backward_lacks_is_not_sent_and_inference_still_is():
    """TVM imports an `if` and a `strided_slice`, but its Gradient pass takes neither: its
    gradient tests holding one are not applicable (by op), its inference tests go, and a
    transform test (TVM computes none) is not applicable as a whole."""
    from campaign.backends import make_backend
    from campaign.driver.routing import Lacks

    tvm = Lacks.of(make_backend("tvm"))
    assert {"if", "slice"} <= tvm.ops("grad") and not {"if", "slice"} & tvm.ops("infer")
    assert tvm.refused == {"transform"} and "loop" in tvm.ops("infer")
    router = Router(["ort", "tvm"], {"tvm": tvm, "ort": Lacks.of(make_backend("ort"))},
                    known_rate=1.0)
    infer, grad, transform = made(0, ["if", "add"]), made(1, ["if", "add"]), made(2, ["add"])
    grad.base["mode"], transform.base["mode"] = "grad", "transform"
    assert router.route(infer, "tvm", {}) and not router.route(grad, "tvm", {})
    assert not router.route(transform, "tvm", {})
    assert all(router.route(t, "ort", {}) for t in (infer, grad, transform))
    assert router.not_applicable == {"ort": {}, "tvm": {"if": 1, "transform test": 1}}
    assert router.lacks == {"tvm": tvm.ops("infer")}  # a test made for tvm avoids these only
