"""A short fingerprint of a sparse matrix's non-zero pattern, for caches keyed by the data they were computed on."""
from __future__ import annotations

import hashlib

import scipy.sparse as sp

__all__ = ["matrix_digest"]


def matrix_digest(m: sp.spmatrix | sp.sparray | None) -> str | None:
    """sha256 of a sparse matrix's shape and non-zero pattern (what tuning on binarised data reads), 16 hex
    digits; None for None."""
    if m is None:
        return None
    m = sp.csr_matrix(m)
    m.sort_indices()
    h = hashlib.sha256(repr(m.shape).encode())
    h.update(m.indptr.astype("int64").tobytes())
    h.update(m.indices.astype("int64").tobytes())
    return h.hexdigest()[:16]
