"""Same seed, same test: the behaviour check for refactors (issues #13 and #18).

`run` runs fixed-seed campaigns with a test budget from one source tree and writes, per
campaign, one canonical CSV of its rows: per test index and backend the graph hash, the
verdict, `n_if_both`, the dialect, the input sets and the error signature. `compare` diffs two
such folders row by row and prints every difference.

The runs are made deterministic where the campaign is not by design: mutation is off in the
campaigns and checked on its own (`MUTANTS`), every backend waits for
its queue (`wait: true`, so each sees every test it can take, whatever the timing), capability
routing's "tests made for an idle backend" is off (`campaign.route=false`: which tests it makes
depends on timing), and the triage and report are off. The backends are the fast ones that
cover every materializer the check needs: ORT (GraphIR -> ONNX), TVM (ONNX, the `if`-only
subset) and `eager` (GraphIR -> torch, the interpreter every torch backend runs); Inductor and
the exporter take seconds a test, which is too long for 300-test runs on two cores.

    python bench/same_rows.py run --tree /tmp/base --out /tmp/rows-before
    python bench/same_rows.py run --tree . --out /tmp/rows-after
    python bench/same_rows.py compare /tmp/rows-before /tmp/rows-after
"""
from __future__ import annotations

import argparse
import csv
import re
import subprocess
import sys
import time
from pathlib import Path

#: campaign -> the backends it runs here (see the module docstring)
CAMPAIGNS: dict[str, list[str]] = {
    "tour": ["ort", "tvm", "eager"],
    "cpu_dynamic": ["ort", "ort_noopt", "tvm", "eager"],
    "cpu_inplace": ["ort", "ort_noopt", "eager"],
    # gradient and transform tests: eager trains in both dialects, ORT runs their forward
    "cpu_train": ["ort", "eager", "eager?dialect=hop"],
}
#: campaigns whose gradient tests are compared too (both trees draw them by one rule: a
#: training preset has them by design); elsewhere they are counted and left out (`GRAD_COLUMN`)
TRAINING = frozenset({"cpu_train"})

#: the mutation engine's check, run in the tree's own interpreter (PYTHONPATH): the campaigns
#: above run with `mutation.rate=0`, as the seed pool's feedback arrives as the backends finish
#: (so which parent a later test mutates depends on timing); here the feedback is fed in a
#: fixed order, each test's reference outcome then one made-up verdict signature
MUTANTS = r"""
import hashlib, json, sys
from ir import GenConfig, canonical_text, verify  # exported by the package, in every layout
from mutators.engine import MutationConfig
from mutators.source import MutationSource

for name, gen in [("dynamic", GenConfig(p_if=0.15, p_loop=0.1, p_scan=0.1, max_depth=2)),
                  ("inplace", GenConfig(p_inplace=0.3, p_if=0.1, p_loop=0.05))]:
    src = MutationSource(MutationConfig(seeds="seeds"), gen)
    for i in range(int(sys.argv[1])):
        tid = f"{name}-{i}"
        g, lineage = src.make(tid, 1000 + i)
        text = canonical_text(verify(g))
        digest = hashlib.sha1(text.encode()).hexdigest()[:16]
        src.observe(tid, g, lineage, True)
        src.feedback([(tid, f"made-up:{int(digest, 16) % 5}")])
        print(json.dumps([tid, digest, lineage], sort_keys=True))
"""

COLUMNS = ["index", "backend", "seed", "graph_hash", "verdict", "n_if_both", "dialect",
           "n_input_sets", "error_sig", "mode"]
#: not compared: whether the run made the test a gradient test (`generator.p_grad` of its
#: config, drawn by seed: docs/training.md). Such a test is another test by design (a float
#: graph that trains); `compare` checks the inference tests only, and counts the others
GRAD_COLUMN = "grad_drawn"


def preset_for_check(tree: Path, campaign: str, out: Path) -> str:
    """A copy of the tree's preset with the check's backends, each waiting for its queue
    (written under `out/conf`, which the run adds to Hydra's search path)."""
    import yaml

    text = (tree / "conf" / "campaign" / f"{campaign}.yaml").read_text()
    preset = yaml.safe_load(text)
    backends = CAMPAIGNS[campaign]
    preset["campaign"]["backends"] = backends
    preset["campaign"]["backend_options"] = {b: {"actors": 1, "wait": True} for b in backends}
    name = f"same_rows_{campaign}"
    dest = out / "conf" / "campaign" / f"{name}.yaml"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text("# @package _global_\n" + yaml.safe_dump(preset, sort_keys=False))
    return name


def run_campaign(tree: Path, campaign: str, tests: int, out: Path) -> Path:
    run_dir = out / f"{campaign}-run"
    args = [sys.executable, "run.py", f"--config-dir={out / 'conf'}",
            f"campaign={preset_for_check(tree, campaign, out)}", f"campaign.budget={tests}",
            "campaign.workers=1", "campaign.seed=0", "campaign.route=false",
            "campaign.report=false", "triage.enabled=false", f"output.dir={run_dir}",
            "mutation.rate=0"]
    t0 = time.monotonic()
    subprocess.run(args, cwd=tree, check=True)
    print(f"{campaign}: {time.monotonic() - t0:.0f} s", flush=True)
    return run_dir


def run_mutants(tree: Path, tests: int, dest: Path) -> int:
    import os

    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, "-c", MUTANTS, str(tests)], cwd=tree, env=env,
                         check=True, capture_output=True, text=True).stdout
    dest.write_text(out)
    return len(out.splitlines())


def write_rows(run_dir: Path, dest: Path) -> int:
    import pyarrow.dataset as ds
    import yaml

    table = ds.dataset(run_dir / "results", format="parquet").to_table()
    config = yaml.safe_load((run_dir / "config.yaml").read_text()) if (
        run_dir / "config.yaml").is_file() else {}
    p_grad = float((config.get("generator") or {}).get("p_grad") or 0.0)
    # whether a seed draws a gradient test is this (the bench's own) tree's rule, for every
    # tree compared; a config from before gradient tests has no p_grad. An import error is an
    # error: it once made every test an inference test here, unnoticed
    root = str(Path(__file__).resolve().parents[1])
    if root not in sys.path:
        sys.path.insert(0, root)
    from ir.numerics.grad import wants_grad
    rows = []
    for r in table.to_pylist():
        index = int(r["test_id"].rsplit("-", 1)[1])
        rows.append([index, r["backend"], r["seed"], r["graph_hash"], r["verdict"],
                     r["n_if_both"], r["dialect"], r["n_input_sets"], r["error_sig"] or "",
                     r["mode"], int(wants_grad(r["seed"], p_grad))])
    rows.sort(key=lambda row: (row[0], row[1]))
    with dest.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow([*COLUMNS, GRAD_COLUMN])
        w.writerows(rows)
    return len(rows)


#: TVM names the operators its importer lacks in set order, which varies between processes
#: (string hashing): compared as a set
UNSUPPORTED = re.compile(r"(not supported for frontend ONNX: )([^@]*?)( @|$)")


def read_rows(path: Path) -> dict[tuple[str, str], dict[str, str]]:
    with path.open() as f:
        rows = {(r["index"], r["backend"]): r for r in csv.DictReader(f)}
    for r in rows.values():
        r["error_sig"] = UNSUPPORTED.sub(
            lambda m: m[1] + ", ".join(sorted(m[2].split(", "))) + m[3], r["error_sig"])
    return rows


def compare(a: Path, b: Path, all_modes: bool = False) -> int:
    """Print every difference between two folders of rows; gradient tests are compared in
    `TRAINING` campaigns, and in every campaign with `all_modes` (two trees that both draw
    them by the same rule)."""
    differences = 0
    for campaign in CAMPAIGNS:
        if not (a / f"{campaign}.csv").is_file() or not (b / f"{campaign}.csv").is_file():
            print(f"{campaign}: not run in both")
            continue
        ra, rb = read_rows(a / f"{campaign}.csv"), read_rows(b / f"{campaign}.csv")
        grads = set() if campaign in TRAINING or all_modes else {
            k[0] for k, r in (*ra.items(), *rb.items()) if r.get(GRAD_COLUMN) == "1"}
        if grads:
            print(f"{campaign}: {len(grads)} tests are gradient tests in a run (not compared)")
        ra = {k: r for k, r in ra.items() if k[0] not in grads}
        rb = {k: r for k, r in rb.items() if k[0] not in grads}
        only_a, only_b = sorted(set(ra) - set(rb)), sorted(set(rb) - set(ra))
        changed = [(k, c) for k in sorted(set(ra) & set(rb)) for c in COLUMNS
                   if ra[k].get(c) != rb[k].get(c)]
        tests = len({k[0] for k in ra})
        print(f"{campaign}: {len(ra)} rows ({tests} tests) before, {len(rb)} after; "
              f"{len(only_a)} only before, {len(only_b)} only after, "
              f"{len({k for k, _ in changed})} rows differ")
        for k in only_a:
            print(f"  only before: test {k[0]} {k[1]}: {ra[k]['verdict']}")
        for k in only_b:
            print(f"  only after: test {k[0]} {k[1]}: {rb[k]['verdict']}")
        for k, c in changed:
            print(f"  test {k[0]} {k[1]}: {c} {ra[k][c]!r} -> {rb[k][c]!r}")
        differences += len(only_a) + len(only_b) + len(changed)
    ma, mb = (p.read_text().splitlines() for p in (a / "mutants.jsonl", b / "mutants.jsonl"))
    # zip strict=False: the longer one's tail is added after
    diff = [(x, y) for x, y in zip(ma, mb, strict=False) if x != y] + [(x, "") for x in ma[len(mb):]]
    print(f"mutants: {len(ma)} before, {len(mb)} after, {len(diff)} differ")
    for x, y in diff[:20]:
        print(f"  before: {x[:300]}\n  after:  {y[:300]}")
    return differences + len(diff)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run the fixed-seed campaigns of one tree")
    r.add_argument("--tree", type=Path, default=Path("."))
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--tests", type=int, default=300)
    r.add_argument("--campaigns", nargs="*", default=list(CAMPAIGNS))
    c = sub.add_parser("compare", help="diff two folders of rows")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    c.add_argument("--all-modes", action="store_true",
                   help="compare gradient tests in every campaign (both trees draw them)")
    a = p.parse_args(argv)
    if a.cmd == "compare":
        n = compare(a.before, a.after, a.all_modes)
        print("same rows" if n == 0 else f"{n} differences")
        return 0 if n == 0 else 1
    a.out.mkdir(parents=True, exist_ok=True)
    n = run_mutants(a.tree.resolve(), a.tests, a.out / "mutants.jsonl")
    print(f"mutants: {n} -> {a.out / 'mutants.jsonl'}", flush=True)
    for campaign in a.campaigns:
        run_dir = run_campaign(a.tree.resolve(), campaign, a.tests, a.out.resolve())
        n = write_rows(run_dir, a.out / f"{campaign}.csv")
        print(f"{campaign}: {n} rows -> {a.out / (campaign + '.csv')}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
