"""Arrays as .npz bytes, never pickle: the on-disk form of a test's values (a finding's
`inputs.npz`, a gradient test's cotangents, a transform's tangents)."""
from __future__ import annotations

import io
import zipfile
from collections.abc import Mapping

import numpy as np


def npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    """An .npz archive (never pickle: `allow_pickle` stays off for readers), written as
    `np.savez` writes one (an uncompressed zip64 archive of .npy members) but with the names
    never passed as keyword arguments: a value named `file` or `allow_pickle` (a valid GraphIR
    name) would be taken for `np.savez`'s own parameter. A name may hold `/` (`s0/out`)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, a in arrays.items():
            with zf.open(name + ".npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.asanyarray(a), allow_pickle=False)
    return buf.getvalue()
