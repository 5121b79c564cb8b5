"""Seeded catalogues and the brute-force reference shared by the index tests."""
from __future__ import annotations

import numpy as np


def normalise(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def clustered(n: int, dim: int, n_clusters: int, seed: int, noise: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """``n`` unit vectors around ``n_clusters`` random unit centres; returns (vectors, centres)."""
    rng = np.random.default_rng(seed)
    centres = normalise(rng.standard_normal((n_clusters, dim)))
    x = centres[rng.integers(0, n_clusters, n)] + noise / np.sqrt(dim) * rng.standard_normal((n, dim))
    return normalise(x), centres


def brute_force(x: np.ndarray, ids: np.ndarray, q: np.ndarray, k: int, exclude=None) -> tuple[np.ndarray, np.ndarray]:
    """Reference top-k by full sort: descending score, ties by smaller id, excluded ids dropped."""
    scores = q @ x.T  # [Q, N]
    out_ids = np.full((len(q), k), -1, dtype=np.int64)
    out_s = np.full((len(q), k), -np.inf, dtype=np.float32)
    for r in range(len(q)):
        keep = np.ones(len(ids), bool) if exclude is None else ~np.isin(ids, exclude[r])
        s, i = scores[r][keep], ids[keep]
        order = np.lexsort((i, -s))[:k]
        out_ids[r, : len(order)], out_s[r, : len(order)] = i[order], s[order]
    return out_ids, out_s


def canonical_top(x: np.ndarray, ids: np.ndarray, q: np.ndarray, k: int, exclude=None, allow=None) -> np.ndarray:
    """Top-k ids of every row by the exact index's canonical scores (exact on quantised data): descending, ties by
    smaller id, only eligible ids (not in ``exclude[r]``; in ``allow`` when given); -1 where fewer remain."""
    from twotower.index.exact import canonical_scores

    scores = canonical_scores(q, x, np.tile(np.arange(len(x)), (len(q), 1)))  # [Q, N]
    out = np.full((len(q), k), -1, dtype=np.int64)
    for r in range(len(q)):
        keep = np.ones(len(ids), bool)
        if exclude is not None:
            keep &= ~np.isin(ids, exclude[r])
        if allow is not None:
            keep &= np.isin(ids, allow)
        order = np.lexsort((ids[keep], -scores[r][keep]))[:k]
        out[r, : order.size] = ids[keep][order]
    return out
