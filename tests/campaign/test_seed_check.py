"""Seeds are checked at start-up: every file of `mutation.seeds` is read, parsed and verified
before any actor starts; a bad one is a one-line config error naming the file, the line and the
problem (`python run.py` exits 2), or, with `mutation.skip_bad_seeds=true`, a warning per file
and the campaign goes on without it."""
from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from campaign.config import Config, ConfigError, validate
from mutators.source import SeedError, check_seed, load_seeds

REPO = Path(__file__).resolve().parents[2]
GOOD = (REPO / "seeds" / "mlp.gir").read_text()
HINT = "; fix it, or set mutation.skip_bad_seeds=true to leave bad seeds out"


def _bad(kind: str) -> bytes:
    if kind == "decode":
        return GOOD.encode() + b"\n# \xff\xfe binary tail\n"
    if kind == "unknown_op":
        return GOOD.replace("gelu(", "gelux(").encode()
    if kind == "type":
        return GOOD.replace("%a1 = gelu(%h1) : f32[4,32]", "%a1 = gelu(%h1) : f32[4,31]").encode()
    if kind == "empty":
        return b""
    if kind == "only_comments":
        return b"# a seed that never got written\n\n"
    if kind == "syntax":
        return GOOD.replace("%h2 = linear(%a1, %w2, %b2)", "%h2 = linear(%a1 %w2, %b2)").encode()
    raise AssertionError(kind)


#: kind -> the problem after `<file>:`
PROBLEMS = {
    "decode": "16: not UTF-8 text (byte 0xff at offset {off}); a seed is a GraphIR text file",
    "unknown_op": "7:9: unknown op 'gelux'",
    "type": "7: graph main, inst 1 (gelu): result types (f32[4,31]) differ from the type "
            "rule's (f32[4,32])",
    "empty": "1: empty file: no graph (a seed holds one `graph main(...) {...}`)",
    "only_comments": "1: empty file: no graph (a seed holds one `graph main(...) {...}`)",
    "syntax": "8:20: expected ',' but found '%w2'",
}


def _seed_dir(tmp_path: Path, **files: bytes) -> Path:
    d = tmp_path / "seeds"
    d.mkdir()
    (d / "good.gir").write_text(GOOD)
    for name, data in files.items():
        (d / f"{name}.gir").write_bytes(data)
    return d


def _problem(kind: str) -> str:
    return PROBLEMS[kind].replace("{off}", str(len(GOOD.encode()) + 3))


@pytest.mark.parametrize("kind", list(PROBLEMS))
def test_each_bad_seed_is_one_line_naming_file_line_and_problem(tmp_path, kind):
    d = _seed_dir(tmp_path, bad=_bad(kind))
    with pytest.raises(SeedError) as e:
        check_seed(d / "bad.gir")
    assert str(e.value) == f"{d / 'bad.gir'}:{_problem(kind)}"
    cfg = Config()
    cfg.mutation.seeds = str(d)
    with pytest.raises(ConfigError) as e:
        validate(cfg)
    assert str(e.value) == f"mutation.seeds: {d / 'bad.gir'}:{_problem(kind)}{HINT}"


def test_several_bad_seeds_name_the_first_and_count_the_rest(tmp_path):
    d = _seed_dir(tmp_path, a=_bad("empty"), b=_bad("type"), c=_bad("decode"))
    cfg = Config()
    cfg.mutation.seeds = str(d)
    with pytest.raises(ConfigError) as e:
        validate(cfg)
    assert str(e.value) == (f"mutation.seeds: {d / 'a.gir'}:{_problem('empty')} "
                            f"(and 2 more bad files){HINT}")


def test_skip_bad_seeds_warns_once_per_file_and_loads_the_good_ones(tmp_path, caplog):
    d = _seed_dir(tmp_path, a=_bad("unknown_op"), b=_bad("decode"))
    cfg = Config()
    cfg.mutation.seeds = str(d)
    cfg.mutation.skip_bad_seeds = True
    with caplog.at_level(logging.WARNING, logger="campaign.config"):
        validate(cfg)
        validate(cfg)  # run.py and the driver both validate: still one warning per file
    warned = [r.getMessage() for r in caplog.records if r.name == "campaign.config"]
    assert warned == [f"mutation.seeds: seed left out: {d / 'a.gir'}:{_problem('unknown_op')}",
                      f"mutation.seeds: seed left out: {d / 'b.gir'}:{_problem('decode')}"]
    assert [sid for sid, _ in load_seeds(d, skip_bad=True)] == ["corpus/good"]
    with pytest.raises(SeedError):
        load_seeds(d)


def test_seeds_do_not_matter_with_mutation_off(tmp_path):
    """The same bad corpus that fails a campaign that mutates is not read by one that does
    not: no error, and the budget parses as with no seeds at all."""
    d = _seed_dir(tmp_path, bad=_bad("empty"))
    cfg = Config()
    cfg.mutation.seeds = str(d)
    cfg.mutation.rate = 0.5
    with pytest.raises(ConfigError) as e:
        validate(cfg)
    assert str(e.value) == f"mutation.seeds: {d / 'bad.gir'}:{_problem('empty')}{HINT}"
    cfg.mutation.rate = 0.0
    assert validate(cfg) == validate(Config())


def test_the_cli_exits_2_with_one_line_before_starting_anything(tmp_path):
    d = _seed_dir(tmp_path, bad=_bad("type"))
    proc = subprocess.run([sys.executable, "run.py", f"mutation.seeds={d}",
                           f"hydra.run.dir={tmp_path / 'run'}"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"error: mutation.seeds: {d / 'bad.gir'}:{_problem('type')}{HINT}"]
    assert not (tmp_path / "run" / "results").exists()
