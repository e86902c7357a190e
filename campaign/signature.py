"""Normalized error signatures: the same failure gives the same string across tests.

Numbers, hex addresses, file paths and quoted value names are stripped so that two crashes that
differ only in shapes or temp files bucket together.
"""
from __future__ import annotations

import re

_RULES = [
    (re.compile(r"0x[0-9a-fA-F]+"), "0x?"),
    (re.compile(r"(/[\w.\-+]+)+"), "<path>"),
    (re.compile(r"%?\b[A-Za-z_]*\d+[A-Za-z_\d]*\b"), lambda m: re.sub(r"\d+", "N", m.group())),
    (re.compile(r"-?\d+(\.\d+)?([eE][-+]?\d+)?"), "N"),
    (re.compile(r"\s+"), " "),
]


def normalize(error_class: str, message: str, max_len: int = 200) -> str:
    text = message.strip().splitlines()[0] if message.strip() else ""
    for pattern, repl in _RULES:
        text = pattern.sub(repl, text)
    return f"{error_class}: {text.strip()}"[:max_len]
