"""Backends under test, registered by name (see `make_backend`)."""
from campaign.backends.base import BACKENDS, Backend, BackendResult, make_backend
from campaign.backends import ort  # noqa: F401  (registers ort, ort_noopt)

__all__ = ["BACKENDS", "Backend", "BackendResult", "make_backend"]
