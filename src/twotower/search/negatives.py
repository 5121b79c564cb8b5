"""Hard-negative mining with a false-negative filter, and a report of what it did.

For each query: retrieve the top ``depth`` documents, skip the first
``skip_top`` ranks, drop the query's known positives, drop candidates scoring
too close to the positive (likely unjudged relevant documents — "false
negatives"), and keep the ``n`` highest-ranked survivors.

Too close means, with ``p`` the best positive's score under the same
retriever and ``s`` the candidate's score::

    s > p * (1 - relative_margin)     (relative threshold; needs p > 0)
    s > p - margin                    (absolute margin)

Works with any retriever exposing ``search(queries, k) -> Results`` and
``score(queries, rows) -> list[array]`` (:class:`~twotower.search.bm25.BM25Retriever`,
:class:`~twotower.search.dense.DenseRetriever`).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Mapping, Protocol, Sequence

import numpy as np

from twotower.errors import DataError
from twotower.results import PAD_ID, Results

__all__ = ["MiningConfig", "MiningReport", "mine_hard_negatives"]

logger = logging.getLogger(__name__)


class _Retriever(Protocol):
    def search(self, queries: Sequence[str], k: int) -> Results: ...

    def score(self, queries: Sequence[str], rows: Sequence[np.ndarray]) -> list[np.ndarray]: ...


@dataclass(frozen=True, kw_only=True)
class MiningConfig:
    n: int = 3  # negatives kept per query
    depth: int = 30  # candidates retrieved per query
    skip_top: int = 0  # ranks 1..skip_top are never used (often unjudged positives)
    relative_margin: float | None = 0.05  # drop s > p * (1 - relative_margin); None disables
    margin: float | None = None  # drop s > p - margin; None disables

    def __post_init__(self) -> None:
        from twotower.config import _check, _check_types  # noqa: PLC0415 - the checks of every config dataclass

        # named as the other configs name their settings ("train.lr: must be > 0"), with the class a Python caller
        # built: "n must be >= 1" and "need 0 <= skip_top < depth" read unlike every other refusal
        _check_types(self, "MiningConfig.")  # n="3" was a TypeError from "<"
        _check(self.n >= 1, "MiningConfig.n", f"must be >= 1, got {self.n}")
        _check(self.depth >= 1, "MiningConfig.depth", f"must be >= 1, got {self.depth}")
        _check(self.skip_top >= 0, "MiningConfig.skip_top", f"must be >= 0, got {self.skip_top}")
        _check(self.skip_top < self.depth, "MiningConfig.skip_top",
               f"must be below MiningConfig.depth ({self.depth}) to leave a candidate to mine, got {self.skip_top}")
        _check(self.relative_margin is None or 0.0 <= self.relative_margin < 1.0, "MiningConfig.relative_margin",
               f"must be in [0, 1) or None, got {self.relative_margin}")
        # NaN passed "< 0" and filtered nothing (refused by _check_types now, as inf)
        _check(self.margin is None or self.margin >= 0, "MiningConfig.margin",
               f"must be >= 0 or None, got {self.margin}")


#: the MiningConfig fields that fill a query short of negatives: deeper candidate lists, and a looser
#: false-negative filter (relative_margin first: the one the commands set)
_FILL_FIELDS = ("depth", "relative_margin", "margin")


def _quantiles(x: list[float]) -> dict[str, float]:
    if not x:
        return {}
    q = np.quantile(np.asarray(x, dtype=np.float64), [0.0, 0.25, 0.5, 0.75, 1.0])
    return {k: round(float(v), 4) for k, v in zip(("min", "p25", "p50", "p75", "max"), q)}


@dataclass
class MiningReport:
    """Counts and score quantiles of one mining pass."""

    queries: int = 0
    candidates: int = 0  # retrieved (query, doc) pairs considered
    skipped_top: int = 0
    dropped_positive: int = 0  # known positives among the candidates
    dropped_too_close: int = 0  # likely false negatives
    kept: int = 0
    unused: int = 0  # valid candidates past the n kept
    queries_short: int = 0  # queries with fewer than n negatives kept
    per_query: list[int] = field(default_factory=list, repr=False)  # negatives kept for each query, in order
    positive_scores: dict[str, float] = field(default_factory=dict)
    kept_scores: dict[str, float] = field(default_factory=dict)
    dropped_scores: dict[str, float] = field(default_factory=dict)

    def summary(self, names: Mapping[str, str] | None = None) -> str:
        """One line of counts and score quantiles. ``names`` maps the :class:`MiningConfig` fields a short query
        can be filled with (``depth``, ``relative_margin``, ``margin``) to what the caller's user types (a CLI
        flag); a field left out is not named. ``None``: the Python API's names (``MiningConfig.depth``, ...)."""
        fill = _fill_hint(names)
        hint = f" ({fill})" if self.queries_short and fill else ""
        return (
            f"mined {self.kept} negatives for {self.queries} queries from {self.candidates} candidates: "
            f"skipped {self.skipped_top} top ranks, dropped {self.dropped_positive} known positives and "
            f"{self.dropped_too_close} too close to the positive (likely false negatives); "
            f"{self.queries_short} queries got fewer than requested{hint}. "
            f"scores: positive {self.positive_scores}, kept {self.kept_scores}, dropped {self.dropped_scores}"
        )


def _fill_hint(names: Mapping[str, str] | None) -> str:
    """``raise --mining-depth or lower --mining-margin to fill them`` (or nothing): the settings that fill a query
    short of negatives, named as ``names`` maps the :class:`MiningConfig` fields (None: the Python API's names)."""
    # the bare field names read like settings of the command that logged them, which has other flags
    names = names if names is not None else {f: f"MiningConfig.{f}" for f in _FILL_FIELDS}
    parts = [f"raise {names['depth']}"] if "depth" in names else []
    loosen = [names[f] for f in _FILL_FIELDS[1:] if f in names]
    if loosen:
        parts.append("lower " + " / ".join(loosen))
    return f"{' or '.join(parts)} to fill them" if parts else ""


def _warn_short(report: MiningReport, cfg: MiningConfig, names: Mapping[str, str] | None,
                needed: int | None = None) -> None:
    """Warn when queries got fewer negatives than asked (``needed``: than a use of them needs, where fewer than the
    ``cfg.n`` mined do: rerank train mines a pool for all its epochs and draws --negatives of it each epoch), and
    why: said at INFO alone (hidden under -q), a run with --mining-depth 2 --negatives 3 mined 0.7 per query and its
    summary still read "3 hard negatives per query"."""
    need = cfg.n if needed is None else needed
    short = sum(k < need for k in report.per_query)
    if not short:
        return
    fill = _fill_hint(names)
    logger.warning(
        "%d of the %d queries got fewer hard negatives than the %d %s (%.2f per query on average, fewest %d): the "
        "top %d candidates of each query held %d in all, %d of them known positives and %d too close to the "
        "positive (likely false negatives)%s", short, report.queries, need,
        "asked" if needed is None else "each epoch draws",
        report.kept / report.queries, min(report.per_query), cfg.depth, report.candidates,
        report.dropped_positive, report.dropped_too_close, f"; {fill}" if fill else "")


def _corpus_size(retriever: _Retriever) -> int | None:
    """The documents ``retriever`` searches (BM25's ``n_docs``, a dense retriever's corpus vectors), None when it
    does not say."""
    n = getattr(retriever, "n_docs", None)
    if isinstance(n, int):
        return n
    emb = getattr(retriever, "doc_embeddings", None)
    return len(emb) if emb is not None else None


def mine_hard_negatives(
    queries: Sequence[str],
    positives: Sequence[np.ndarray],
    retriever: _Retriever,
    config: MiningConfig | None = None,
    *,
    names: Mapping[str, str] | None = None,
    needed: int | None = None,
) -> tuple[list[np.ndarray], MiningReport]:
    """Hard negatives (corpus rows, hardest first) for each query, and a :class:`MiningReport`.

    ``positives[q]`` are query ``q``'s relevant corpus rows; they are never
    returned as negatives. ``names``: what the logged summary calls the settings that fill a short query
    (:meth:`MiningReport.summary`), e.g. a command's flags. ``needed``: how many a query needs at least, where
    fewer than ``config.n`` serve (a pool drawn from each epoch); a query below it is warned of (default n).
    """
    cfg = config or MiningConfig()
    if len(queries) != len(positives):
        raise DataError(f"{len(queries)} queries but {len(positives)} positive lists")
    pos_rows = [np.asarray(p, dtype=np.int64).ravel() for p in positives]
    if any(p.size == 0 for p in pos_rows):
        raise DataError("every query needs at least one positive row to mine against")
    n_docs = _corpus_size(retriever)
    if n_docs is not None:  # named as the caller knows it: the search's own refusal named its `k`
        from twotower.search.checks import check_depth  # noqa: PLC0415

        # a Python caller's setting, named as MiningConfig names its own ("config.depth" named a parameter)
        check_depth(cfg.depth, (names or {}).get("depth", "MiningConfig.depth"), n_docs)
    results = retriever.search(list(queries), cfg.depth)  # [Q, depth]
    use_threshold = cfg.relative_margin is not None or cfg.margin is not None
    pos_scores = retriever.score(list(queries), pos_rows) if use_threshold else None
    report = MiningReport(queries=len(queries))
    all_pos, kept_s, drop_s = [], [], []
    negatives: list[np.ndarray] = []
    for q in range(len(queries)):
        ids, scores = results.ids[q], results.scores[q]
        valid = ids != PAD_ID
        report.candidates += int(valid.sum())
        ref = float(np.max(pos_scores[q])) if pos_scores is not None else None
        if ref is not None:
            all_pos.append(ref)
        out: list[int] = []
        for rank, (d, s) in enumerate(zip(ids[valid], scores[valid])):
            if rank < cfg.skip_top:
                report.skipped_top += 1
                continue
            if d in pos_rows[q]:
                report.dropped_positive += 1
                continue
            too_close = False
            if ref is not None:
                if cfg.relative_margin is not None and ref > 0 and s > ref * (1.0 - cfg.relative_margin):
                    too_close = True
                if cfg.margin is not None and s > ref - cfg.margin:
                    too_close = True
            if too_close:
                report.dropped_too_close += 1
                drop_s.append(float(s))
                continue
            if len(out) < cfg.n:
                out.append(int(d))
                kept_s.append(float(s))
            else:
                report.unused += 1
        report.kept += len(out)
        report.queries_short += int(len(out) < cfg.n)
        report.per_query.append(len(out))
        negatives.append(np.asarray(out, dtype=np.int64))
    report.positive_scores = _quantiles(all_pos)
    report.kept_scores = _quantiles(kept_s)
    report.dropped_scores = _quantiles(drop_s)
    logger.info("%s", report.summary(names))
    _warn_short(report, cfg, names, needed)
    return negatives, report
