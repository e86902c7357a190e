"""The bug database across campaigns (`triage.db`, docs/triage.md): its store, the sightings a
triage adds, re-checks, the findings' notes imported, its commands."""
