"""MutationSource (what the generation stage calls) and its wiring into the worker and the
pipeline: tests come from the pool or the generator, lineage and the mutation columns are in
every row, backend verdicts reach the pool; mutation off is the plain generator (its rows'
mutation columns: tests/campaign/test_row.py)."""
from __future__ import annotations

import json

from campaign.pipeline import Evaluator, Generator
from campaign.verdict import verdict_signature
from campaign.worker import FuzzWorker, WorkerConfig
from ir import GenConfig, generate, verify
from mutators import MutationConfig
from mutators.source import MutationSource


def test_mutants_carry_their_lineage_from_the_root_seed():
    src = MutationSource(MutationConfig(rate=1.0, max_steps=2), GenConfig())
    made = [src.make(f"t{i}", i) for i in range(30)]
    mutated = [(g, lin) for g, lin in made if lin[0].get("parent")]
    assert len(mutated) >= 25
    for i, (g, lin) in enumerate(made):
        verify(g)
        head = lin[0]
        assert head["seed"] == i and head["seed_id"]
        if head.get("parent"):
            steps = [s for s in lin[1:] if "mutator" in s]
            assert steps and all(s["test"] for s in steps)
            assert head["seed_id"].startswith(("corpus/", "genseed/", "gen/"))
    # a mutant kept in the pool is the parent of later tests: its steps are inherited
    for i, (g, lin) in enumerate(made):
        src.observe(f"t{i}", g, lin, True)
    later = [src.make(f"u{i}", 100 + i)[1] for i in range(40)]
    inherited = [lin for lin in later if lin[0].get("parent", "").startswith("t")]
    assert inherited
    lin = inherited[0]
    own = [s for s in lin[1:] if s.get("test") == "u" + str(later.index(lin))]
    assert own and len([s for s in lin[1:] if "mutator" in s]) > len(own)


def test_the_pool_is_deterministic_given_the_sequence_of_tests():
    def run():
        src = MutationSource(MutationConfig(), GenConfig())
        out = []
        for i in range(12):
            g, lin = src.make(f"t{i}", i)
            src.observe(f"t{i}", g, lin, i % 3 != 0)
            out.append(json.dumps(lin))
        return out, src.pool.summary()

    assert run() == run()


def test_mutation_off_is_the_plain_generator():
    src = MutationSource(MutationConfig(rate=0.0), GenConfig())
    for i in range(5):
        g, lin = src.make(f"t{i}", i)
        assert g == generate(i) and lin == [{"seed": i, "seed_id": f"gen/{i}"}]


def test_rows_carry_the_mutation_columns_and_feedback_reaches_the_pool():
    cfg = WorkerConfig(backends=["ort"], sandbox=False, mutation=MutationConfig(rate=1.0))
    gen = Generator(cfg, "g")
    made = gen.generate([(f"t-{i:06d}", i, ["ort"]) for i in range(6)])
    ev = Evaluator(cfg, "ort", "e")
    rows = []
    for m in made:
        rows += m.report.rows if m.report is not None else ev.evaluate([m.case])[0].rows
    for r in rows:
        lin = json.loads(r["lineage"])
        assert r["seed_id"] == lin[0]["seed_id"] and r["parent_id"] == lin[0].get("parent")
        assert r["step_mutators"] == [s["mutator"] for s in lin if s.get("test") == r["test_id"]]
        assert isinstance(r["novel"], bool) and r["mutation_discarded"] >= 0
    assert any(r["step_mutators"] for r in rows)
    new = gen.feedback([(r["test_id"], verdict_signature(r)) for r in rows])
    assert new >= 1 and "ort:pass" in gen.worker.mutation.pool.seen_signatures
    assert gen.feedback([(r["test_id"], verdict_signature(r)) for r in rows]) == 0


def test_seeds_the_config_excludes_are_left_out():
    src = MutationSource(MutationConfig(generated_seeds=0), GenConfig(ops_exclude=["lstm", "gru"]))
    src.seed_pool()
    ids = set(src.pool.entries)
    assert "corpus/mlp" in ids and "corpus/lstm_tagger" not in ids and "corpus/gru_tagger" not in ids
    deny = MutationSource(MutationConfig(generated_seeds=0), GenConfig(deny=["softmax(f32)->f32"]))
    deny.seed_pool()
    assert "corpus/cnn_block" not in deny.pool.entries and "corpus/mlp" in deny.pool.entries


def test_one_process_worker_runs_mutants_to_a_verdict():
    with FuzzWorker(WorkerConfig(backends=["ort_noopt"], sandbox=False,
                                 mutation=MutationConfig(rate=1.0))) as w:
        verdicts = [w.run(f"t{i}", i).rows[0]["verdict"] for i in range(12)]
    assert verdicts.count("pass") >= 10, verdicts
