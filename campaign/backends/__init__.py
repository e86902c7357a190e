"""Backends under test, registered by name (see `make_backend` for names, options and dotted
paths to users' own backends). Importing this package registers every built-in backend; the
heavy libraries (tvm, torch._dynamo, the ONNX exporter) are imported only when a backend of
theirs is prepared or evaluates."""
from campaign.backends import eager, inductor, onnx_export, ort, tvm, tvm_torch  # noqa: F401  (register)
from campaign.backends.base import (
                                    BACKENDS,
                                    Backend,
                                    BackendInfo,
                                    BackendResult,
                                    KnownUnsupported,
                                    info_of,
                                    make_backend,
                                    register,
)
from campaign.backends.configs import parse_spec

__all__ = ["BACKENDS", "Backend", "BackendInfo", "BackendResult", "KnownUnsupported", "info_of",
           "make_backend", "parse_spec", "register"]
