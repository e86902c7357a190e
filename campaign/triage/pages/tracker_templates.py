"""report.md in the shape of the compiler's own bug template, so that it can be pasted into the
tracker as it stands (docs/triage.md, "report.md").

One renderer per tracker, each with the template's headings in the template's order:
  - **pytorch** (torch.compile, AOT autograd, the torch.onnx exporter): the "torch.compile Bug
    Report" form: `Describe the bug` (with what the form asks of fuzzer reports: the tolerances
    against torch's defaults, the float64 baseline, no index comparison, no random ops; the
    ablation; the minimal repro), `Error logs`, `Versions`;
  - **tvm**: `[Bug]` title, `Expected behavior`, `Actual behavior`, `Environment`, `Steps to
    reproduce`, `Triage` (its labels);
  - **onnxruntime**: `Describe the issue`, `To reproduce`, `Urgency`, then the system
    information the form asks (platform, OS, installation, version, API, architecture,
    execution provider).
The sections are built by `campaign.triage.pages.upstream_report` (`ReportParts`); this module
only orders and frames them.
"""
from __future__ import annotations

import platform
from dataclasses import dataclass, field

#: torch.testing.assert_close's default (rtol, atol) per dtype name (its documented table)
TORCH_DEFAULT_TOLERANCES = {
    "float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
}


def tracker(spec: str) -> str:
    """The repository backend `spec`'s bugs are reported to (`BackendInfo.tracker`)."""
    from campaign.backends import info_of

    return info_of(spec).tracker


@dataclass
class ReportParts:
    """The pieces of one report, in Markdown lines (each list may be empty)."""

    title: str
    #: what goes wrong, in a sentence or two, and how it was found
    summary: list[str]
    expected: list[str]
    actual: list[str]
    #: the ablation: the localization's table and the training ablation
    ablation: list[str]
    #: the smallest graph as code (torch source, ONNX text)
    program: list[str]
    #: how to run the reproducer, and its text
    reproducer: list[str]
    #: `name==version` of the backend's stack
    versions: list[str]
    #: PyTorch's fuzzer checklist (tolerances, baseline): lines
    fuzzer_notes: list[str] = field(default_factory=list)
    #: the error text, for an `Error logs` section
    error_log: list[str] = field(default_factory=list)
    #: the versions the bug was seen failing on (`environment.seen_line`): lines
    seen: list[str] = field(default_factory=list)
    #: `python -m torch.utils.collect_env`'s output ('' none: no block)
    collect_env: str = ""


def environment(versions: list[str]) -> list[str]:
    """The environment as a Markdown list: OS, architecture, Python, the stack's versions."""
    return [f"- OS: {platform.platform()}", f"- Architecture: {platform.machine()}",
            f"- Python: {platform.python_version()}",
            f"- Packages: {', '.join(versions) or 'unknown'}"]


def versions_block(p: ReportParts) -> list[str]:
    """The versions seen, the environment list, and collect_env's output folded."""
    out = [*p.seen, *([""] if p.seen else []), *environment(p.versions)]
    if p.collect_env:
        out += ["", "<details>", "<summary>python -m torch.utils.collect_env</summary>", "",
                "```", p.collect_env.rstrip(), "```", "", "</details>"]
    return out


def render(spec: str, parts: ReportParts) -> str:
    """The report of backend `spec` in its tracker's template."""
    from campaign.backends.base import ORT_TRACKER, TVM_TRACKER

    project = tracker(spec)
    if project == TVM_TRACKER:
        return _tvm(parts)
    if project == ORT_TRACKER:
        return _ort(spec, parts)
    return _pytorch(parts)


def _pytorch(p: ReportParts) -> str:
    lines = [f"# {p.title}", "", "### 🐛 Describe the bug", "", *p.summary, "", *p.expected, "",
             *p.actual, ""]
    if p.fuzzer_notes:
        lines += ["Found by a fuzzer (dynsmith); what the template asks of such reports:", "",
                  *p.fuzzer_notes, ""]
    if p.ablation:
        lines += ["#### Ablation", "", *p.ablation, ""]
    lines += ["#### Minimal reproducer", "", *p.program, *p.reproducer]
    lines += ["### Error logs", "", *(p.error_log or ["(no error: a wrong result, above)"]), ""]
    lines += ["### Versions", "", *versions_block(p), ""]
    return "\n".join(lines)


def _log(p: ReportParts) -> list[str]:
    return ["The error log:", "", *p.error_log, ""] if p.error_log else []


def _tvm(p: ReportParts) -> str:
    lines = [f"# [Bug] {p.title}", "", *p.summary, "", "### Expected behavior", "", *p.expected,
             "", "### Actual behavior", "", *p.actual, "", *_log(p)]
    if p.ablation:
        lines += ["Where it goes wrong (ablation):", "", *p.ablation, ""]
    lines += ["### Environment", "", *versions_block(p), "",
              "### Steps to reproduce", "", *p.program, *p.reproducer,
              "### Triage", "", "* needs-triage", "* type: bug", ""]
    return "\n".join(lines)


def _ort(spec: str, p: ReportParts) -> str:
    ep = "CUDA" if "cuda" in spec else "Default CPU"
    lines = [f"# {p.title}", "", "### Describe the issue", "", *p.summary, "", *p.expected, "",
             *p.actual, "", *_log(p)]
    if p.ablation:
        lines += ["Where it goes wrong (ablation):", "", *p.ablation, ""]
    lines += ["### To reproduce", "", *p.program, *p.reproducer,
              "### Urgency", "", "None (found by a fuzzer; no deployment is blocked).", "",
              "### Platform", "", platform.system(), "", "### OS Version", "",
              platform.release(), "", "### ONNX Runtime Installation", "", "Released Package",
              "", "### ONNX Runtime Version or Commit ID", "",
              ", ".join(v for v in p.versions if v.startswith("onnxruntime")) or "unknown", "",
              "### ONNX Runtime API", "", "Python", "", "### Architecture", "",
              {"x86_64": "X64", "AMD64": "X64", "aarch64": "ARM64", "arm64": "ARM64"}.get(
                  platform.machine(), "Other / Unknown"), "",
              "### Execution Provider", "", ep, ""]
    if p.seen or p.collect_env:
        lines += ["### Versions seen and environment", "", *versions_block(p), ""]
    return "\n".join(lines)
