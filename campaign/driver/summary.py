"""What a campaign run did (`Summary`: printed, and written as summary.json, which the report
reads), and how it is made from a campaign's state."""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from campaign.driver.stages import GEN
from campaign.verdict import Verdict

if TYPE_CHECKING:
    from campaign.driver.actor_pool import Pool
    from campaign.driver.campaign import Campaign


@dataclass
class Summary:
    """What a campaign run did. `verdicts[backend][verdict]` counts rows."""

    campaign: str
    run_id: str
    budget: str
    out_dir: str
    results_dir: str
    findings_dir: str
    tests: int = 0  #: tests with at least one row (of this run)
    rows: int = 0
    elapsed_s: float = 0.0
    tests_per_s: float = 0.0
    verdicts: dict[str, dict[str, int]] = field(default_factory=dict)
    findings: int = 0  #: findings counted (each non-pass, non-skipped row with artifacts)
    finding_folders: int = 0  #: of which written to disk (the rest were over the per-signature cap)
    worker_deaths: int = 0
    worker_timeouts: int = 0
    worker_errors: int = 0
    requeued: int = 0
    interrupted: bool = False
    #: the signal that interrupted it: SIGINT (Ctrl-C) or SIGTERM (`campaign.stop_signals`)
    signal: str | None = None
    #: why the campaign stopped before its budget other than Ctrl-C (e.g. a full disk)
    stopped: str | None = None
    #: rows that could not be written into results/ when it stopped, and the file holding
    #: them (moved into results/ by `campaign.resume=true`); no file: they were lost
    rows_spilled: int = 0
    spill_file: str | None = None
    #: findings whose folder could not be written (a full disk); their rows have no finding_dir
    finding_write_errors: int = 0
    #: per backend: target, actors, rate, evaluated tests, tests it skipped while busy, calls,
    #: its scheduler share and core-seconds (wall time of its calls), its CPU-seconds (`cpu_s`:
    #: the rows' measured `cpu_ms`)
    backends: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: tests that reached no backend (every backend they were sampled for was busy)
    skipped_tests: int = 0
    #: actor calls of the generation stage (each backend's are in `backends`)
    generation_calls: int = 0
    #: where each actor ran: name, stage, node id and address, the resources it holds, its
    #: start (`start`: ready, starting, not placed or failed; `start_s`: seconds to ready;
    #: `start_text`: in words, with why it was not placed)
    actors: list[dict[str, Any]] = field(default_factory=list)
    #: the first test index of this run when it resumed an earlier one
    resumed_at: int | None = None
    #: cores the scheduler handed out (0: no limit, the OS shared them)
    cores: int = 0
    #: the generation stage: share, core-seconds, calls, tests cut off at the deadline
    generation: dict[str, Any] = field(default_factory=dict)
    #: seconds from the start to the end of testing, and the wall-clock budget's deadline
    #: for it (None: a test budget)
    testing_s: float = 0.0
    testing_deadline_s: float | None = None
    #: compiler coverage: per backend, the lines of its packages the campaign's tests ran
    #: (docs/coverage.md; {} when not measured)
    coverage: dict[str, int] = field(default_factory=dict)
    #: per backend held back for an environment fault (campaign/env_fault.py): its one line
    #: (backend, signature, count, window); its tests not given since are `held_env` in
    #: `backends`
    env_faults: dict[str, str] = field(default_factory=dict)

    def table(self) -> str:
        """Verdict counts per backend as a small text table."""
        present = {v for counts in self.verdicts.values() for v in counts}
        cols = ["pass"] + [v.value for v in Verdict if v.value in present and v.value != "pass"]
        cols += sorted(present - set(cols))  # verdicts outside the enum would be a bug; show them
        header = ["backend", *cols, "total"]
        body = [[b, *(str(c.get(v, 0)) for v in cols), str(sum(c.values()))]
                for b, c in sorted(self.verdicts.items())]
        widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
        fmt = lambda r: "  ".join(s.ljust(w) if i == 0 else s.rjust(w)  # noqa: E731
                                  for i, (s, w) in enumerate(zip(r, widths, strict=True)))
        return "\n".join(fmt(r) for r in [header, *body])

    def text(self) -> str:
        state = ""
        if self.interrupted:
            state = " (interrupted)" if self.signal in (None, "SIGINT") else \
                f" (interrupted by {self.signal})"
        resumed = f", resumed at test {self.resumed_at}" if self.resumed_at is not None else ""
        lines = [
            f"campaign {self.campaign} run {self.run_id}{state}{resumed}: {self.tests} tests in "
            f"{self.elapsed_s:.1f} s ({self.tests_per_s:.1f} tests/s), budget {self.budget}",
            self.table() if self.verdicts else "(no results)",
        ]
        lines += [self.env_faults[b] for b in sorted(self.env_faults)]
        if self.backends and set(self.env_faults) >= set(self.backends):
            lines.append("every backend was held back for an environment fault: testing "
                         "stopped early")
        busy = {b: s["skipped_busy"] for b, s in self.backends.items() if s.get("skipped_busy")}
        if busy:
            lines.append("skipped while busy (no row): " + ", ".join(
                f"{b} {n}" for b, n in sorted(busy.items())))
        for key, what in (("skipped_starting", "skipped while its actors started (no row)"),
                          ("not_placed", "not placed (no row; its actors could not be placed)")):
            per = {b: s[key] for b, s in self.backends.items() if s.get(key)}
            if per:
                lines.append(f"{what}: " + ", ".join(f"{b} {n}" for b, n in sorted(per.items())))
        lines += _start_lines(self.actors)
        for key, what in (("not_applicable", "not applicable (no row; ops it lacks)"),
                          ("made_for", "made for a backend that would idle (without those ops)"),
                          ("held_known", "held back: matched a known bug (no row)"),
                          ("held_env", "held back: environment fault (no row)"),
                          ("too_general", "let through: the known bug they matched is too "
                                          "general to hold back (matches over a tenth)"),
                          ("cut_off", "cut off at the deadline (no row)")):
            per = {b: s[key] for b, s in self.backends.items() if s.get(key)}
            if per:
                lines.append(f"{what}: " + "; ".join(
                    f"{b} {_count_text(c, top=key == 'not_applicable')}"
                    for b, c in sorted(per.items())))
        if self.cores:
            parts = [f"{GEN} {self.generation.get('core_s', 0):.0f} s "
                     f"({self.generation.get('share', 0):.0%})"]
            parts += [f"{b} {s.get('core_s', 0):.0f} s ({s.get('share', 0):.0%})"
                      for b, s in sorted(self.backends.items())]
            lines.append(f"core-seconds on {self.cores} cores (share): " + ", ".join(parts))
        if any(s.get("cpu_s") for s in self.backends.values()):
            lines.append("CPU-seconds of the compilers' own work (rows' cpu_ms): " + ", ".join(
                f"{b} {s.get('cpu_s') or 0:.0f} s" for b, s in sorted(self.backends.items())))
        lines += [
            f"results:  {self.results_dir} ({self.rows} rows)",
            f"findings: {self.findings_dir} ({self.findings} findings, "
            f"{self.finding_folders} folders)",
        ]
        if self.stopped:
            lines.append(f"stopped: {self.stopped}")
        if self.rows_spilled:
            lines.append(f"{self.rows_spilled} rows not written to results/: "
                         + (f"kept in {self.spill_file} (campaign.resume=true moves them back)"
                            if self.spill_file else "LOST (no space anywhere)"))
        if self.finding_write_errors:
            lines.append(f"{self.finding_write_errors} finding folders could not be written")
        if self.coverage:
            lines.append("compiler coverage (lines): " + ", ".join(
                f"{b} {n}" for b, n in sorted(self.coverage.items())))
        if self.worker_deaths or self.worker_timeouts or self.worker_errors:
            lines.append(f"actors: {self.worker_deaths} died, {self.worker_timeouts} hung, "
                         f"{self.worker_errors} raised; {self.requeued} tests re-run")
        return "\n".join(lines)


def _count_text(c: int | dict[str, int], top: bool = False) -> str:
    """A count, or the sum of a dict of counts with (`top`) its largest parts."""
    if not isinstance(c, dict):
        return str(c)
    text = str(sum(c.values()))
    if top:
        parts = sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[:4]
        text += " (" + ", ".join(f"{k} {n}" for k, n in parts) + ")"
    return text


def _start_lines(actors: list[dict[str, Any]]) -> list[str]:
    """The actors' start-up times per stage (the range over its actors), and a line for each
    actor that did not come up (why it was not placed, or how long it has been starting)."""
    took: dict[str, list[float]] = {}
    for a in actors:
        if a.get("start_s") is not None:
            took.setdefault(a["stage"], []).append(a["start_s"])
    lines = []
    if took:
        lines.append("actors up in: " + ", ".join(
            f"{'gen' if st == GEN else st} " + (f"{min(t):.1f} s" if max(t) - min(t) < 0.05
                                               else f"{min(t):.1f}-{max(t):.1f} s")
            for st, t in took.items()))
    lines += [f"actor {a['name']} {a['start_text']}" for a in actors
              if a.get("start") in ("starting", "not placed", "failed")]
    return lines


def _skips(pool: Pool) -> dict[str, int]:
    """A backend's tests given no row for want of an actor: skipped while busy, or while none
    of its actors had come up yet, or not placed (none of its actors could be: those skipped
    while they waited count here too)."""
    start = pool.skipped_starting if not pool.ever_ready else 0
    unplaced = not pool.ever_ready and pool.out
    return {"skipped_busy": pool.skipped_busy - start,
            "skipped_starting": 0 if unplaced else start,
            "not_placed": pool.not_placed + (start if unplaced else 0)}


def summarize(camp: Campaign, interrupted: bool,
              actor_table: Callable[[], list[dict[str, Any]]]) -> Summary:
    """`camp`'s summary; `actor_table()`: where each actor ran (read after the clocks, so its
    wait for actors still starting is not counted as the campaign's time)."""
    elapsed = time.monotonic() - camp.t_start
    sched = camp.scheduler.report() if camp.scheduler is not None else {}
    c, rec, tally, router = camp.c, camp.recorder, camp.tally, camp.router
    return Summary(
        campaign=c.name, run_id=camp.run_id, budget=str(camp.budget),
        out_dir=str(camp.out_dir), results_dir=str(rec.sink.dir),
        findings_dir=str(rec.findings.dir), tests=tally.tests_done,
        rows=rec.sink.rows_written, elapsed_s=elapsed,
        tests_per_s=tally.tests_done / elapsed if elapsed > 0 else 0.0,
        verdicts={b: dict(n) for b, n in tally.verdicts.items()},
        findings=rec.findings.total, finding_folders=rec.findings.folders,
        worker_deaths=tally.deaths, worker_timeouts=tally.timeouts, worker_errors=tally.errors,
        requeued=tally.requeued, interrupted=interrupted,
        finding_write_errors=rec.findings.write_errors,
        backends={b: {"target": camp.targets.get(b, ""), "actors": p.n,
                      "rate": c.options(b).rate, "evaluated": p.done,
                      **_skips(p), "resources": p.resources,
                      "calls": p.calls,
                      "share": sched.get(b, {}).get("share"),
                      "core_s": sched.get(b, {}).get("core_s"),
                      "cpu_s": round(tally.cpu_s[b], 3),
                      "not_applicable": dict(router.not_applicable[b]),
                      "made_for": router.made_for[b],
                      "held_known": dict(router.held_known[b]),
                      "too_general": dict(router.too_general[b]),
                      "held_env": router.held_env[b],
                      "cut_off": tally.cut_off[b]}
                  for b, p in camp.evals.items()},
        skipped_tests=tally.skipped_tests, generation_calls=camp.gen.calls,
        actors=actor_table(),
        resumed_at=camp.resumed_at,
        cores=camp.cores,
        generation={**sched.get(GEN, {}), "calls": camp.gen.calls,
                    "cut_off": tally.cut_off[GEN]},
        testing_s=(camp.t_end or time.monotonic()) - camp.t_start,
        testing_deadline_s=(camp.deadline - camp.t_start if camp.deadline is not None
                            else None),
        coverage=rec.coverage.totals(),
        env_faults={b: f.line() for b, f in camp.env.faults.items()},
    )
