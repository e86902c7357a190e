"""report.md follows the compiler's own bug template: each tracker's headings, in its order,
with nothing left for a developer to fill in."""
from __future__ import annotations

import pytest

from campaign.triage.pages.tracker_templates import ReportParts, render, tracker


def _parts() -> ReportParts:
    return ReportParts(
        title="X: wrong result for add", summary=["SUMMARY"], expected=["EXPECTED"],
        actual=["ACTUAL"], ablation=["ABLATION"], program=["PROGRAM"], reproducer=["REPRO"],
        versions=["onnxruntime==1.0", "torch==2.13.0"], fuzzer_notes=["- NOTES"],
        error_log=["LOG"])


@pytest.mark.parametrize("spec, project", [
    ("ort", "microsoft/onnxruntime"), ("ort_cuda?opt_level=basic", "microsoft/onnxruntime"),
    ("tvm", "apache/tvm"),
    ("tvm_torch", "apache/tvm"), ("inductor?dialect=mixed", "pytorch/pytorch"),
    ("onnx_export", "pytorch/pytorch"),
    ("aot_eager", "pytorch/pytorch"), ("mypkg.mod:Backend", "pytorch/pytorch")])
def test_each_backend_goes_to_its_compilers_tracker(spec, project):
    assert tracker(spec) == project


@pytest.mark.parametrize("spec, headings", [
    ("inductor", ["# X: wrong result for add", "### 🐛 Describe the bug", "SUMMARY", "EXPECTED",
                  "ACTUAL", "- NOTES", "#### Ablation", "ABLATION", "#### Minimal reproducer",
                  "PROGRAM", "REPRO", "### Error logs", "LOG", "### Versions",
                  "torch==2.13.0"]),
    ("tvm", ["# [Bug] X: wrong result for add", "SUMMARY", "### Expected behavior", "EXPECTED",
             "### Actual behavior", "ACTUAL", "The error log:", "LOG", "ABLATION", "### Environment", "- OS: ",
             "### Steps to reproduce", "PROGRAM", "REPRO", "### Triage", "* needs-triage"]),
    ("ort", ["# X: wrong result for add", "### Describe the issue", "SUMMARY", "EXPECTED",
             "ACTUAL", "LOG", "ABLATION", "### To reproduce", "PROGRAM", "REPRO", "### Urgency",
             "### Platform", "### OS Version", "### ONNX Runtime Installation",
             "### ONNX Runtime Version or Commit ID", "onnxruntime==1.0", "### ONNX Runtime API",
             "Python", "### Architecture", "### Execution Provider", "Default CPU"]),
])
def test_the_report_has_its_templates_headings_in_order(spec, headings):
    text = render(spec, _parts())
    at, pos = {}, 0
    for h in headings:
        pos = text.find(h, pos)
        assert pos >= 0, f"{h!r} missing after position {max(at.values(), default=0)}"
        at[h] = pos
    assert "<" not in text.replace("<!--", "")  # no placeholder left to fill in
