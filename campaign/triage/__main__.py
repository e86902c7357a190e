"""`python -m campaign.triage <campaign output dir | findings dir | finding folder>`: bucket the
findings, reduce the first members of each new bucket, write bug folders with standalone
reproducers and the `bugs` table (see docs/triage.md); `--db DIR` adds them to a bug database.

The bug database's own commands (`campaign.triage.bugdb.commands`):
  python -m campaign.triage recheck DB [--timeout S] [--bug ID ...] [--python PY]
  python -m campaign.triage show DB [--all]
  python -m campaign.triage mark DB BUG STATUS [--note TEXT] [--merged-into BUG]
  python -m campaign.triage import-findings DB [docs/findings]
  python -m campaign.triage findings [DB] [--notes docs/findings] [--out docs/findings.md] [--check]
  python -m campaign.triage matrix [--python PY ...] [--bug ID ...] [--jobs N] [--timeout S]
  python -m campaign.triage findings-triggers [F21 ...] [--check] [--add GRAPH --backend SPEC]"""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from campaign.triage.config import TriageConfig


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    from campaign.triage.bugdb.commands import COMMANDS, run_command

    if args and args[0] in COMMANDS and not Path(args[0]).exists():
        return run_command(args)
    if args and args[0] == "findings-triggers" and not Path(args[0]).exists():
        from campaign.triage.pipeline.note_runs import main as findings_triggers

        return findings_triggers(args[1:])
    p = argparse.ArgumentParser(prog="python -m campaign.triage", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("path", type=Path,
                   help="a campaign output dir, its findings/ dir, or one finding folder")
    p.add_argument("--out", type=Path, default=None,
                   help="where bugs/ and bugs.parquet go (default: the output dir; for one "
                        "folder: <folder>/reduced)")
    d = TriageConfig()
    p.add_argument("--reduce-first", type=int, default=d.reduce_first,
                   help="members of each new crash bucket reduced (default %(default)s)")
    p.add_argument("--reduce-mismatches", type=int, default=d.reduce_mismatches,
                   help="mismatch folders reduced per backend (default %(default)s)")
    p.add_argument("--max-tests", type=int, default=d.max_tests,
                   help="candidate evaluations per reduction (default %(default)s)")
    p.add_argument("--max-seconds", type=float, default=d.max_seconds,
                   help="seconds per reduction (default %(default)s)")
    p.add_argument("--budget", default=d.budget,
                   help="total reduction time, e.g. 10m; 0: bucket only (default %(default)s)")
    p.add_argument("--timeout", type=float, default=d.timeout_s,
                   help="sandbox timeout per candidate, seconds; timeout findings are re-run at "
                        "the limit the campaign confirmed them at (default %(default)s)")
    p.add_argument("--cold-start", type=float, default=d.repro_cold_start_s,
                   help="seconds a timeout's repro.py waits beyond that limit (default "
                        "%(default)s)")
    p.add_argument("--group-reruns", type=int, default=d.group_reruns,
                   help="cross re-runs when grouping buckets into bugs (default %(default)s)")
    p.add_argument("--no-check-repro", action="store_true", help="do not run the repro.py files")
    p.add_argument("--known", action="append", default=[],
                   help="an earlier bugs.parquet or output dir: its buckets are not new")
    p.add_argument("--db", default=None,
                   help="the bug database (a directory) to read known bugs from and add the "
                        "buckets to; off: none (default: runs/bugdb for an output dir under "
                        "runs/, else none)")
    p.add_argument("--reduce-known", action="store_true",
                   help="reduce findings of buckets already known (--known, --db) again")
    p.add_argument("--verdicts", default=",".join(d.reduce_verdicts),
                   help="verdicts to reduce (default %(default)s)")
    p.add_argument("-q", "--quiet", action="store_true")
    a = p.parse_args(args)
    cfg = TriageConfig(enabled=True, reduce_first=a.reduce_first,
                       reduce_mismatches=a.reduce_mismatches, max_tests=a.max_tests,
                       max_seconds=a.max_seconds, budget=a.budget, timeout_s=a.timeout,
                       check_repro=not a.no_check_repro, known=list(a.known),
                       repro_cold_start_s=a.cold_start, group_reruns=a.group_reruns,
                       db=a.db, reduce_known=a.reduce_known,
                       reduce_verdicts=[v for v in a.verdicts.split(",") if v])
    logging.basicConfig(level=logging.WARNING)
    from campaign.triage.bugdb.store import BugDbError
    from campaign.triage.pipeline.campaign_triage import triage

    log = (lambda s: None) if a.quiet else (lambda s: print(s, flush=True))
    from campaign.config import ConfigError

    try:
        report = triage(a.path, cfg, a.out, log)
    except (BugDbError, ConfigError) as e:  # a bad --db or setting: one line, exit 2
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(report.text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
