"""The compiler versions a backend runs on, as installed here: what the bug database records
per sighting of a bug (`campaign.triage.bugdb.store`) and per re-check (`campaign.triage.bugdb.recheck`).

Result rows carry no version column, so the versions are read where the triage (or the
re-check) runs, which is where the campaign ran: from the installed distributions'
metadata (`importlib.metadata`), without importing the libraries themselves (torch takes
seconds to import). A backend spec maps to the distributions its stack is made of by its
name's prefix (`ort_cuda` is ORT's); a backend loaded by dotted path (a user's own, or a test
double) gets the whole stack dynsmith tests.
"""
from __future__ import annotations

import importlib.metadata

#: distributions per backend name prefix (longest prefix first: `tvm_torch` before `tvm`)
STACKS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("tvm_torch", ("apache-tvm", "torch")),
    ("tvm", ("apache-tvm", "onnx")),
    ("ort", ("onnxruntime",)),
    ("inductor", ("torch",)),
    ("onnx_export", ("torch", "onnxscript", "onnx-ir", "onnxruntime")),
    ("eager", ("torch",)),
)
#: a backend of no known name: the whole stack
ALL = ("torch", "onnxruntime", "apache-tvm")


def distributions(spec: str) -> tuple[str, ...]:
    """The distributions backend `spec` (`name?options`) runs on."""
    name = spec.partition("?")[0]
    for prefix, dists in STACKS:
        if name == prefix or name.startswith(prefix + "_"):
            return dists
    return ALL


def installed(spec: str) -> list[str]:
    """`name==version` of each distribution of `spec`'s stack installed here (sorted; one
    that is not installed is left out)."""
    out = []
    for dist in distributions(spec):
        try:
            out.append(f"{dist}=={importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            continue
    return sorted(out)
