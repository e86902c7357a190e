"""The house issue's grep-level measures of a source tree (issue 42), before and after a change.

    python bench/house_measures.py --tree /tmp/before
    python bench/house_measures.py --tree .

Each measure is printed with the files it counts in:
  - mode branches: tests of a test's mode outside the mode modules (`campaign/modes/`):
    `.grad / .transform / .dynshape is (not) None`, and compares of a `mode` to a mode name
    or object (assertions, which narrow a type, are not branches; a backend's `ReproBodies`
    fields of the same names are no test of a mode);
  - transform name compares: a string compared with a torch.func transform's name
    (`== "vmap"`, `in ("jacrev", "jacfwd")`, ...);
  - files that name a backend outside its folder: production files outside
    `campaign/backends/` holding a backend's registered name as a string literal;
  - the largest class in campaign/triage, in lines;
  - the places that declare a result column: files where a column of `RESULT_SCHEMA` is
    declared (an Arrow field, a dataclass field of the row, a row of the docs' table);
  - the places a result row changes form between the judge and Arrow: a row turned into a
    dict (`row.to_dict()`) or copied into a patched one (`{**row, ...}`) in the live path
    (campaign/ but the triage, which reads rows back from Parquet).
"""
from __future__ import annotations

import argparse
import ast
import re
import sys
from collections import Counter
from pathlib import Path

PACKAGES = ("campaign", "ir", "mutators")
MODE_MODULES = "campaign/modes/"
MODE_BRANCH = re.compile(r"(?<!bodies)\.(grad|transform|dynshape) is (not )?None"
                         r"|\bmode(\.name)?\s*(==|!=)\s*\"(infer|grad|transform)\""
                         r"|\bmode (is|is not) (INFER|GRAD|TRANSFORM)\b")
TRANSFORMS = ("vmap", "grad", "vjp", "jvp", "jacrev", "jacfwd")
_T = "|".join(TRANSFORMS)
TRANSFORM_COMPARE = re.compile(
    rf"(==|!=)\s*\"({_T})\"|\"({_T})\"\s*(==|!=)"
    rf"|\bin\s*[\(\[{{]\s*\"({_T})\"(\s*,\s*\"({_T})\")*\s*,?\s*[\)\]}}]")
#: `mode == "grad"` is a mode compare, not a transform's
NOT_TRANSFORM = re.compile(r"\bmode\s*(==|!=)\s*\"grad\"")
BACKEND_NAMES = ("ort", "ort_noopt", "tvm", "tvm_torch", "inductor", "inductor_cuda",
                 "inductor_dynamic", "aot_eager", "onnx_export", "eager")
_B = "|".join(BACKEND_NAMES)
BACKEND_LITERAL = re.compile(rf"[\"']({_B})([?\"'])")


def production_files(tree: Path) -> list[Path]:
    files = [p for pkg in PACKAGES for p in sorted((tree / pkg).rglob("*.py"))]
    return files + [tree / "run.py"]


def code_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, text) of the lines that are code (comments and docstrings dropped)."""
    text = path.read_text()
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    doc_lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str):
            doc_lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        code = line.split("#", 1)[0] if "#" in line and '"#' not in line else line
        if i not in doc_lines and code.strip() and not code.strip().startswith("assert "):
            out.append((i, code))
    return out


def count(tree: Path, pattern: re.Pattern, skip: str | None = None,
          unless: re.Pattern | None = None) -> Counter:
    found: Counter = Counter()
    for p in production_files(tree):
        rel = p.relative_to(tree).as_posix()
        if skip and rel.startswith(skip):
            continue
        for _, line in code_lines(p):
            n = len(pattern.findall(line)) - (len(unless.findall(line)) if unless else 0)
            if n > 0:
                found[rel] += n
    return found


def largest_class(tree: Path, under: str) -> tuple[str, int]:
    best = ("", 0)
    for p in sorted((tree / under).rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ClassDef):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > best[1]:
                    best = (f"{p.relative_to(tree).as_posix()}:{node.name}", n)
    return best


def column_declarations(tree: Path) -> Counter:
    sys.path.insert(0, str(tree))
    try:
        from campaign.schema import RESULT_SCHEMA
    finally:
        sys.path.pop(0)
    names = "|".join(RESULT_SCHEMA.names)
    decl = re.compile(rf"pa\.field\(\"({names})\"|^\s+({names})\s*:\s*[A-Za-z]"
                      rf"|^\|\s*`({names})`\s*\|")
    found: Counter = Counter()
    for p in [*production_files(tree), *sorted((tree / "docs").glob("*.md"))]:
        n = sum(1 for line in p.read_text().splitlines() if decl.search(line))
        if n >= len(RESULT_SCHEMA.names) // 2:  # a place that declares the columns
            found[p.relative_to(tree).as_posix()] = n
    return found


ROW_FORM_CHANGE = re.compile(r"\b(row|base|\))\.to_dict\(\)|\{\*\*row\b")


def row_form_changes(tree: Path) -> Counter:
    return Counter({f: n for f, n in count(tree, ROW_FORM_CHANGE).items()
                    if f.startswith("campaign/") and not f.startswith("campaign/triage/")})


def show(title: str, found: Counter, files_only: bool = False) -> None:
    total = len(found) if files_only else sum(found.values())
    print(f"{title}: {total}" + ("" if files_only else f" in {len(found)} files"))
    for f, n in found.most_common():
        print(f"    {n:4d}  {f}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tree", type=Path, default=Path("."))
    tree = p.parse_args(argv).tree.resolve()
    show("mode branches outside the mode modules", count(tree, MODE_BRANCH, skip=MODE_MODULES))
    show("transform name compares", count(tree, TRANSFORM_COMPARE, unless=NOT_TRANSFORM))
    outside = Counter({f: n for f, n in count(tree, BACKEND_LITERAL).items()
                       if not f.startswith("campaign/backends/")})
    show("files that name a backend outside its folder", outside, files_only=True)
    name, n = largest_class(tree, "campaign/triage")
    print(f"largest class in campaign/triage: {name}, {n} lines")
    show("places that declare a result column", column_declarations(tree), files_only=True)
    show("places a result row changes form between the judge and Arrow", row_form_changes(tree))
    return 0


if __name__ == "__main__":
    sys.exit(main())
