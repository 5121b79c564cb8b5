"""Pick an index and the cheapest setting of it that reaches a target recall, against exact ground truth.

Legend: ``Q`` queries, ``K`` top-k, ``N`` catalogue vectors, ``D`` dim.

For each candidate index type the runtime knob is swept (``nprobe`` 1, 2, 4,
... up to ``nlist``; ``efSearch`` 16 ... 1024; for refine indexes also
``k_factor`` 1 ... 16), and each setting gets recall@k against
:class:`~twotower.index.exact.ExactIndex` plus batched QPS and single-query
latency p50/p99. A sweep stops once it meets the target (one more point is
kept for the plot) or its recall stops improving.

Within one index the chosen setting is the cheapest that meets the target:
the smallest ``nprobe`` / ``efSearch``, then the smallest ``k_factor``
(re-scoring ``k * k_factor`` candidates costs little next to scanning lists or
walking the graph). Recall is a function of the data and the seed, timing is
not: choosing by measured QPS let noise pick ``efSearch`` 24 over 16 in one of
two builds of the same run (110k vs 87k QPS), so the two served different
results. If no setting meets the target, the cheapest setting within
:data:`MISSED_RECALL_TOLERANCE` of the best recall is chosen (more lists for
the fourth decimal place is no bargain). ``params`` pins one setting,
measured as given.

Between index types (``index="auto"``, ``candidates``) the choice is by
measured batched QPS, as speed is what sets them apart, with a margin against
noise: a later candidate replaces an earlier one only when it is more than
:attr:`IndexPolicy.kind_margin` faster. When none meets the target, the same
:data:`MISSED_RECALL_TOLERANCE` holds between types as within one: a later type
replaces the earlier choice when that choice falls more than the tolerance
below the best recall measured so far, or when both are within it and the
later one is more than the margin faster (another type's fourth decimal place
of recall is no better a bargain than more lists of one type).

With ``index="auto"`` exact search is measured first and chosen whenever its
single-query p99 latency fits :attr:`IndexPolicy.exact_p99_ms` (an
approximation nobody needs is not built); the report's ``reason`` says which
way it went and on what measurement.

Recall is tie-aware (as in FAISS ``contrib/evaluation.py``): a returned item
counts as a hit when its exact score is at least the exact k-th score minus
``1e-6``, so equally good items are never punished for their ids.
"""
from __future__ import annotations

import dataclasses
import logging
import math
import re
import time
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Any, Iterator, Sequence

import numpy as np

from twotower.config import MAX_K, MAX_THREADS, SERVE_THREADS
from twotower.errors import ConfigError, DataError
from twotower.index.base import VectorIndex, check_ids, check_queries, check_vectors
from twotower.index.exact import ExactIndex
from twotower.index.faiss_index import SHORTCUTS, FaissIndex, factory_knobs
from twotower.results import PAD_ID, Results
from twotower.utils.wording import plural

__all__ = [
    "autotune", "tune_index", "TuneReport", "TuneRow", "IndexPolicy", "tie_aware_recall", "exact_ground_truth",
    "measure_speed", "check_pin", "check_pin_early", "MISSED_RECALL_TOLERANCE", "MISSED_TARGET_ADVICE",
    "params_text", "setting_text", "distinct_queries", "queries_note",
]

log = logging.getLogger(__name__)

AUTO_CANDIDATES = ("flat", "ivf", "hnsw", "ivfpq")
# half-octave steps: a power-of-two grid jumps past the cheapest setting that meets the
# target by up to 2x in cost (e.g. nprobe 64 -> 128 halves the QPS)
EF_SEARCH = (16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024)
K_FACTORS = (1, 2, 4, 8, 16)
TIE_EPS = 1e-6
#: When no setting meets the target: the cheapest setting within this much recall of the best is chosen. Once
#: recall has plateaued the sweep's last steps buy almost nothing at full cost (200,000 x 64 IVF-PQ: nprobe 1536
#: for recall 0.6904 against 0.6903 at nprobe 1024, 1.5x the lists scanned per query); 0.002 is 2 hits in 1,000
#: tuning queries at k=10, within what a different query sample moves recall by.
MISSED_RECALL_TOLERANCE = 0.002
#: What the warning of a missed recall target suggests, in autotune's own argument names; a caller with other
#: names for them (`twotower index build`: its flags) passes ``advice`` instead
MISSED_TARGET_ADVICE = ("raise the knobs, search exactly (index='flat', or 'flat' among the candidates of index='auto') "
                        "or lower target_recall")
#: rounds of single-query timings behind ``--index auto``'s exact-or-approximate decision (each query's fastest)
EXACT_LATENCY_ROUNDS = 3
#: Tuning queries are counted as one when their directions agree to this many decimals in every coordinate
#: (inner-product search ranks by direction): below half of the queries distinct, autotune warns
DISTINCT_QUERY_DECIMALS = 3


def distinct_queries(queries: np.ndarray, decimals: int = DISTINCT_QUERY_DECIMALS) -> int:
    """How many of ``queries[Q, D]`` point in distinct directions (rounded to ``decimals``); about 8 ms at 1,000 x 128."""
    norms = np.linalg.norm(queries, axis=1, keepdims=True)  # [Q, 1]
    unit = queries / np.where(norms > 0, norms, 1.0)
    return int(np.unique(np.round(unit, decimals) + 0.0, axis=0).shape[0])  # + 0.0: -0.0 and 0.0 are one


def _warn_repeated_queries(queries: np.ndarray) -> int:
    """Warn when most tuning queries repeat a few vectors (users the user tower cannot tell apart: the same history
    and features): recall measured on 1,000 queries holding 12 distinct vectors rests on 12, and said nothing.
    Returns the distinct count (:func:`distinct_queries`), which the report records."""
    n = queries.shape[0]
    distinct = distinct_queries(queries)
    if 2 * distinct < n:
        log.warning("autotune: the %s hold only %s (the others repeat them: users with one embedding, e.g. the same "
                    "history and features), so the recall measured against exact search rests on %s, not %s, and "
                    "may not hold for queries unlike them", plural(n, "tuning query", "tuning queries"),
                    plural(distinct, "distinct vector"), plural(distinct, "query", "queries"), f"{n:,}")
    return distinct


#: distinct tuning queries below which the measured recall is warned to be loose (its standard error at k=10 and
#: recall 0.95: about 0.007 at 100 queries, 0.03 at 5, where a build read 0.96 for a true 0.93 and serve trusted it)
FEW_TUNING_QUERIES = 100


def _warn_few_queries(distinct: int, k: int) -> None:
    """Warn when the recall rests on few queries: ``--queries 5`` measured 0.9600 ("meets 0.95") for an index whose
    recall over every user was 0.9296, and ``serve`` trusts the figure."""
    if distinct >= FEW_TUNING_QUERIES:
        return
    spread = math.sqrt(0.95 * 0.05 / max(distinct * k, 1))  # the standard error of a recall near 0.95
    log.warning("autotune: the recall is measured on %s, so it is loose (about +-%.3f at recall 0.95, one standard "
                "error) and an index tuned on it may miss the target over all users; --queries %d or more measures "
                "it closely", plural(distinct, "distinct query", "distinct queries"), spread,
                FEW_TUNING_QUERIES * 10)


def queries_note(n_queries: Any, n_distinct: Any = None) -> str:
    """``1,000 queries, 376 distinct``: what a recall was measured on, as ``tune.json`` records it (a record written
    before ``n_distinct_queries`` was kept gives the count alone)."""
    queries = plural(n_queries, "query", "queries") if isinstance(n_queries, int) else f"{n_queries} queries"
    return f"{queries}, {n_distinct:,} distinct" if isinstance(n_distinct, int) else queries


@dataclass(frozen=True, kw_only=True)
class IndexPolicy:
    """How an index is tuned (``twotower index build``, :func:`autotune`): every default once.

    ``target_recall``: recall@``k`` against exact search that an approximate
    index must reach, measured on ``tune_queries`` user vectors.
    ``exact_p99_ms``: ``--index auto`` settles for exact search when its
    single-query p99 latency is at most this (5 ms: a recommendation
    request's whole budget is ~10 ms at p99). Every single-query latency,
    exact and approximate, is measured over ``latency_queries`` queries, on
    ``latency_threads`` threads (serve's default per request; None: the
    build's own count): timed on the build's two threads, exact search's p99
    read nothing like what a request served on one thread takes, and that p99
    decides whether ``auto`` serves exact search.
    ``log_every_s``: seconds between progress lines while vectors are added to
    a candidate (an HNSW graph over a million items takes minutes); None: none
    (the CLI passes the run's ``train.log_every_s``).
    ``kind_margin``: between index types meeting the target, a later
    candidate replaces an earlier one only when its batched QPS is more than
    this fraction higher (0.1: 10%), so a near tie does not flip between two
    builds on timing noise.
    ``distributed_max_train``: the cap on FAISS's training sample of an index built across ranks under torchrun
    when ``max_train`` is not given (one process trains on every vector unless capped).
    """

    target_recall: float = 0.95
    k: int = 10
    tune_queries: int = 1000
    seed: int = 0  # of the tuning queries' sample, FAISS's training sample and its k-means / HNSW draws
    exact_p99_ms: float = 5.0
    latency_queries: int = 200
    latency_threads: int | None = SERVE_THREADS
    log_every_s: float | None = None
    kind_margin: float = 0.1
    distributed_max_train: int = 100_000

    def __post_init__(self) -> None:
        if isinstance(self.kind_margin, bool) or not isinstance(self.kind_margin, (int, float)) \
                or not 0.0 <= self.kind_margin < 1.0:
            raise ConfigError(f"IndexPolicy.kind_margin: must be in [0, 1), got {self.kind_margin!r}")
        if self.log_every_s is not None and not (isinstance(self.log_every_s, (int, float))
                                                 and not isinstance(self.log_every_s, bool) and self.log_every_s > 0):
            raise ConfigError(f"IndexPolicy.log_every_s: must be > 0 or None, got {self.log_every_s!r}")
        if not (isinstance(self.exact_p99_ms, (int, float)) and math.isfinite(self.exact_p99_ms)
                and self.exact_p99_ms >= 0):
            raise ConfigError(f"IndexPolicy.exact_p99_ms: must be a finite number >= 0 (0: never exact), got {self.exact_p99_ms!r}")
        if isinstance(self.latency_queries, bool) or not isinstance(self.latency_queries, int) or self.latency_queries < 1:
            raise ConfigError(f"IndexPolicy.latency_queries: must be a positive integer, got {self.latency_queries!r}")
        if self.latency_threads is not None and (isinstance(self.latency_threads, bool)
                                                 or not isinstance(self.latency_threads, int)
                                                 or not 1 <= self.latency_threads <= MAX_THREADS):
            raise ConfigError(f"IndexPolicy.latency_threads: must be an integer from 1 to {MAX_THREADS} or None, "
                              f"got {self.latency_threads!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            # numpy's generators take no negative seed ("expected non-negative integer", a traceback)
            raise ConfigError(f"IndexPolicy.seed: must be an integer >= 0, got {self.seed!r}")
        for name in ("k", "tune_queries", "distributed_max_train"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"IndexPolicy.{name}: must be a positive integer, got {value!r}")
        if self.k > MAX_K:  # exact search pads its answer to k: a huge k was a numpy TypeError or a MemoryError
            raise ConfigError(f"IndexPolicy.k: must be at most {MAX_K}, got {self.k!r}")
        if not (isinstance(self.target_recall, (int, float)) and 0.0 < self.target_recall <= 1.0):
            raise ConfigError(f"IndexPolicy.target_recall: must be in (0, 1], got {self.target_recall!r}")


def params_text(params: Mapping[str, Any], sep: str = ", ") -> str:
    """``efSearch=16``, ``nprobe=4, k_factor=2``: a search setting as the sweep's table, its plot and every line of
    `index build` write it ("" for an index without knobs). The why / chosen lines printed the dict itself,
    ``{'efSearch': 16}``, beside a table and a plot saying ``efSearch=16``."""
    return sep.join(f"{k}={v:g}" if isinstance(v, (int, float)) else f"{k}={v}" for k, v in params.items())


def setting_text(factory: str, params: Mapping[str, Any]) -> str:
    """``HNSW32 efSearch=16``; ``Flat`` alone for an index without knobs (it read ``Flat {}``)."""
    knobs = params_text(params)
    return f"{factory} {knobs}" if knobs else factory


@dataclass(frozen=True, kw_only=True)
class TuneRow:
    """One measured setting: recall@k vs exact, speed and size."""

    index: str  # candidate as given ("ivf", "IVF1024,Flat", ...)
    factory: str  # resolved FAISS factory (or "exact")
    params: dict[str, Any]
    recall: float
    qps_batch: float
    qps_single: float
    p50_ms: float
    p99_ms: float
    build_s: float
    bytes_per_vector: float
    meets_target: bool


@dataclass(kw_only=True)
class TuneReport:
    """The whole sweep, the chosen setting and the chosen index (built, knobs set)."""

    rows: list[TuneRow]
    chosen: TuneRow
    met_target: bool  # False: nothing reached the target; ``chosen`` is the best recall found
    k: int
    target_recall: float
    n: int
    dim: int
    n_queries: int
    exact_qps_batch: float  # batched ExactIndex QPS measured while computing ground truth
    index: VectorIndex = field(repr=False)
    reason: str = ""  # why this index: exact within the latency budget, or the measured exact p99 that was not
    exact_p99_ms: float | None = None  # single-query exact p99 measured for the decision (auto only)
    pinned: bool = False  # the setting was given (``params``, ``--nprobe`` / ``--ef-search``), not chosen by a sweep
    # the policy's seed (of the query sample, FAISS's training sample and its k-means / HNSW draws): the recall
    # measured is a function of the data and this seed, so tune.json says which; None in a report made without it
    seed: int | None = None
    # how many of the n_queries point in distinct directions (distinct_queries): the recall rests on these, and
    # autotune warns below half; None in a report made without it
    n_distinct_queries: int | None = None
    # the threads the single-query latencies (p50 / p99, qps_1) were timed on: serve's default per request unless
    # the policy said otherwise; None in a report made without it (the build's own count)
    latency_threads: int | None = None

    @property
    def spec(self) -> str:
        """The chosen candidate (shortcut or factory string)."""
        return self.chosen.index

    @property
    def params(self) -> dict[str, Any]:
        """The chosen runtime knobs."""
        return dict(self.chosen.params)

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "index"}
        out["rows"] = [dataclasses.asdict(r) for r in self.rows]
        out["chosen"] = dataclasses.asdict(self.chosen)
        out["spec"], out["params"] = self.spec, self.params
        return out

    def _on_threads(self) -> str:
        return "" if self.latency_threads is None else f" on {plural(self.latency_threads, 'thread')}"

    def table(self) -> str:
        """The sweep as a fixed-width text table (for logs and CLI output)."""
        head = f"{'index':<28}{'params':<30}{'recall':>8}{'qps_b':>10}{'qps_1':>9}{'p50ms':>8}{'p99ms':>8}{'B/vec':>8}"
        lines = [head]
        for r in self.rows:
            mark = " *" if r is self.chosen else ("  " if not r.meets_target else " +")
            params = params_text(r.params, ",")
            lines.append(
                f"{r.factory[:27]:<28}{params[:29]:<30}{r.recall:>8.4f}{r.qps_batch:>10.0f}{r.qps_single:>9.0f}"
                f"{r.p50_ms:>8.3f}{r.p99_ms:>8.3f}{r.bytes_per_vector:>8.1f}{mark}"
            )
        # the markers and column names mean nothing to someone who has not read this method
        also = any(r.meets_target and r is not self.chosen for r in self.rows)
        lines.append(f"* chosen   {f'+ also reaches recall@{self.k} {self.target_recall:g}   ' if also else ''}"
                     f"qps_b batched QPS, qps_1 single-query QPS, p50ms/p99ms single-query latency{self._on_threads()}, "
                     "B/vec index bytes per vector")
        return "\n".join(lines)


def exact_ground_truth(vectors: np.ndarray, ids: np.ndarray, queries: np.ndarray, k: int) -> tuple[Results, float]:
    """Exact top-``k`` (computed block by block) and its batched QPS, timed as every candidate row is.

    One cold, single pass was timed before, against each row's warmed best of up to 3: a stall or a first-search
    cost landed on it alone, so `index build --index flat` on MovieLens-100K printed "exact 6,845 QPS" (and drew
    it in recall_qps.png) where `--index auto` measured the same search at 43,409 minutes apart.
    """
    exact = ExactIndex().build(vectors, ids)
    return batched_speed(exact, queries, k)


def batched_speed(index: VectorIndex, queries: np.ndarray, k: int) -> tuple[Results, float]:
    """``index``'s answer to ``queries`` and its batched QPS: warmed up, the best of up to 3 runs (~0.5 s)."""
    index.search(queries[:1], k)  # warm-up
    best, spent, res = math.inf, 0.0, None
    for _ in range(3):  # best of up to 3 runs (shared machines are noisy), stop after ~0.5 s
        t0 = time.perf_counter()
        res = index.search(queries, k)
        took = time.perf_counter() - t0
        best, spent = min(best, took), spent + took
        if spent > 0.5:
            break
    assert res is not None
    return res, queries.shape[0] / max(best, 1e-9)


def tie_aware_recall(
    found_ids: np.ndarray, queries: np.ndarray, vectors: np.ndarray, ids: np.ndarray, kth_scores: np.ndarray, k: int
) -> float:
    """Mean fraction of ``found_ids[Q, K]`` whose exact score >= exact k-th score - 1e-6.

    ``kth_scores[Q]`` is the exact k-th best score per query; the
    denominator is ``min(k, N)``. PAD ids never count.
    """
    found_ids = np.asarray(found_ids, dtype=np.int64)[:, :k]  # [Q, K]
    order = np.argsort(ids)
    pos = np.searchsorted(ids, found_ids, sorter=order).clip(0, len(ids) - 1)
    rows = order[pos]  # [Q, K] row of each found id
    valid = (found_ids != PAD_ID) & (ids[rows] == found_ids)
    scores = np.einsum("qd,qkd->qk", queries, vectors[rows])  # [Q, K] exact scores of the found items
    hits = valid & (scores >= kth_scores[:, None] - TIE_EPS)
    return float(hits.sum(axis=1).mean() / min(k, len(ids)))


def measure_speed(index: VectorIndex, queries: np.ndarray, k: int, *, latency_queries: int = IndexPolicy.latency_queries,
                  latency_rounds: int = 1, round_budget_ms: float | None = None,
                  latency_threads: int | None = None) -> dict[str, Any]:
    """Batched QPS over all queries, and single-query latency (p50/p99 ms, QPS) over the first few, on
    ``latency_threads`` threads (None: as the caller set them; the counts are put back after).

    ``latency_rounds`` > 1 times each query up to that many times and keeps each query's fastest: what the
    index costs, without the scheduler's stalls (a shared core's pause lands on a few queries of one round,
    exactly where a p99 looks). Rounds after the first run only while the p99 so far is above
    ``round_budget_ms`` and its p50 within it: a typical query over the budget is no stall.
    """
    from twotower.utils.runtime import scoped_threads

    res, qps_batch = batched_speed(index, queries, k)
    with scoped_threads(latency_threads):
        lat_ms = _latencies_ms(index, queries[:latency_queries], k)
        for _ in range(latency_rounds - 1):
            p50, p99 = np.percentile(lat_ms, [50, 99])
            if round_budget_ms is None or p99 <= round_budget_ms or p50 > round_budget_ms:
                break
            lat_ms = np.minimum(lat_ms, _latencies_ms(index, queries[:latency_queries], k))
    return {
        "results": res,
        "qps_batch": float(qps_batch),
        "qps_single": float(1e3 / lat_ms.mean()),
        "p50_ms": float(np.percentile(lat_ms, 50)),
        "p99_ms": float(np.percentile(lat_ms, 99)),
    }


def _latencies_ms(index: VectorIndex, queries: np.ndarray, k: int) -> np.ndarray:
    lat = []
    for q in queries:
        t = time.perf_counter()
        index.search(q[None], k)
        lat.append(time.perf_counter() - t)
    return np.asarray(lat) * 1e3


def half_octaves(upto: int) -> list[int]:
    """1, 2, 3, 4, 6, 8, 12, 16, ... (powers of two and the half-octaves between), ending at ``upto``."""
    upto = max(upto, 1)
    vals: list[int] = []
    p = 1
    while p <= upto:
        vals.append(p)
        mid = p + p // 2
        if p >= 2 and mid < 2 * p and mid <= upto:
            vals.append(mid)
        p *= 2
    vals = sorted(set(vals))
    return vals + ([upto] if vals[-1] != upto else [])


def _knob_grid(index: FaissIndex) -> Iterator[list[dict[str, Any]]]:
    """Yield sweeps (lists of settings, cheapest first) for this index's knobs."""
    knobs = index.knobs
    primary: list[dict[str, Any]] = [{}]
    if "nprobe" in knobs:
        primary = [{"nprobe": p} for p in half_octaves(index.nlist or 1)]
    elif "efSearch" in knobs:
        primary = [{"efSearch": e} for e in EF_SEARCH]
    for kf in K_FACTORS if "k_factor" in knobs else [None]:
        yield [dict(p, k_factor=kf) if kf is not None else p for p in primary]


def autotune(
    vectors: np.ndarray,
    ids: np.ndarray,
    queries: np.ndarray,
    *,
    k: int | None = None,
    target_recall: float | None = None,
    index: str = "auto",
    candidates: Sequence[str] | None = None,
    max_train: int | None = None,
    latency_queries: int | None = None,
    policy: IndexPolicy | None = None,
    params: dict[str, Any] | None = None,
    advice: str | None = None,
) -> TuneReport:
    """Sweep candidate indexes and knobs; return the cheapest setting meeting ``target_recall`` (module docstring).

    ``index`` is ``"auto"`` (try flat, ivf, hnsw, ivfpq), a shortcut or a FAISS
    factory string; ``candidates`` lists several explicitly (only with
    ``index="auto"``). ``max_train`` caps FAISS training vectors. The report's
    ``index`` is the chosen index, built, with its knobs set.

    ``params`` (e.g. ``{"efSearch": 64}``, only with one named ``index``) pins
    that setting: it is measured as given instead of swept (knobs not named keep
    FAISS's defaults), and the report says whether it meets the target. A knob
    the index lacks, or an ``nprobe`` above its list count, is refused before
    the index is built.

    ``policy`` (only with ``index="auto"`` and no ``candidates``; default
    :class:`IndexPolicy`) first measures exact search and returns it when its
    single-query p99 fits ``policy.exact_p99_ms``. ``k``, ``target_recall`` and
    ``latency_queries`` left as None take the policy's values.

    ``advice``: what the warning of a missed target suggests (None:
    :data:`MISSED_TARGET_ADVICE`, in this function's argument names).
    """
    policy = policy or IndexPolicy()
    k = policy.k if k is None else k
    target_recall = policy.target_recall if target_recall is None else target_recall
    latency_queries = policy.latency_queries if latency_queries is None else latency_queries
    vectors = check_vectors(vectors)
    ids = check_ids(ids, vectors.shape[0])
    queries = check_queries(queries, vectors.shape[1])  # [Q, D]
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ConfigError(f"k: must be a positive integer, got {k!r}")
    if isinstance(target_recall, bool) or not isinstance(target_recall, (int, float, np.integer, np.floating)) \
            or not 0.0 < target_recall <= 1.0:
        raise ConfigError(f"target_recall: must be in (0, 1], got {target_recall!r}")
    # recall and latency are measured on the queries against the catalogue: with none of either the measurement
    # failed inside numpy ("index -1 is out of bounds for axis 0 with size 0"), after RuntimeWarnings of empty means
    if vectors.shape[0] == 0:
        raise DataError("vectors: the catalogue is empty (0 vectors), so there is nothing to index or tune")
    if queries.shape[0] == 0:
        raise DataError("queries: no query vectors, so recall cannot be measured; pass some users' vectors "
                        "(e.g. run.user_vectors(np.arange(200)))")
    if candidates is not None and index != "auto":
        raise ConfigError("pass either index=... or candidates=[...], not both")
    if params is not None and (index == "auto" or candidates is not None):
        raise ConfigError("params pins the setting of one index type: name it with index=... (not auto or candidates)")
    if candidates is not None:
        names = list(candidates)
    elif index == "auto":
        names = list(AUTO_CANDIDATES)
    else:
        names = [index]
    if not names:
        raise ConfigError(f"candidates is empty; choose from {list(SHORTCUTS)} or FAISS factory strings")
    n, dim = vectors.shape
    if params is not None:
        params = check_pin(index, dict(params), n, dim, k)
    log.info("autotune: %d vectors of dim %d, %s, k=%d, target recall %.3f, candidates %s",
             n, dim, plural(queries.shape[0], "query", "queries"), k, target_recall, names)

    gt, exact_qps = exact_ground_truth(vectors, ids, queries, k)
    k_eff = min(k, n)
    if k > n:  # every setting that returns the whole catalogue "reaches" the target: say what was measured
        log.warning("autotune: k=%d is more than the %d vectors, so recall@k measures whether the whole catalogue "
                    "comes back; tune with a k below %d", k, n, n)
    kth = gt.scores[:, k_eff - 1]  # [Q]

    reason, exact_p99 = "", None
    if index == "auto" and candidates is None:
        exact = ExactIndex().build(vectors, ids)
        # each query's fastest of up to 3 rounds: one round's p99 read 1.43 ms in one build and 8.30 ms in the
        # next on shared cores (a 1,682-item catalogue, a 5 ms budget), so the same seed chose exact, then IVF
        speed = measure_speed(exact, queries, k, latency_queries=latency_queries, latency_rounds=EXACT_LATENCY_ROUNDS,
                              round_budget_ms=policy.exact_p99_ms, latency_threads=policy.latency_threads)
        exact_p99 = float(speed["p99_ms"])
        on = "" if policy.latency_threads is None else f" on {plural(policy.latency_threads, 'thread')}"
        # the report's exact baseline is this warmed best-of-runs figure, measured like every candidate row
        # (the ground-truth pass above is one cold run: it read 3x slower than the exact row it sat beside)
        exact_qps = float(speed["qps_batch"])
        if exact_p99 <= policy.exact_p99_ms:
            row = TuneRow(
                index="exact", factory="exact", params={}, recall=1.0, qps_batch=speed["qps_batch"],
                qps_single=speed["qps_single"], p50_ms=speed["p50_ms"], p99_ms=exact_p99, build_s=0.0,
                bytes_per_vector=exact.nbytes() / max(n, 1), meets_target=True,
            )
            reason = (f"exact search: its single-query p99 {exact_p99:.2f} ms{on} is within the {policy.exact_p99_ms:g} ms "
                      f"budget ({n:,} items, {speed['qps_batch']:,.0f} QPS batched), so no approximation is needed")
            log.info("autotune: %s", reason)
            return TuneReport(
                rows=[row], chosen=row, met_target=True, k=k, target_recall=float(target_recall), n=n, dim=dim,
                n_queries=int(queries.shape[0]), exact_qps_batch=float(exact_qps), index=exact, reason=reason,
                exact_p99_ms=exact_p99, seed=policy.seed, n_distinct_queries=distinct_queries(queries),
                latency_threads=policy.latency_threads,
            )
        reason = (f"approximate: exact search's single-query p99 {exact_p99:.2f} ms{on} exceeds the "
                  f"{policy.exact_p99_ms:g} ms budget ({n:,} items)")
        del exact

    distinct = _warn_repeated_queries(queries)  # exact search, chosen above, measures no recall
    _warn_few_queries(distinct, k)
    rows: list[TuneRow] = []
    best: tuple[TuneRow, VectorIndex] | None = None
    for number, name in enumerate(names, 1):
        log.info("autotune: building %s (%d of %d)", name, number, len(names))
        t0 = time.perf_counter()
        idx = FaissIndex(name, max_train=max_train, seed=policy.seed,
                         log_every_s=policy.log_every_s).build(vectors, ids)
        mine = _sweep(idx, name, time.perf_counter() - t0, vectors, ids, queries, kth, k, target_recall,
                      latency_queries, grid=None if params is None else [[params]], threads=policy.latency_threads)
        rows += mine
        pick = _cheapest(mine)
        # the previous choice is dropped here, so at most two candidate indexes are held at once
        if best is None or _replaces(pick, best[0], policy.kind_margin, max(r.recall for r in rows)):
            best = (pick, idx)
    assert best is not None  # names is non-empty
    kinds = f"{len(names)} index types" if len(names) > 1 else ""
    return _report(rows, best, k, target_recall, n, dim, queries.shape[0], exact_qps, reason, exact_p99,
                   kinds=kinds, margin=policy.kind_margin, pinned=params is not None, seed=policy.seed, advice=advice,
                   distinct=distinct, latency_threads=policy.latency_threads)


def tune_index(
    index: FaissIndex,
    vectors: np.ndarray,
    ids: np.ndarray,
    queries: np.ndarray,
    *,
    policy: IndexPolicy | None = None,
    build_s: float = 0.0,
    params: dict[str, Any] | None = None,
    advice: str | None = None,
) -> TuneReport:
    """Sweep the knobs of an index built elsewhere (across torchrun ranks) against exact search.

    The same measurements as :func:`autotune` (tie-aware recall@k over
    ``queries``, batched and single-query speed), for one given index:
    ``vectors[N, D]`` with ``ids[N]`` are the catalogue it holds. The index
    is left at the cheapest setting reaching ``policy.target_recall`` (else
    at the cheapest setting within :data:`MISSED_RECALL_TOLERANCE` of the best recall), and the report is
    what ``tune.json`` records.
    ``params`` (e.g. ``{"nprobe": 32}``) measures that one setting instead
    of sweeping: the user chose it, the report says what it gives. ``advice`` as in :func:`autotune`.
    """
    policy = policy or IndexPolicy()
    k, target_recall = policy.k, policy.target_recall
    vectors = check_vectors(vectors)
    ids = check_ids(ids, vectors.shape[0])
    queries = check_queries(queries, vectors.shape[1])  # [Q, D]
    if len(index) != len(ids):
        raise ConfigError(f"the index holds {len(index):,} vectors but {len(ids):,} were given to measure it against")
    n, dim = vectors.shape
    gt, exact_qps = exact_ground_truth(vectors, ids, queries, k)
    kth = gt.scores[:, min(k, n) - 1]  # [Q]
    if params is not None:
        params = check_pin(str(index.factory), dict(params), n, dim, k)
    distinct = _warn_repeated_queries(queries)
    rows = _sweep(index, str(index.factory), build_s, vectors, ids, queries, kth, k, target_recall,
                  policy.latency_queries, grid=None if params is None else [[params]], threads=policy.latency_threads)
    return _report(rows, (_cheapest(rows), index), k, target_recall, n, dim, queries.shape[0], exact_qps, "", None,
                   pinned=params is not None, seed=policy.seed, advice=advice, distinct=distinct,
                   latency_threads=policy.latency_threads)


#: the largest nprobe / efSearch FAISS can hold (a C int): 2**31 was stored as -2**31 without a word
_FAISS_INT_MAX = 2**31 - 1


def _check_pin_value(spec: str, factory: str, knobs: tuple[str, ...], name: str, value: Any) -> str:
    """The ``params[...]`` key of one pinned setting, once ``spec``'s index is known to have the knob and the value is
    a number FAISS can hold; ConfigError naming the key otherwise."""
    # each error names the entry as the caller wrote it (params['efSearch']), as the CLI names its flag: an
    # infinite efSearch was Python's OverflowError, efSearch 2**31 was stored by FAISS as -2**31, and a huge
    # k_factor failed inside FAISS's search ("'k_base >= k' failed", or std::bad_alloc)
    key = f"params[{name!r}]"
    if name not in knobs:
        raise ConfigError(f"{key}: {spec!r} ({factory}) has no {name} to pin; its search knobs: "
                          f"{', '.join(knobs) or 'none (it has a single setting)'}")
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or not value >= 1 \
            or not math.isfinite(value) or (name != "k_factor" and value != int(value)):
        raise ConfigError(f"{key}: must be {'a number' if name == 'k_factor' else 'an integer'} >= 1, "
                          f"got {value!r}")
    if name != "k_factor" and value > _FAISS_INT_MAX:
        raise ConfigError(f"{key}: must be at most {_FAISS_INT_MAX:,} (FAISS holds it in a 32-bit integer), "
                          f"got {value!r}")
    return key


#: Before the vectors are read their count and dim are unknown: check_pin_early reads a factory string's knobs from
#: an empty index over this many vectors of the first of these dims FAISS accepts (a PQ needs its m to divide D)
_PROBE_N = 100_000
_PROBE_DIMS = (64, 96, 128, 256)


def check_pin_early(spec: str, params: Any) -> None:
    """Refuse, before any vectors are read, a ``params`` pin that ``spec`` alone shows cannot fit: a knob its index
    lacks, a value that is not a number >= 1, an ``nprobe`` above the lists a factory string fixes (``IVF8,Flat``).
    ``tt.build_index(run, "IVF8,Flat", params={"nprobe": 20})`` was refused only once the run had loaded, as
    `twotower index build` no longer was. What depends on the catalogue (``k_factor``, the list count of ``ivf`` or
    ``IVF{nlist}``) and a string FAISS takes at none of the placeholder dims are left to :func:`check_pin`."""
    if not isinstance(params, Mapping):
        raise ConfigError(f"params must be a dict of search settings such as {{'nprobe': 8}}, got {params!r}")
    if spec.strip().lower() == "auto":
        raise ConfigError("params pins the setting of one index type: name it with index=... (not auto)")
    for dim in _PROBE_DIMS:
        try:
            factory, knobs, nlist = factory_knobs(spec, _PROBE_N, dim)
        except ConfigError:
            continue
        # a shortcut's sizes are this probe's (IVF1265 for 100,000 vectors): named as placeholders, not as the build's
        shown = factory if factory == spec.strip() else re.sub(r"PQ\d+x\d+", "PQ{m}x{nbits}",
                                                                  re.sub(r"IVF\d+", "IVF{nlist}", factory))
        for name, value in params.items():
            key = _check_pin_value(spec, shown, knobs, name, value)
            # the count is the string's own when another catalogue size gives the same (it is not sized to N)
            if name == "nprobe" and nlist is not None and value > nlist \
                    and factory_knobs(spec, 10 * _PROBE_N, dim)[2] == nlist:
                raise ConfigError(f"{key} {value} is more than the {plural(nlist, 'list')} of {factory}; "
                                  f"{key} {nlist} already searches every list")
        return


def check_pin(spec: str, params: dict[str, Any], n: int, dim: int, k: int = 1) -> dict[str, Any]:
    """``params`` if ``spec``'s index has those knobs and the values fit it for ``n`` vectors searched for the top
    ``k``; ConfigError before any build."""
    factory, knobs, nlist = factory_knobs(spec, n, dim)
    if not params:
        raise ConfigError(f"params is empty; name a setting of {factory} to pin: one of {list(knobs) or 'none'}")
    for name, value in params.items():
        key = _check_pin_value(spec, factory, knobs, name, value)
        # the refine stage fetches k x k_factor candidates a query: past the catalogue nothing more is re-scored, yet
        # the cap of n alone let a search hold k x n x queries x 8 bytes of ids (1M vectors, k=10, the 1,000 tuning
        # queries: 80 GB)
        cap = max(1.0, n / k)
        if name == "k_factor" and value > cap:
            raise ConfigError(f"{key} {value!r}: the refine stage would fetch k x k_factor = {k} x {value:g} "
                              f"candidates a query, more than the {n:,} vectors the index holds; at {key} {cap:g} "
                              f"({n:,} / k) it already asks for every vector, so {key} must be at most {cap:g}")
        if name == "nprobe" and nlist is not None and value > nlist:
            raise ConfigError(f"{key} {value} is more than the {plural(nlist, 'list')} of {factory} over {n:,} "
                              f"vectors; {key} {nlist} already searches every list")
        # FAISS sizes each query's candidate heaps to efSearch: 1e9 failed with std::bad_alloc in the first search
        if name == "efSearch" and value > n:
            raise ConfigError(f"{key} {value} is more than the {n:,} vectors of the {factory} graph; at {key} {n} "
                              "a search already keeps every vector as a candidate")
    return {name: float(v) if name == "k_factor" else int(v) for name, v in params.items()}


def _cost(row: TuneRow) -> tuple[float, float, float]:
    """Search cost order of one index's settings: lists probed / graph depth first, then refine's ``k_factor``."""
    p = row.params
    return (p.get("nprobe", 0), p.get("efSearch", 0), p.get("k_factor", 0))


def _cheapest(rows: list[TuneRow]) -> TuneRow:
    """One index's setting: the cheapest meeting the target, else the cheapest within
    :data:`MISSED_RECALL_TOLERANCE` of the best recall.

    Never by measured speed: recall is the same for the same data and seed, QPS is not, and between two
    settings that both meet the target the larger one only looked faster on a noisy clock.
    """
    met = [r for r in rows if r.meets_target]
    if met:
        return min(met, key=_cost)
    best = max(r.recall for r in rows)
    return min((r for r in rows if r.recall >= best - MISSED_RECALL_TOLERANCE), key=lambda r: (_cost(r), -r.recall))


def _best_of_missed(rows: list[TuneRow], chosen: TuneRow) -> str:
    """The chosen setting when none met the target, and the best recall of its index when a costlier one had more."""
    said = f"best {chosen.recall:.4f} with {setting_text(chosen.factory, chosen.params)}"
    best = max(r.recall for r in rows if r.factory == chosen.factory)
    if chosen.recall >= best:
        return said
    return (f"{chosen.recall:.4f} with {setting_text(chosen.factory, chosen.params)}, the cheapest setting within "
            f"{MISSED_RECALL_TOLERANCE:g} of its best recall {best:.4f}")


def _replaces(new: TuneRow, old: TuneRow, margin: float, best_recall: float) -> bool:
    """Whether a later index type's setting replaces an earlier one's: meeting the target beats missing it; between
    two that meet it, more than ``margin`` more batched QPS; between two that miss it, the same but only among those
    within :data:`MISSED_RECALL_TOLERANCE` of ``best_recall`` (of every row measured so far).

    The earlier choice is always within that tolerance of the best so far (a type's choice is within it of its own
    best), so the one kept stays within it of the best recall measured of every type."""
    if new.meets_target != old.meets_target:
        return new.meets_target
    if not new.meets_target:
        floor = best_recall - MISSED_RECALL_TOLERANCE
        if new.recall < floor or old.recall < floor:
            return new.recall >= floor
    return new.qps_batch > old.qps_batch * (1.0 + margin)


def _sweep(idx: FaissIndex, name: str, build_s: float, vectors: np.ndarray, ids: np.ndarray, queries: np.ndarray,
           kth: np.ndarray, k: int, target_recall: float, latency_queries: int,
           grid: list[list[dict[str, Any]]] | None = None, threads: int | None = None) -> list[TuneRow]:
    """Measure ``idx`` at each of its knob settings (``grid``, else all); the rows, in the order measured.
    ``threads``: the single-query latencies' thread count (:class:`IndexPolicy`'s ``latency_threads``)."""
    n = vectors.shape[0]
    bpv = idx.nbytes() / n
    rows: list[TuneRow] = []
    for sweep in _knob_grid(idx) if grid is None else grid:
        prev: list[float] = []
        met_at: int | None = None
        for i, params in enumerate(sweep):
            idx.set_search_params(**params)
            speed = measure_speed(idx, queries, k, latency_queries=latency_queries, latency_threads=threads)
            recall = tie_aware_recall(speed["results"].ids, queries, vectors, ids, kth, k)
            row = TuneRow(
                index=name, factory=str(idx.factory), params=dict(params), recall=recall,
                qps_batch=speed["qps_batch"], qps_single=speed["qps_single"], p50_ms=speed["p50_ms"],
                p99_ms=speed["p99_ms"], build_s=build_s, bytes_per_vector=bpv,
                meets_target=recall >= target_recall,
            )
            rows.append(row)
            # debug: the CLI prints the finished table; an INFO line per row printed every row twice
            log.debug("autotune %s: recall@%d %.4f, %.0f QPS batched", setting_text(str(idx.factory), params), k, recall,
                      row.qps_batch)
            if row.meets_target and met_at is None:
                met_at = i
            prev.append(recall)
            if met_at is not None and i >= met_at + 1:
                break  # cheaper settings are already enough; one extra point for the plot
            if len(prev) >= 3 and prev[-1] - prev[-3] < 1e-3 and _reaches_past_k(idx, params, n, k):
                break  # recall has plateaued
    assert rows  # every index has at least one setting
    return rows


def _reaches_past_k(idx: VectorIndex, params: dict[str, Any], n: int, k: int) -> bool:
    """Whether a setting reads well past ``k`` candidates (twice as many), so that recall that no longer rises is a
    plateau. Below that the search widens itself to fill k (an IVF list of ~39 items for k=100): nprobe 1, 2 and 3
    gave one recall (0.7767) and the sweep stopped there, "no setting reached 0.95", where nprobe 16 gave 0.998."""
    nlist = getattr(idx, "nlist", None)
    if "nprobe" in params and nlist:
        return int(params["nprobe"]) * n / nlist >= 2 * k
    if "efSearch" in params:
        return int(params["efSearch"]) >= 2 * k
    return True


def _report(rows: list[TuneRow], best: tuple[TuneRow, VectorIndex], k: int, target_recall: float, n: int, dim: int,
            n_queries: int, exact_qps: float, reason: str, exact_p99: float | None, *, kinds: str = "",
            margin: float = 0.0, pinned: bool = False, seed: int | None = None,
            advice: str | None = None, distinct: int | None = None, latency_threads: int | None = None) -> TuneReport:
    """The chosen row's index set to its knobs, and the report saying why (``kinds``: "4 index types" when
    several were compared)."""
    chosen, chosen_index = best
    if pinned:
        verdict = (f"{setting_text(chosen.factory, chosen.params)} as given (pinned, not swept): recall@{k} {chosen.recall:.4f}, "
                   f"{'meeting' if chosen.meets_target else 'below'} the target {target_recall:g}")
    elif chosen.meets_target:
        verdict = (f"cheapest setting of {chosen.factory} reaching recall@{k} {target_recall:g}: "
                   f"{params_text(chosen.params)} at {chosen.recall:.4f}" if chosen.params else
                   f"{chosen.factory} (no search setting) reaches recall@{k} {target_recall:g} at {chosen.recall:.4f}")
        if kinds:
            verdict += (f"; chosen of the {kinds} tried on batched QPS ({chosen.qps_batch:,.0f}; a later type "
                        f"replaces an earlier one only when more than {margin:.0%} faster)")
    else:
        verdict = f"no setting reached recall@{k} {target_recall:g}; {_best_of_missed(rows, chosen)}"
        if kinds:
            verdict += (f"; chosen of the {kinds} tried on batched QPS ({chosen.qps_batch:,.0f}) among those within "
                        f"{MISSED_RECALL_TOLERANCE:g} of the best recall {max(r.recall for r in rows):.4f} (a later "
                        f"type replaces an earlier one only when more than {margin:.0%} faster)")
    if pinned and not chosen.meets_target:
        log.warning("autotune: the pinned setting %s reaches recall@%d %.4f, below the target %.3f",
                    setting_text(chosen.factory, chosen.params), k, chosen.recall, target_recall)
    elif not chosen.meets_target:
        log.warning("autotune: no setting reached recall@%d %.3f (%s); %s", k, target_recall,
                    _best_of_missed(rows, chosen), advice or MISSED_TARGET_ADVICE)
    chosen_index.set_search_params(**chosen.params)
    return TuneReport(
        rows=rows, chosen=chosen, met_target=chosen.meets_target, k=k, target_recall=float(target_recall),
        n=n, dim=dim, n_queries=int(n_queries), exact_qps_batch=float(exact_qps), index=chosen_index,
        reason=f"{reason}; {verdict}" if reason else verdict, exact_p99_ms=exact_p99, pinned=pinned, seed=seed,
        n_distinct_queries=distinct, latency_threads=latency_threads,
    )
