"""Parts of the standalone `repro.py` scripts that are plain Python files: each is checked by
ruff and mypy like any module, imports only numpy, torch and the standard library, and is
copied verbatim into a repro (`source(name)`)."""
from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).parent


def source(name: str) -> str:
    """The text of part `name` (a module of this package), for a repro script: without its
    `from __future__` line, which must open a file."""
    text = (HERE / f"{name}.py").read_text()
    return "\n".join(line for line in text.splitlines()
                     if line != "from __future__ import annotations") + "\n"
