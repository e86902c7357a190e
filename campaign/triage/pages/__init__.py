"""The documents the triage writes: report.md per bug, the findings' notes and
docs/findings.md."""
