"""Scaling benchmark of the campaign runner: tests/s with 1 and 2 workers on this machine and on
a simulated multi-node Ray cluster, the per-test overhead of Ray + storage, and the memory of a
long campaign. Prints figures; asserts nothing about time.

    python bench/scale.py [--seconds 60] [--parts overhead tvm ort cluster]
    python bench/scale.py --rss 600          # peak RSS over a 10-minute cpu_ort campaign
    python bench/scale.py --parts ort --nnsmith-python /tmp/nns/bin/python   # with the baseline

Parts:
- `overhead`: the campaign with no-op stages (generation hands out a real packed 10-node test,
  evaluation returns that test's real row: no work), after a warm-up run; the CPU time per test
  of every process involved (driver, Ray's GCS and raylet, the actors) while it runs is what
  Ray + the driver + Parquet storage cost per test. Compared with the median CPU (and wall)
  time of a whole ORT test done in one process without Ray (`FuzzWorker.run`: generate, search
  inputs, reference, ONNX, ORT in its sandbox process, judge). CPU time, unlike wall time,
  hardly depends on what else the machine runs.
- `tvm`: the TVM-bound cpu_tvm campaign (one generation actor, 1 then 2 TVM evaluation actors).
- `ort`: the cpu_ort campaign (1 then 2 generation actors, one ORT evaluation actor).
  Both run their preset's generator and mutation settings (conf/campaign/cpu_<backend>.yaml). With
  `--nnsmith-python`, first NNSmith's own single fuzz loop on ORT (CPU, 10 nodes) runs as long
  with that interpreter (bench/nnsmith_loop.py: generate, export, oracle, ORT, compare), and
  the 2-worker rate is also given as a ratio against its tests/min.
- `cluster`: the TVM-bound campaign on a simulated cluster (`ray.cluster_utils.Cluster`): a head
  node with the generation actor and two more nodes, one TVM actor each (custom resource).
Figures are tests/s over the campaign (`Summary.tests_per_s`, after the actors started), with
the load average of the machine (other processes compete for the 2 cores).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ray  # noqa: E402
import ray.cloudpickle  # noqa: E402

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

REPO = Path(__file__).resolve().parents[1]
TICK = os.sysconf("SC_CLK_TCK")


# ---- process-tree accounting (no psutil here) -------------------------------------------------

def _stat(pid: int) -> tuple[int, float] | None:
    """(ppid, cpu seconds incl. reaped children) of a process, None if gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
        fields = text[text.rindex(")") + 2:].split()
        ppid = int(fields[1])
        utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    except (OSError, ValueError):  # gone, or going (an empty read)
        return None
    return ppid, (utime + stime + cutime + cstime) / TICK


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def tree(root: int) -> list[int]:
    """`root` and all its descendants."""
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(int(name))
            if st is not None:
                kids.setdefault(st[0], []).append(int(name))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out


def tree_cpu(root: int) -> float:
    return sum(st[1] for p in tree(root) if (st := _stat(p)) is not None)


class CpuSampler:
    """Samples the CPU seconds of a process tree every 0.25 s in a thread, so the CPU spent in a
    window that ends when sampling stops can be read afterwards (`cpu_in_last`)."""

    def __init__(self, root: int):
        import threading

        self.root, self.samples, self.stop = root, [], threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                self.samples.append((time.monotonic(), tree_cpu(self.root)))
            except Exception as e:  # a sample lost, not the sampler
                print(f"cpu sampler: {type(e).__name__}: {e}", file=sys.stderr)
            self.stop.wait(0.25)

    def __enter__(self) -> CpuSampler:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()

    def cpu_in_last(self, seconds: float) -> float:
        """CPU seconds in the `seconds` before the campaign ended (0 if not enough samples).
        The end is the sample of most CPU: when Ray shuts down, actors die unreaped by this
        tree and their CPU leaves its count."""
        if len(self.samples) < 2:
            return 0.0
        t_end, c_end = max(self.samples, key=lambda s: s[1])
        before = [c for t, c in self.samples if t <= t_end - seconds]
        return c_end - (before[-1] if before else self.samples[0][1])


def load() -> str:
    return "load average {:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


# ---- no-op stages -----------------------------------------------------------------------------

@dataclass
class NoopGenerated:
    """`campaign.pipeline.Generated`'s fields (the stages' actors need not import torch)."""

    test_id: str
    seed: int
    case: bytes
    base: dict
    report: None = None
    ms: float = 0.0


@dataclass
class NoopReport:
    rows: list
    findings: list


class NoopGenerator:
    """Hands out one real packed test for every seed: Ray and the driver move real bytes."""

    def __init__(self, cfg, name):
        self.case, self.base = cfg["case"], cfg["base"]

    def generate(self, items):
        return [NoopGenerated(t, s, self.case, {**self.base, "test_id": t, "seed": s})
                for t, s, _ in items]


class NoopEvaluator:
    """Returns the real row of that test for every case, without looking at it."""

    def __init__(self, cfg, backend, name):
        self.row = cfg["row"]

    def evaluate(self, cases):
        return [NoopReport([dict(self.row)], []) for _ in cases]


def real_ort_test() -> tuple[dict, float, float]:
    """A real packed 10-node test and its ORT row; and the median wall and CPU ms of whole ORT
    tests in one process (generate ... judge, ORT in its sandbox process, whose CPU counts),
    over 200 tests."""
    from campaign.pipeline import Evaluator, Generator
    from campaign.worker import FuzzWorker, WorkerConfig

    cfg = WorkerConfig(backends=["ort"])
    g = next(x for x in Generator(cfg, "g").generate([("b-000000", s, ["ort"]) for s in range(5)])
             if x.case is not None)
    ev = Evaluator(cfg, "ort", "e")
    (rep,) = ev.evaluate([g.case])
    ev.close()
    wall, cpu = [], []
    with FuzzWorker(cfg) as w:
        w.run("warm", 10_000)
        sandbox = w.sandboxes["ort"]
        for i in range(200):
            pid = sandbox.pid
            c0, s0, t0 = time.process_time(), _stat(pid), time.perf_counter()
            w.run(f"b-{i:06d}", i)
            t1, c1, s1 = time.perf_counter(), time.process_time(), _stat(pid)
            if s0 is None or s1 is None or sandbox.pid != pid:
                continue  # the sandbox process was replaced: its CPU is not readable
            wall.append((t1 - t0) * 1e3)
            cpu.append((c1 - c0 + s1[1] - s0[1]) * 1e3)
    return ({"case": g.case, "base": g.base, "row": rep.rows[0]}, statistics.median(wall),
            statistics.median(cpu))


def bench_overhead(n: int) -> None:
    from campaign.config import BackendOptions, CampaignConfig, Config, RayConfig
    from campaign.driver import Stages, run_campaign

    payload, median_ms, median_cpu_ms = real_ort_test()
    print(f"== overhead: a whole ORT test in one process, no Ray (200 tests): median wall "
          f"{median_ms:.2f} ms, median CPU {median_cpu_ms:.2f} ms (its sandbox's included); "
          f"packed test {len(payload['case'])} bytes; {load()}", flush=True)
    ray.init(address="local", num_cpus=4, include_dashboard=False, _temp_dir="/tmp/dsray-bench",
             logging_level=logging.WARNING, log_to_driver=False)
    try:
        for _k, tests in enumerate((300, n)):  # the first run warms up Ray's workers
            cfg = Config(campaign=CampaignConfig(
                name="noop", budget=str(tests), workers=1, backends=["ort"], flush_every_s=30,
                backend_options={"ort": BackendOptions(actors=1, wait=True)}),
                ray=RayConfig())
            cfg.triage.enabled = False
            sampler = CpuSampler(os.getpid())
            with tempfile.TemporaryDirectory() as out, sampler:
                s = run_campaign(cfg, Path(out), stages=Stages(NoopGenerator, NoopEvaluator,
                                                               payload))
        cpu_ms = 1e3 * sampler.cpu_in_last(s.elapsed_s) / s.tests
        print(f"   no-op campaign: {s.tests} tests at {s.tests_per_s:.0f} tests/s (1 generation "
              f"+ 1 evaluation actor)")
        print(f"   Ray + driver + storage: {cpu_ms:.3f} ms CPU per test (all processes, during "
              f"the run) = {100 * cpu_ms / median_cpu_ms:.1f}% of the median ORT test's CPU, "
              f"{100 * cpu_ms / median_ms:.1f}% of its wall time", flush=True)
    finally:
        ray.shutdown()


# ---- real campaigns ---------------------------------------------------------------------------

def preset_config(preset: str):
    """The config `python run.py campaign=<preset>` runs (Hydra-composed from conf/)."""
    from hydra import compose, initialize_config_dir

    from campaign.config import to_config

    with initialize_config_dir(str(REPO / "conf"), version_base="1.3"):
        return to_config(compose("config", overrides=[f"campaign={preset}"]))


def campaign_rate(backends: list[str], workers: int, actors: int, seconds: float,
                  cluster_nodes: int = 0, name: str = "bench") -> float:
    """tests/s of the backend's preset campaign (`cpu_<backend>`: its generator and mutation
    settings) with `workers` generation actors and `actors` evaluation actors."""
    from campaign.config import BackendOptions, GenerationOptions, RayConfig
    from campaign.driver import run_campaign

    b = backends[0]
    opts = BackendOptions(actors=actors, wait=True)
    gen = GenerationOptions()
    c = None
    if cluster_nodes:
        from ray.cluster_utils import Cluster

        os.environ["RAY_TMPDIR"] = "/tmp/dsray-bcl"
        os.makedirs("/tmp/dsray-bcl/ray", exist_ok=True)
        c = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 1, "resources": {"head": 1}, "include_dashboard": False,
            "temp_dir": "/tmp/dsray-bcl"})
        for _ in range(cluster_nodes):
            c.add_node(num_cpus=1, resources={"eval_slot": 1}, include_dashboard=False)
        ray.init(address=c.address, logging_level=logging.WARNING, log_to_driver=False)
        opts = BackendOptions(actors=actors, wait=True, resources={"eval_slot": 1})
        gen = GenerationOptions(num_cpus=0.5, resources={"head": 1})
    cfg = preset_config(f"cpu_{b}")
    cfg.campaign.name, cfg.campaign.budget, cfg.campaign.workers = name, f"{seconds:g}s", workers
    cfg.campaign.backends, cfg.campaign.backend_options = backends, {b: opts}
    cfg.campaign.generation, cfg.ray = gen, RayConfig(temp_dir="/tmp/dsray-bench")
    cfg.triage.enabled = False
    sampler = CpuSampler(os.getpid())
    try:
        with tempfile.TemporaryDirectory() as out, sampler:
            s = run_campaign(cfg, Path(out))
        nodes = {a["node_id"] for a in s.actors if a["stage"] == b}
        cpu = sampler.cpu_in_last(s.elapsed_s)
        print(f"   -> {s.tests} tests in {s.elapsed_s:.1f} s = {s.tests_per_s:.2f} tests/s "
              f"({s.tests_per_s * 60:.0f}/min); {b} actors on {len(nodes)} node(s); {load()}",
              flush=True)
        if cpu > 0:
            print(f"      CPU of all its processes during the run: {1e3 * cpu / max(s.tests, 1):.1f}"
                  f" ms per test -> {s.tests / cpu * 60 * (os.cpu_count() or 1):.0f} tests/min "
                  f"if its {os.cpu_count()} cores were its own", flush=True)
        return s.tests_per_s
    finally:
        if c is not None:
            ray.shutdown()
            c.shutdown()
            os.environ.pop("RAY_TMPDIR", None)


def nnsmith_loop(python: str, seconds: float) -> dict:
    """NNSmith's own fuzz loop on ORT (CPU), 10 nodes, for `seconds` (bench/nnsmith_loop.py)."""
    script = Path(__file__).with_name("nnsmith_loop.py")
    out = subprocess.run([python, str(script), "--seconds", f"{seconds:g}"], capture_output=True,
                         text=True, check=True, timeout=seconds + 600).stdout
    return json.loads(out.strip().splitlines()[-1])


def bench_scaling(backend: str, seconds: float, nnsmith_python: str | None = None) -> None:
    print(f"== {backend}: 1 vs 2 workers, {seconds:g} s each; {load()}", flush=True)
    base = None
    if backend == "tvm":  # TVM-bound: one generation actor, k TVM actors
        r1 = campaign_rate(["tvm"], 1, 1, seconds)
        r2 = campaign_rate(["tvm"], 1, 2, seconds)
    else:  # generation-bound: k generation actors, one ORT actor
        if nnsmith_python:
            base = nnsmith_loop(nnsmith_python, seconds)
            print(f"   NNSmith's fuzz loop (ORT cpu, {base['nodes']} nodes): {base['tests']} tests "
                  f"in {base['seconds']:.1f} s = {base['tests_per_min']:.0f}/min "
                  f"({base['failed_gen']} failed generations, {base['bugs']} bug reports); "
                  f"{load()}", flush=True)
        r1 = campaign_rate(["ort"], 1, 1, seconds)
        r2 = campaign_rate(["ort"], 2, 1, seconds)
    print(f"   {backend}: 2 workers / 1 worker = {r2 / r1:.2f}x", flush=True)
    if base is not None and base["tests_per_min"] > 0:
        print(f"   ort: 2 workers / NNSmith's loop = {r2 * 60 / base['tests_per_min']:.2f}x "
              f"({r2 * 60:.0f} vs {base['tests_per_min']:.0f} tests/min)", flush=True)


def bench_cluster(seconds: float) -> None:
    print(f"== simulated cluster: head (generation) + 2 nodes with one TVM actor each; {load()}",
          flush=True)
    campaign_rate(["tvm"], 1, 2, seconds, cluster_nodes=2)


# ---- memory of a long campaign ------------------------------------------------------------------

def bench_rss(seconds: int, preset: str) -> None:
    out = tempfile.mkdtemp(prefix="dynsmith-rss-")
    cmd = [sys.executable, "run.py", f"campaign={preset}", f"campaign.budget={seconds}s",
           f"output.dir={out}", "ray.temp_dir=/tmp/dsray-rss"]
    print(f"== RSS of `{' '.join(cmd[1:])}`: driver + Ray + actors + sandboxes; {load()}",
          flush=True)
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    t0 = time.monotonic()
    samples: list[tuple[float, float, int]] = []
    peak_per: dict[str, float] = {}
    while proc.poll() is None:
        pids = tree(proc.pid)
        total = 0.0
        for p in pids:
            mb = _rss_mb(p)
            total += mb
            try:
                name = Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")[0].decode()[-40:]
            except OSError:
                name = "?"
            peak_per[name] = max(peak_per.get(name, 0.0), mb)
        samples.append((time.monotonic() - t0, total, len(pids)))
        time.sleep(5)
    tail = proc.stdout.read() if proc.stdout else ""
    print("\n".join(tail.strip().splitlines()[-8:]))
    run = [s for s in samples if s[2] > 5]
    if not run:
        print("   no samples")
        return
    peak = max(s[1] for s in run)
    first = [s[1] for s in run if s[0] - run[0][0] < 90]
    last = [s[1] for s in run if s[0] > run[-1][0] - 90]
    print(f"   total RSS of the process tree: peak {peak:.0f} MB; median of the first 90 s "
          f"{statistics.median(first):.0f} MB, of the last 90 s {statistics.median(last):.0f} MB "
          f"({len(samples)} samples every 5 s; shared pages counted once per process)")
    top = sorted(peak_per.items(), key=lambda kv: -kv[1])[:6]
    print("   largest processes (peak MB): " + ", ".join(f"{n} {mb:.0f}" for n, mb in top))
    t_first = run[0][0]
    minutes = sorted({int((t - t_first) // 60) for t, _, _ in run})
    print("   total RSS by minute (median MB): " + ", ".join(
        f"{m}: {statistics.median([mb for t, mb, _ in run if int((t - t_first) // 60) == m]):.0f}"
        for m in minutes))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--parts", nargs="+", default=["overhead", "tvm", "ort", "cluster"])
    ap.add_argument("--tests", type=int, default=5000, help="tests of the overhead part")
    ap.add_argument("--rss", type=int, metavar="SECONDS",
                    help="only: peak RSS over a campaign of this many seconds")
    ap.add_argument("--preset", default="cpu_ort", help="the campaign of --rss")
    ap.add_argument("--nnsmith-python", metavar="PATH",
                    help="an interpreter with NNSmith: the ort part also times NNSmith's fuzz "
                         "loop (bench/nnsmith_loop.py) and gives the ratio against it")
    args = ap.parse_args()
    if args.rss:
        bench_rss(args.rss, args.preset)
        return
    for part in args.parts:
        if part == "overhead":
            bench_overhead(args.tests)
        elif part in ("tvm", "ort"):
            bench_scaling(part, args.seconds, args.nnsmith_python)
        elif part == "cluster":
            bench_cluster(args.seconds)


if __name__ == "__main__":
    main()
