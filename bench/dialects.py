"""False positives of the torch program forms (issue 18, point 2): every form of a generated
test, run in torch eager, against the reference interpreter, judged as the campaign judges a
backend (`FuzzWorker.judge`: the test's own tolerances, no float64 shadow rescue).

Tests are generated as a campaign makes them (`FuzzWorker.make_prepared`, the preset's generator
and mutation config, seeds from `--first`): `--tests` with the `cpu_dynamic` preset and
`--inplace-tests` with `cpu_inplace` (in-place writes, for the `inplace` form). Each test runs
as `eager?dialect=<d>&<form>` (campaign/backends/eager/: the torch module the torch backends
compile, run eagerly) for both control-flow dialects, the default form (the control) and each
new form alone. A form is counted on a test only where it changes the program (`applies` of
campaign/backends/forms.py: a loop or a 0-d param for `scalars`, params for `params`, writes for
`inplace`), and also where it does not, to show it costs nothing there.

Prints, per preset and form, the verdicts; then every non-pass with its test and message.
Asserts nothing.

    python bench/dialects.py [--tests 300] [--inplace-tests 100] [--first 0]
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

#: each new form alone (option, value), after the default form
FORMS = (("", ""), ("scalars", "number"), ("params", "parameter"), ("inplace", "functional"))


def worker_for(preset: str):  # noqa: ANN201 (a FuzzWorker)
    from hydra import compose, initialize_config_dir

    from campaign.config import to_config
    from campaign.worker import FuzzWorker, WorkerConfig

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = to_config(compose("config", overrides=[f"campaign={preset}"]))
    return FuzzWorker(WorkerConfig(generator=cfg.generator, backends=["eager"],
                                   mutation=cfg.mutation, sandbox=False))


def features(g) -> set[str]:  # noqa: ANN001 (a Graph)
    """What of the graph the new forms change: a loop counter some body reads, a 0-d param,
    any param, an in-place write."""
    from ir.analysis.inplace import has_writes
    from ir.ops.control import reads

    out = set()
    if any(inst.op.name == "loop" and inst.blocks[0].inputs[0].name in reads(inst.blocks[0])
           for inst, _ in g.walk()):
        out.add("counter read")
    if any(p.type.rank == 0 for p in g.params):
        out.add("0-d param")
    if g.params:
        out.add("params")
    if has_writes(g):
        out.add("writes")
    return out


def run(preset: str, n: int, first: int, table: Counter, problems: list,
        graphs: Counter) -> None:
    from campaign.backends import make_backend
    from campaign.backends.forms import FORM_SPACE
    from campaign.worker import Prepared

    applies = {o.name: o.applies for o in FORM_SPACE}
    w = worker_for(preset)
    t0 = time.perf_counter()
    invalid = 0
    for seed in range(first, first + n):
        prep = w.make_prepared(f"{preset}-{seed}", seed)
        if not isinstance(prep, Prepared):
            invalid += 1
            continue
        g = prep.m.tc.graph
        graphs[(preset, "valid tests")] += 1
        for f in features(g):
            graphs[(preset, f)] += 1
        for dialect in ("hop", "python"):
            for opt, value in FORMS:
                spec = f"eager?dialect={dialect}" + (f"&{opt}={value}" if opt else "")
                b = make_backend(spec)
                row, _ = w.judge(b, prep, b.evaluate(prep.m))
                changed = "" if not opt else ("changes" if applies[opt](g) else "same")
                table[(preset, dialect, opt or "default", changed, row.verdict)] += 1
                if row.verdict != "pass":
                    problems.append((preset, seed, spec, row.verdict,
                                     (row.error_msg or "")[:300]))
    print(f"{preset}: {n} seeds, {invalid} invalid tests (no reference), "
          f"{time.perf_counter() - t0:.0f} s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tests", type=int, default=300)
    ap.add_argument("--inplace-tests", type=int, default=100)
    ap.add_argument("--first", type=int, default=0)
    a = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    table: Counter = Counter()
    problems: list = []
    graphs: Counter = Counter()
    run("cpu_dynamic", a.tests, a.first, table, problems, graphs)
    if a.inplace_tests:
        run("cpu_inplace", a.inplace_tests, a.first, table, problems, graphs)
    print("\ngraphs: " + ", ".join(f"{p} {f}: {k}" for (p, f), k in sorted(graphs.items())))
    print("\npreset       dialect form      graph    verdict        tests")
    for (preset, dialect, form, changed, verdict), k in sorted(table.items()):
        print(f"{preset:12} {dialect:7} {form:9} {changed or '-':8} {verdict:14} {k}")
    print(f"\n{len(problems)} non-pass results")
    for p in problems:
        print("  ", *p)


if __name__ == "__main__":
    main()
