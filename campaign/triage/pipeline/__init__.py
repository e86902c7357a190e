"""The triage pipeline: bucket the findings, reduce them, write bug folders with standalone
reproducers, the bugs table (docs/triage.md)."""
