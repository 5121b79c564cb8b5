"""Fusing several ranked lists of the same queries into one.

Each rule is a small pure function over :class:`~twotower.results.Results`
(ids = corpus rows), chosen by name through :data:`FUSIONS`:

* ``rrf``: reciprocal rank fusion (Cormack et al., SIGIR 2009),
  ``score(d) = sum_i 1 / (k + rank_i(d))`` with 1-based ranks; a list that
  does not contain ``d`` contributes nothing.
* ``interpolation``: ``score(d) = sum_i w_i * norm_i(s_i(d))`` where scores
  are normalised per query and per list (``minmax`` -> [0, 1] or ``zscore``);
  a list that does not contain ``d`` contributes its row minimum (0 for
  min-max) less :data:`MISSING_BELOW` (1e-9), i.e. ``d`` counts as that list's worst retrieved document, behind
  it on a tie (with ``w = 1`` for BM25 its last match had tied every document sharing no query word). A
  min-max row of one hit (or of tied hits) maps to 1 and a missing ``d`` still
  gets 0: the one document BM25 matched keeps its lexical credit. A z-score
  row of one hit (or of tied hits) has no spread (std 0): its hits get z = 0
  and a missing ``d`` gets :data:`ZSCORE_FLAT_MISSING` (-1), so that lone
  match keeps a vote of the list's weight too (never NaN, never dropped).

Ties in the fused score (e.g. RRF: rank 1 in one list only, in each of two
lists) are broken by the smaller corpus row, so the order is deterministic.

:func:`tune_fusion` picks the rule and its weight on validation NDCG@10.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Any, Callable, Sequence

import numpy as np

from twotower.config import MAX_RRF_K, SearchConfig
from twotower.errors import ConfigError, DataError
from twotower.results import PAD_ID, Results

__all__ = [
    "NORMALIZATIONS",
    "FUSIONS",
    "minmax",
    "zscore",
    "ZSCORE_FLAT_MISSING",
    "rrf",
    "score_interpolation",
    "FusionChoice",
    "as_fusion",
    "as_hybrid_fusion",
    "tune_fusion",
    "fusion_from_config",
    "fuse_with_head",
]

logger = logging.getLogger(__name__)


def minmax(scores: np.ndarray) -> np.ndarray:
    """Map valid scores of one row to [0, 1]; a constant row maps to 1."""
    lo, hi = scores.min(), scores.max()
    if hi - lo <= 0:
        return np.ones_like(scores)
    return (scores - lo) / (hi - lo)


def zscore(scores: np.ndarray) -> np.ndarray:
    """Standardise valid scores of one row; a constant row (one score, or all equal) maps to 0."""
    with np.errstate(invalid="ignore"):
        sd = scores.std()
    if not sd > 0:  # also a NaN std (a non-finite score): 0, never a row of NaN
        return np.zeros_like(scores)
    return (scores - scores.mean()) / sd


#: how far below a list's worst retrieved document (in normalised units) a document it did not retrieve counts:
#: a tie-break, far below the 6 decimals scores are shown with, so that a retrieved document always leads
MISSING_BELOW = 1e-9

#: z-score interpolation: what a document missing from a list with no spread (one hit, or tied hits: std 0) gets,
#: in units of that list's weight; its hits get 0, so they rank one unit above the documents it did not retrieve.
ZSCORE_FLAT_MISSING = -1.0


NORMALIZATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {"minmax": minmax, "zscore": zscore}


def _check(results_list: Sequence[Results]) -> int:
    if not results_list:
        raise ConfigError("fusion needs at least one Results")
    q = len(results_list[0])
    if any(len(r) != q for r in results_list):
        raise DataError(f"all Results must cover the same queries; got {[len(r) for r in results_list]} rows")
    return q


def _fuse_rows(contribs: list[tuple[np.ndarray, np.ndarray, float]], k: int) -> tuple[np.ndarray, np.ndarray]:
    """Sum per-doc contributions ``(ids, values, missing_value)`` of one query."""
    all_ids = np.unique(np.concatenate([ids for ids, _, _ in contribs]))
    total = np.zeros(all_ids.size, dtype=np.float64)
    for ids, values, missing in contribs:
        part = np.full(all_ids.size, missing, dtype=np.float64)
        part[np.searchsorted(all_ids, ids)] = values
        total += part
    return all_ids, total


def _assemble(rows: list[tuple[np.ndarray, np.ndarray]], k: int) -> Results:
    ids = np.full((len(rows), k), PAD_ID, dtype=np.int64)  # [Q, k]
    scores = np.full((len(rows), k), -np.inf, dtype=np.float32)
    for q, (i, s) in enumerate(rows):
        # ordered on the float64 sums, cast to float32 only for the scores shown: sorted as float32, RRF's
        # 1 / (k + r) sums tied (ranks 1 and 3 against 2 and 2 from k=10,000; adjacent ranks of one list from
        # k=3e7) and the smaller corpus row won, whatever the ranks said
        order = np.lexsort((i, -np.asarray(s, dtype=np.float64)))[:k]
        ids[q, : order.size], scores[q, : order.size] = i[order], np.asarray(s)[order]
    return Results(ids, scores)


def rrf(results_list: Sequence[Results], k: int = SearchConfig.rrf_k, *, top_k: int | None = None) -> Results:
    """Reciprocal rank fusion; ``top_k`` defaults to the widest input."""
    n_q = _check(results_list)
    # finite: k=inf fused every document to 1 / inf = 0, and the list came back in corpus order, without a word
    # at most MAX_RRF_K: past it even float64 sums of 1 / (k + rank) tie (ranks 1 and 3 against 2 and 2 from
    # k~1e8), so the fused order fell to corpus-row order; k=1e6 already orders like the k -> inf limit
    if (isinstance(k, bool) or not isinstance(k, (int, float, np.integer, np.floating))
            or not 0 <= k <= MAX_RRF_K):
        raise ConfigError(f"rrf k must be a number in [0, {MAX_RRF_K:,}], got {k!r} (past {MAX_RRF_K:,} the fused "
                          "scores 1 / (k + rank) differ below floating-point resolution and the order is lost)")
    top_k = top_k or max(r.shape[1] for r in results_list)
    rows = []
    for q in range(n_q):
        contribs = []
        for r in results_list:
            ids, _ = r.row(q)
            ranks = np.arange(1, ids.size + 1, dtype=np.float64)
            contribs.append((ids, 1.0 / (k + ranks), 0.0))
        rows.append(_fuse_rows(contribs, top_k))
    return _assemble(rows, top_k)


def _missing(z: np.ndarray, normalization: str) -> float:
    """What a document one list did not retrieve counts for in it, given the list's normalised scores ``z``."""
    # a missing doc counts as the row's worst, never above the normalised floor (0): a constant min-max
    # row (one BM25 hit, e.g. a rare name) maps to 1, and its minimum would credit every missing doc with
    # the full weight, erasing that list's vote (zscore rows are centred, so their minimum is <= 0 already)
    missing = min(float(z.min()), 0.0)
    if normalization == "zscore" and not np.any(z):  # no spread: its minimum, 0, would erase its vote
        missing = ZSCORE_FLAT_MISSING
    # just below the worst retrieved: the list's last hit tied every document it did not retrieve, so with the other
    # lists' weights 0 (--bm25-weight 1) or tied, BM25's last match ranked below documents sharing no query word
    return missing - MISSING_BELOW


def score_interpolation(
    results_list: Sequence[Results],
    weights: Sequence[float],
    normalization: str = "minmax",
    *,
    top_k: int | None = None,
) -> Results:
    """Weighted sum of per-query normalised scores (see module docstring)."""
    n_q = _check(results_list)
    if len(weights) != len(results_list):
        raise ConfigError(f"need one weight per Results ({len(results_list)}), got {len(weights)}")
    if normalization not in NORMALIZATIONS:
        raise ConfigError(f"normalization must be one of {sorted(NORMALIZATIONS)}, got {normalization!r}")
    if not all(isinstance(w, (int, float, np.integer, np.floating)) and not isinstance(w, bool) and np.isfinite(w)
               for w in weights):  # a NaN weight would fuse every score to NaN, silently
        raise ConfigError(f"weights must be finite numbers, got {list(weights)!r}")
    # all zero fused every document to 0 (the list in corpus order); a negative weight ranked that list upside down
    if any(w < 0 for w in weights) or not any(w > 0 for w in weights):
        raise ConfigError(f"weights must be >= 0, at least one of them > 0, got {list(weights)!r}")
    norm = NORMALIZATIONS[normalization]
    top_k = top_k or max(r.shape[1] for r in results_list)
    rows = []
    for q in range(n_q):
        contribs = []
        for r, w in zip(results_list, weights):
            ids, s = r.row(q)
            if ids.size == 0:
                continue
            z = norm(s.astype(np.float64))
            contribs.append((ids, w * z, w * _missing(z, normalization)))
        if not contribs:
            rows.append((np.empty(0, dtype=np.int64), np.empty(0)))
            continue
        rows.append(_fuse_rows(contribs, top_k))
    return _assemble(rows, top_k)


FUSIONS: dict[str, Callable[..., Results]] = {"rrf": rrf, "interpolation": score_interpolation}
_PARAMS = {"rrf": f"rrf takes params {{'k': number in [0, {MAX_RRF_K:,}]}}",
           "interpolation": "interpolation takes params {'weights': [w >= 0, ...] (one per list), "
                            "'normalization': 'minmax' or 'zscore'}"}


@dataclass(frozen=True, kw_only=True)
class FusionChoice:
    """A fusion rule and its parameters, e.g. ``name="interpolation", params={"weights": [0.3, 0.7], ...}``."""

    name: str
    params: dict = field(default_factory=dict)
    valid_ndcg10: float | None = None

    def __post_init__(self) -> None:
        if self.name not in FUSIONS:
            raise ConfigError(f"unknown fusion {self.name!r}; choose one of {sorted(FUSIONS)}")
        if not isinstance(self.params, dict):
            raise ConfigError(f"fusion params must be a dict, got {self.params!r}")
        missing = {"interpolation": ("weights", "normalization")}.get(self.name, ())
        if any(key not in self.params for key in missing):  # describe() and the head's floor read both
            raise ConfigError(f"fusion {self.name!r} with params {self.params!r} cannot be applied (no "
                              f"{' or '.join(repr(k) for k in missing if k not in self.params)}); {_PARAMS[self.name]}")
        # fused once on one-document lists, now: params={"kk": 60} or an interpolation without weights was accepted
        # and failed with a TypeError / KeyError at the first query
        weights = self.params.get("weights")
        n_lists = len(weights) if self.name == "interpolation" and isinstance(weights, (list, tuple)) else 2
        probe = Results(np.zeros((1, 1), dtype=np.int64), np.ones((1, 1), dtype=np.float32))
        try:
            self.apply([probe] * max(n_lists, 1), top_k=1)
        except (ConfigError, DataError, TypeError, ValueError, KeyError) as e:
            raise ConfigError(f"fusion {self.name!r} with params {self.params!r} cannot be applied ({e}); "
                              f"{_PARAMS[self.name]}") from None

    def apply(self, results_list: Sequence[Results], *, top_k: int | None = None) -> Results:
        """``results_list`` (one ``Results`` per retriever, the same queries) fused by this rule into ``top_k`` hits."""
        return FUSIONS[self.name](results_list, **self.params, top_k=top_k)

    def describe(self) -> str:
        """One line for logs and tables, e.g. ``rrf(k=60)`` or ``zscore interpolation (w=0.70, 0.30)``."""
        if self.name == "rrf":
            return f"rrf(k={self.params.get('k', SearchConfig.rrf_k)})"
        w = ", ".join(f"{x:.2f}" for x in self.params["weights"])
        return f"{self.params['normalization']} interpolation (w={w})"


def as_fusion(fusion: "FusionChoice | Mapping[str, Any]") -> FusionChoice:
    """``fusion`` as a :class:`FusionChoice`: one already, or the ``{"name": ..., "params": {...}}`` a search index's
    meta.json stores (what :class:`~twotower.search.SearchIndex` took, while ``search_evaluate`` took the other)."""
    if isinstance(fusion, FusionChoice):
        return fusion
    if isinstance(fusion, Mapping) and set(fusion) <= {"name", "params", "valid_ndcg10"} and "name" in fusion:
        return FusionChoice(name=fusion["name"], params=dict(fusion.get("params") or {}),
                            valid_ndcg10=fusion.get("valid_ndcg10"))
    raise ConfigError(f"fusion must be a FusionChoice or a dict {{'name': ..., 'params': {{...}}}}, got {fusion!r}")


#: the lists a hybrid search fuses, in this order (SearchIndex.search, search_evaluate)
HYBRID_LISTS = ("BM25's", "the dense one")


def as_hybrid_fusion(fusion: "FusionChoice | Mapping[str, Any]") -> FusionChoice:
    """``fusion`` (:func:`as_fusion`) checked as a hybrid search applies it: to :data:`HYBRID_LISTS`, two lists.

    A FusionChoice is checked on as many lists as it has weights, so an interpolation of 3 was accepted: the corpus
    was encoded and the index saved, then every hybrid query failed ("need one weight per Results (2), got 3") and
    SearchIndex.load refused the saved index whole."""
    choice = as_fusion(fusion)
    weights = choice.params.get("weights")
    if choice.name == "interpolation" and len(weights) != len(HYBRID_LISTS):
        raise ConfigError(f"fusion {choice.name!r} with params {choice.params!r} cannot be applied to a hybrid search, "
                          f"which fuses {len(HYBRID_LISTS)} lists ({' and '.join(HYBRID_LISTS)}), with "
                          f"{len(weights)} weights; give one weight per list, [w_bm25, w_dense]")
    return choice


def _floor(choice: FusionChoice, results_list: Sequence[Results]) -> np.ndarray:
    """Per query ``[Q]``, the fused score of a document none of the lists retrieved (RRF: 0)."""
    floor = np.zeros(len(results_list[0]), dtype=np.float64)
    if choice.name != "interpolation":
        return floor
    norm = NORMALIZATIONS[choice.params["normalization"]]
    for q in range(floor.size):
        for r, w in zip(results_list, choice.params["weights"]):
            _, s = r.row(q)
            if s.size:
                floor[q] += w * _missing(norm(s.astype(np.float64)), choice.params["normalization"])
    return floor


def fuse_with_head(choice: FusionChoice, results_list: Sequence[Results], *, top_k: int,
                   head: int = SearchConfig.depth) -> Results:
    """``choice`` fused over the first ``head`` hits of each list (the depth `search evaluate` measures), whatever
    ``top_k``; each list holds at least ``min(top_k, head)`` hits, more only for a ``top_k`` past ``head``.

    Fusing deeper lists re-ranks their heads (RRF adds the deep ranks' votes, min-max moves each list's floor), so a
    hybrid search for k=200 answered another top 10 than one for k=10 (88 of 104 SciFact test queries with min-max
    fusion). Here the documents the heads hold (at least the first ``head`` hits) come first, in an order that never
    depends on ``top_k``; a longer list goes on with the other documents of the deeper lists in their own fused
    order, at the score the head's fusion gives a document no head retrieved (all equal: it does not order them).
    """
    first = choice.apply([Results(r.ids[:, :head], r.scores[:, :head]) for r in results_list], top_k=top_k)
    if max(r.shape[1] for r in results_list) <= head or not (first.ids == PAD_ID).any():
        return first
    deep = choice.apply(results_list, top_k=top_k)
    floor = _floor(choice, [Results(r.ids[:, :head], r.scores[:, :head]) for r in results_list])
    ids, scores = first.ids.copy(), first.scores.copy()
    for q in range(len(first)):
        n = int((ids[q] != PAD_ID).sum())
        held = set(ids[q, :n].tolist())
        more = [d for d in deep.row(q)[0].tolist() if d not in held][: top_k - n]
        ids[q, n : n + len(more)] = more
        scores[q, n : n + len(more)] = floor[q]
    return Results(ids, scores)


def fusion_from_config(cfg: SearchConfig) -> FusionChoice:
    """The fusion ``cfg`` names: RRF with ``cfg.rrf_k``, or min-max / z-score interpolation with BM25 weight
    ``cfg.bm25_weight`` (the dense list gets ``1 - w``)."""
    if cfg.fusion == "rrf":
        return FusionChoice(name="rrf", params={"k": cfg.rrf_k})
    w = float(cfg.bm25_weight)
    return FusionChoice(name="interpolation", params={"weights": [w, 1.0 - w], "normalization": cfg.fusion})


def tune_fusion(
    results_list: Sequence[Results],
    relevant: Sequence[np.ndarray],
    *,
    weight_grid: Sequence[float] = tuple(np.round(np.linspace(0.0, 1.0, 11), 2)),
    rrf_ks: Sequence[int] = (10, 30, SearchConfig.rrf_k),
    normalizations: Sequence[str] = ("minmax", "zscore"),
) -> FusionChoice:
    """Choose the fusion with the best mean NDCG@10 on validation queries.

    Two inputs only for the weight grid: ``weights = (w, 1 - w)``. Ties go to
    the candidate tried first (RRF, then smaller ``w``).
    """
    from twotower.evaluation.metrics import ndcg_at_k  # noqa: PLC0415

    if len(results_list) != 2:
        raise ConfigError(f"tune_fusion searches weights for exactly 2 retrievers, got {len(results_list)}")
    cands: list[FusionChoice] = [FusionChoice(name="rrf", params={"k": int(k)}) for k in rrf_ks]
    for norm in normalizations:
        for w in weight_grid:
            cands.append(FusionChoice(name="interpolation",
                                      params={"weights": [float(w), float(1 - w)], "normalization": norm}))
    best, best_score = None, -1.0
    for c in cands:
        fused = c.apply(results_list, top_k=10)
        score = float(np.nanmean(ndcg_at_k(fused.ids, relevant, 10)))
        if score > best_score + 1e-12:
            best, best_score = c, score
    assert best is not None
    logger.info("fusion chosen on validation: %s (NDCG@10 %.4f)", best.describe(), best_score)
    return FusionChoice(name=best.name, params=best.params, valid_ndcg10=best_score)
