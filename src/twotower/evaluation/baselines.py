"""Non-neural baselines a two-tower model has to beat.

All three learn from a binary user×item training matrix ``train[U, I]`` (any
stored non-zero counts as one interaction) and score the whole catalogue from
a user's history:

* :class:`Popularity`: the number of training users of each item.
* :class:`EASE`: Steck (2019), "Embarrassingly Shallow Autoencoders for Sparse
  Data", WWW. A closed-form item-item linear model.
* :class:`ItemKNN`: cosine item-item similarity, top-k neighbours per item.

Each is a :class:`~twotower.evaluation.protocol.Scorer`: ``score(users)``
scores training rows ``users`` using their training items as the history;
``score_history(history)`` scores ad-hoc histories. Neither removes already
seen items; that is the protocol's ``exclude``. Hyper-parameters are chosen
on validation data only (:func:`tune_ease`, :func:`tune_itemknn`).
"""
from __future__ import annotations

import logging
import time
from typing import Any, Mapping, Sequence

import numpy as np
import scipy.linalg
import scipy.linalg.lapack
import scipy.sparse as sp

from twotower.errors import ConfigError, DataError
from twotower.evaluation.protocol import PER_USER_METRICS, EvalProtocol, evaluate, parse_metric
from twotower.results import PAD_ID
from twotower.utils.arguments import check_seed
from twotower.utils.digest import matrix_digest
from twotower.utils.progress import RateLog

__all__ = ["Popularity", "EASE", "EaseSolveError", "ItemKNN", "tune_ease", "tune_itemknn", "ease_memory_bytes",
           "ease_skip_reason", "ease_baseline_solver", "ease_rows_key", "EASE_LAMBDAS", "sample_tuning_users"]

log = logging.getLogger(__name__)


def _binary_csr(matrix: object, name: str) -> sp.csr_matrix:
    """``matrix`` as a float32 CSR with every stored non-zero set to 1.0."""
    if not sp.issparse(matrix):
        raise DataError(f"{name} must be a scipy.sparse [users, items] matrix, got {type(matrix).__name__}")
    if matrix.ndim != 2:
        raise DataError(f"{name} must be 2-D [users, items], got shape {matrix.shape}")
    x = sp.csr_matrix(matrix, dtype=np.float32, copy=True)
    x.sum_duplicates()
    x.eliminate_zeros()
    x.data[:] = 1.0
    return x


class _HistoryBaseline:
    """Shared fit/score plumbing; subclasses implement ``_fit`` and ``_score``."""

    name = "baseline"

    def __init__(self) -> None:
        self.fit_seconds: float | None = None
        self._train: sp.csr_matrix | None = None

    @property
    def n_items(self) -> int:
        return int(self._require_fitted().shape[1])

    def _require_fitted(self) -> sp.csr_matrix:
        if self._train is None:
            raise RuntimeError(f"{type(self).__name__} is not fitted; call .fit(train) first")
        return self._train

    def fit(self, train: sp.spmatrix | sp.sparray) -> "_HistoryBaseline":
        """Learn from ``train[U, I]``; returns ``self``. Records ``fit_seconds``."""
        x = _binary_csr(train, "train")
        t0 = time.perf_counter()
        self._fit(x)
        self._train = x
        self.fit_seconds = time.perf_counter() - t0
        log.debug("%s fitted on %d users × %d items in %.2fs", self.name, x.shape[0], x.shape[1], self.fit_seconds)
        return self

    def _user_rows(self, users: np.ndarray) -> np.ndarray:
        """``users`` as int64 rows ``[B]`` of the fitted matrix; DataError for rows outside it."""
        train = self._require_fitted()
        users = np.asarray(users, dtype=np.int64).ravel()  # [B]
        if users.size and (users.min() < 0 or users.max() >= train.shape[0]):
            raise DataError(f"user rows must lie in [0, {train.shape[0]}); got {users.min()}..{users.max()}")
        return users

    def score(self, users: np.ndarray) -> np.ndarray:
        """Float32 scores ``[len(users), I]`` from the training items of rows ``users``."""
        return self._score(self._require_fitted()[self._user_rows(users)])

    def score_history(self, history: sp.spmatrix | sp.sparray) -> np.ndarray:
        """Float32 scores ``[U', I]`` for ad-hoc binary histories ``history[U', I]``."""
        return self._score(self._history_csr(history))

    def _history_csr(self, history: sp.spmatrix | sp.sparray) -> sp.csr_matrix:
        """``history`` as a binary CSR over the fitted items; DataError for another item count."""
        n_items = self.n_items
        h = _binary_csr(history, "history")
        if h.shape[1] != n_items:
            raise DataError(f"history has {h.shape[1]} item columns but the model was fitted on {n_items} items")
        return h

    def _fit(self, x: sp.csr_matrix) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _score(self, history: sp.csr_matrix) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError


class Popularity(_HistoryBaseline):
    """Scores every item by its training popularity, the same for every user.

    ``counts[I]`` is the number of distinct training users of each item (also
    the ``item_popularity`` the protocol's ``MeanPop@k`` expects).
    """

    name = "Popularity"

    def __init__(self) -> None:
        super().__init__()
        self.counts: np.ndarray | None = None
        self._order = np.empty(0, dtype=np.int64)  # [I] item rows, most popular first (set by fit)

    def _fit(self, x: sp.csr_matrix) -> None:
        self.counts = np.bincount(x.indices, minlength=x.shape[1]).astype(np.float32)  # [I]
        # one ranking for everybody: most popular first, ties to the smaller item row (as topk_excluding)
        self._order = np.argsort(-self.counts, kind="stable")  # [I]

    def _score(self, history: sp.csr_matrix) -> np.ndarray:
        assert self.counts is not None
        return np.broadcast_to(self.counts, (history.shape[0], self.counts.size)).copy()  # [U', I]

    def rank(self, users: np.ndarray, k: int, exclude: sp.spmatrix | sp.sparray | None) -> np.ndarray:
        """Top-``k`` item rows ``[B, k]`` of ``users``, ``exclude`` (aligned with ``users``) removed, -1 padded.

        The lists ``topk_excluding(self.score(users), k, exclude)`` gives, read
        off the one global ranking instead of partitioning a row of ``I`` scores
        per user: on a 299K-item catalogue that generic path evaluated 63 users/s.
        Each user needs only the first ``k + (their excluded items)`` of the ranking.
        """
        return self._rank_rows(self._user_rows(users).size, k, exclude)

    def rank_history(self, history: sp.spmatrix | sp.sparray, k: int,
                     exclude: sp.spmatrix | sp.sparray | None) -> np.ndarray:
        """:meth:`rank` for ad-hoc histories ``history[B, I]`` (as :meth:`score_history`): the ranking is the
        same for every history, so only its row count and ``exclude`` matter."""
        return self._rank_rows(self._history_csr(history).shape[0], k, exclude)

    def _rank_rows(self, b: int, k: int, exclude: sp.spmatrix | sp.sparray | None) -> np.ndarray:
        _check_rank_k(k)
        n_items = self._order.size
        out = np.full((b, k), PAD_ID, dtype=np.int64)
        if b == 0:
            return out
        ex = _exclusion_mask(exclude, b, n_items)
        width = min(n_items, k + (int(np.diff(ex.indptr).max()) if ex is not None else 0))
        head = self._order[:width]  # [W] the only items any of these users can be shown
        if ex is None:
            out[:, : min(k, width)] = head[: min(k, width)]
            return out
        hidden = ex[:, head].toarray().astype(bool)  # [B, W] column j: is head[j] excluded for that user
        first = np.argsort(hidden, axis=1, kind="stable")[:, :k]  # the first k shown items, in ranking order
        picked = head[first]  # [B, min(k, W)]
        picked[np.take_along_axis(hidden, first, axis=1)] = PAD_ID  # fewer than k items left for that user
        out[:, : picked.shape[1]] = picked
        return out


def _check_rank_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ConfigError(f"k: must be a positive integer, got {k!r}")


def _exclusion_mask(exclude: sp.spmatrix | sp.sparray | None, b: int, n_items: int) -> sp.csr_matrix | None:
    """``exclude`` as an int8 CSR ``[b, n_items]`` of ones: every stored entry excludes its item, whatever its
    value (as ``topk_excluding`` reads it)."""
    if exclude is None:
        return None
    if not sp.issparse(exclude):
        raise DataError(f"exclude must be a scipy.sparse [users, items] matrix, got {type(exclude).__name__}")
    ex = sp.csr_matrix(exclude)
    if ex.shape != (b, n_items):
        raise DataError(f"exclude has shape {ex.shape}, expected {(b, n_items)} (one row per user)")
    return sp.csr_matrix((np.ones(ex.indices.size, np.int8), ex.indices, ex.indptr), shape=ex.shape)


class EaseSolveError(DataError):
    """EASE's solve failed at ridge ``l2``: a λ too small for the Gram matrix's scale (``reason``: how it failed). A
    caller that took λ from a setting names the setting (model.item_item.lambdas: "raise l2" named none)."""

    def __init__(self, reason: str, l2: float, model: str = "EASE") -> None:
        super().__init__(f"{model}: {reason}; raise l2 (λ={l2:g})")
        self.reason, self.l2 = reason, l2


def _check_l2(l2: float, name: str = "EASE.l2") -> float:
    """``l2`` as a float; ``name``: what the refusal calls it (``EASE.l2: must be ...``, ``lambdas: must be ...``)."""
    if isinstance(l2, bool) or not isinstance(l2, (int, float, np.floating, np.integer)) or not l2 > 0:
        raise ConfigError(f"{name}: must be a positive number (typical 50..5000), got {l2!r}")
    return float(l2)


def _gram(x: sp.csr_matrix) -> np.ndarray:
    """Dense float64 ``XᵀX [I, I]``."""
    n_items = x.shape[1]
    # the size is worth an INFO line only when it is a memory concern (>= 1 GiB)
    log.log(logging.INFO if n_items**2 * 8 >= 2**30 else logging.DEBUG,
            "EASE: dense %d×%d float64 Gram matrix, ~%.1f MiB per copy", n_items, n_items, n_items**2 * 8 / 2**20)
    return np.asarray((x.T @ x).toarray(), dtype=np.float64)


def _ease_weights(gram: np.ndarray, l2: float) -> np.ndarray:
    """Steck's closed form: ``P = (G + λI)⁻¹``, ``B = I − P·diagMat(1/diag(P))``, ``diag(B) = 0``.

    Off the diagonal that is ``B_ij = −P_ij / P_jj``. Solved in float64 by
    Cholesky (``G + λI`` is symmetric positive definite for λ > 0) and LAPACK's
    inverse from the factor (``potri``), in one ``[I, I]`` buffer: ~I³ flops
    where solving against the identity takes ~2.3·I³, and one float64 copy of
    the Gram matrix instead of three. Stored as float32 ``[I, I]``.
    """
    n = gram.shape[0]
    # LAPACK works in place on Fortran order; G is symmetric, so G.T's Fortran copy is a plain memory copy
    g = np.array(gram.T, dtype=np.float64, order="F")
    g[np.diag_indices(n)] += l2
    factor, info = scipy.linalg.lapack.dpotrf(g, lower=1, clean=0, overwrite_a=1)
    if info != 0:
        raise EaseSolveError(f"G + λI is not positive definite (LAPACK potrf info {info})", l2)
    p, info = scipy.linalg.lapack.dpotri(factor, lower=1, overwrite_c=1)  # the lower triangle of P
    if info != 0:
        raise EaseSolveError(f"could not invert G + λI (LAPACK potri info {info})", l2)
    del g, factor  # the same buffer as p
    _mirror_lower(p)
    b = p.T  # P is symmetric: its C-order view, so the weights come out row-major like the old solve's
    b /= -np.diag(b).copy()[None, :]  # column j divided by -P_jj
    b[np.diag_indices(n)] = 0.0
    return b.astype(np.float32)


def _mirror_lower(a: np.ndarray, block: int = 1024) -> None:
    """Copy the lower triangle of the square ``a`` onto its upper one, in place, a block of rows at a time
    (no ``[I, I]`` temporary: that would be a second copy of the largest array EASE holds)."""
    n = a.shape[0]
    for s in range(0, n, block):
        e = min(s + block, n)
        d = a[s:e, s:e]
        a[s:e, s:e] = np.tril(d) + np.tril(d, -1).T
        a[s:e, e:] = a[e:, s:e].T


def ease_memory_bytes(n_items: int) -> int:
    """Peak memory of fitting (and tuning) EASE on ``n_items``: the float64 Gram matrix, the float64
    buffer it is factored and inverted in, the float32 weights and the previous λ's weights while tuning."""
    return 24 * n_items * n_items


def _scientific(x: float) -> str:
    """``x`` to two figures as ``4.8·10⁹`` (1,682³: not ``0·10¹²``)."""
    mantissa, exponent = f"{x:.1e}".split("e")
    return f"{mantissa}·10" + str(int(exponent)).translate(str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹"))


#: what the EASE baseline's skip message tells a user to do (the item-item term names its own setting, no fix)
_EASE_BASELINE_FIX = "raise eval.ease_max_items (`twotower evaluate --ease-max-items N`) to fit it anyway"


def ease_skip_reason(n_items: int, max_items: int, available_bytes: int | None = None, *,
                     setting: str = "eval.ease_max_items", fix: str | None = _EASE_BASELINE_FIX) -> str | None:
    """Why EASE should not be fitted on ``n_items`` (None: go ahead).

    Above ``max_items`` (``setting``: ``eval.ease_max_items`` for the baseline, ``model.item_item.max_items`` for
    the item-item term) its ``I³`` time is the issue (20,000 items: ~8·10¹² flops per λ tried); whatever the
    limit, it is skipped when its peak memory (:func:`ease_memory_bytes`) exceeds the memory the
    machine has available, which would end in the kernel killing the process. ``fix`` ends the first message.
    """
    need = ease_memory_bytes(n_items)
    if n_items > max_items:
        return (f"{n_items:,} items > {setting}={max_items:,} (EASE needs ~{need / 2**30:.1f} GiB and "
                f"~{_scientific(n_items ** 3)} flops per λ tried)" + (f"; {fix}" if fix else ""))
    if available_bytes is not None and need > available_bytes:
        return (f"{n_items:,} items need ~{need / 2**30:.1f} GiB for EASE's dense item-item matrices, "
                f"more than the {available_bytes / 2**30:.1f} GiB available")
    return None


#: what the low-rank EASE baseline's skip message tells a user to do
_LOW_RANK_BASELINE_FIX = ("raise eval.ease_low_rank_max_items (`twotower evaluate --ease-low-rank-max-items N`) to "
                          "fit it anyway")


def ease_baseline_solver(n_items: int, *, solver: str, max_items: int, eigenpairs: int,
                         low_rank_max_items: int) -> str | None:
    """The EASE baseline's solve on ``n_items`` (the ``eval.ease_*`` settings): ``"dense"``, ``"low_rank"``
    (:class:`~twotower.evaluation.low_rank_ease.LowRankEASE` on ``eigenpairs``, said in an INFO line) or None,
    skipped with a warning that says why and which setting to raise, against the memory available now."""
    from twotower.evaluation.low_rank_ease import choose_ease_solver  # noqa: PLC0415 (it imports this module)
    from twotower.utils.runtime import available_memory  # noqa: PLC0415

    how, dense_why, why_not = choose_ease_solver(
        n_items, solver, dense_max_items=max_items, eigenpairs=eigenpairs, available_bytes=available_memory(),
        solver_setting="eval.ease_solver", dense_setting="eval.ease_max_items", dense_fix=_EASE_BASELINE_FIX,
        low_rank_max_items=low_rank_max_items, low_rank_setting="eval.ease_low_rank_max_items",
        low_rank_fix=_LOW_RANK_BASELINE_FIX)
    if why_not is not None:
        # the low-rank form refused after the dense one: both limits are named, either may be raised
        also = f". Not solved densely either: {dense_why}" if how == "low_rank" and solver == "auto" else ""
        log.warning("EASE skipped: %s%s", why_not, also)
        return None
    if how == "low_rank":  # an approximation of EASE: its row says so, and so does the log
        log.info("EASE baseline: solved on its Gram matrix's %d leading eigenpairs, not densely (%s)",
                 eigenpairs, dense_why)
    return how


class EASE(_HistoryBaseline):
    """EASE^R (Steck 2019): a linear item-item model with zero diagonal, solved in closed form.

    Minimises ``‖X − XB‖²_F + λ‖B‖²_F`` subject to ``diag(B) = 0``; the scores
    of a history ``x[I]`` are ``x·B``. Memory and time grow with ``I²`` and
    ``I³`` (dense ``I×I``), which suits catalogues up to a few tens of
    thousands of items. ``l2`` is λ; choose it on validation (:func:`twotower.evaluation.tune_ease`).
    """

    name = "EASE"

    def __init__(self, l2: float = 500.0) -> None:
        super().__init__()
        self.l2 = _check_l2(l2)
        self.weights: np.ndarray | None = None  # B [I, I] float32

    def _fit(self, x: sp.csr_matrix) -> None:
        self.weights = _ease_weights(_gram(x), self.l2)

    @classmethod
    def from_tuning(cls, keep: Mapping[str, Any], l2: float) -> "EASE":
        """The model of ridge ``l2`` from :func:`tune_ease`'s ``keep``: the chosen λ's model as tuning fitted it,
        or one fitted from its training and Gram matrices for another λ."""
        model = keep.get("model")
        if isinstance(model, cls) and model.l2 == l2:
            return model
        return cls(l2=l2)._fit_from_gram(keep["train"], keep["gram"])

    def _fit_from_gram(self, x: sp.csr_matrix, gram: np.ndarray) -> "EASE":
        t0 = time.perf_counter()
        self.weights = _ease_weights(gram, self.l2)
        self._train = x
        self.fit_seconds = time.perf_counter() - t0
        return self

    def _score(self, history: sp.csr_matrix) -> np.ndarray:
        assert self.weights is not None
        return np.asarray(history @ self.weights, dtype=np.float32)  # [U', I]


#: co-occurrence entries computed at a time by :func:`_top_similar` (~16 bytes each while ranked)
_SIMILARITY_BLOCK = 2**24


def _cosine_block(xt: sp.csr_matrix, x: sp.csr_matrix, norms: np.ndarray, lo: int, hi: int,
                  shrink: float) -> sp.coo_matrix:
    """Rows ``lo:hi`` of ``S_ij = |U_i ∩ U_j| / (sqrt|U_i| · sqrt|U_j| + shrink)``, ``S_ii = 0`` (row numbers
    relative to ``lo``)."""
    co = (xt[lo:hi] @ x).tocoo()  # [hi-lo, I] co-occurrence counts
    keep = co.row + lo != co.col
    r, c = co.row[keep], co.col[keep]
    data = co.data[keep].astype(np.float64) / (norms[r + lo] * norms[c] + shrink)
    return sp.coo_matrix((data, (r, c)), shape=(hi - lo, x.shape[1]))


def _rank_rows(s: sp.coo_matrix | sp.csr_matrix) -> tuple[np.ndarray, ...]:
    """Every entry of ``s`` with its rank in its row (0 = largest; ties: smaller column):
    ``(rows, cols, vals, rank)``, sorted once so that each ``k`` of a tuning grid is a mask."""
    coo = s.tocoo()
    order = np.lexsort((coo.col, -coo.data, coo.row))  # by row, then -value, then column
    rows, cols, vals = coo.row[order], coo.col[order], coo.data[order]
    starts = np.searchsorted(rows, np.arange(s.shape[0]))  # [I] first entry of each row
    return rows, cols, vals, np.arange(rows.size) - starts[rows]


def _top_similar(x: sp.csr_matrix, shrink: float, k: int, log_every_s: float | None = None) -> tuple[np.ndarray, ...]:
    """Each item's ``k`` most similar items (shrunk cosine), as :func:`_rank_rows` gives them, rank < ``k``.

    Computed a block of item rows at a time and cut to ``k`` per row at once: the whole ``[I, I]`` matrix was
    built, converted and sorted first, which on Book-Crossing's 5-core train (38k items, a few users with
    thousands of books: 1.9·10⁸ co-occurring pairs) took 194 s and 12.5 GB for one fit, and on its raw data
    (8.7·10⁸) would not fit in memory at all. Blocks hold ~``_SIMILARITY_BLOCK`` pairs.

    The kept entries are stored as int32 rows/columns/ranks and float32 values (16 bytes an entry, not 32):
    on Book-Crossing's raw train (299k items) a tuning grid's k=500 keeps 8.7·10⁷ of them, 2.8 GB before
    and 1.4 GB now (that pass peaked at 3.35 GB RSS; the whole tuning process had reached 6.0 GB before). Ranks are taken on the float64 values, then cast; the similarity
    matrix was float32 already. ``log_every_s``: seconds between progress lines (item rows done, ETA); that
    pass alone ran for minutes there without a line.
    """
    x = sp.csr_matrix(x, dtype=np.float32)
    xt = x.T.tocsr()  # [I, U]
    counts = np.asarray(x.sum(axis=0)).ravel()  # |U_i|
    norms = np.sqrt(counts.astype(np.float64))
    # pairs a row of S can have: at most the sum over its users of their item counts
    per_user = np.diff(x.indptr).astype(np.int64)
    per_row = np.asarray(xt @ per_user.astype(np.float64)).ravel()  # [I] upper bound on each row's entries
    bounds = np.cumsum(per_row)
    parts: list[tuple[np.ndarray, ...]] = []
    lo, n = 0, x.shape[1]
    progress = RateLog(log, "ItemKNN similarity", n, "item rows", log_every_s, rate_unit="rows")
    while lo < n:
        # the rows whose pairs fit the block (always at least one row)
        hi = max(lo + 1, int(np.searchsorted(bounds, (bounds[lo - 1] if lo else 0.0) + _SIMILARITY_BLOCK, side="right")))
        hi = min(hi, n)
        rows, cols, vals, rank = _rank_rows(_cosine_block(xt, x, norms, lo, hi, shrink))
        keep = rank < k
        parts.append(((rows[keep] + lo).astype(np.int32), cols[keep].astype(np.int32), vals[keep].astype(np.float32),
                      rank[keep].astype(np.int32)))
        lo = hi
        progress.update(lo)
    if not parts:
        empty = np.zeros(0, np.int32)
        return empty, empty, np.zeros(0, np.float32), empty
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(4))


def _keep_top_k_per_row(ranked: tuple[np.ndarray, ...], k: int, n_items: int) -> sp.csr_matrix:
    """Keep the ``k`` largest entries of each row (ties: smaller column) of ranked entries, as float32 CSR."""
    rows, cols, vals, rank = ranked
    keep = rank < k
    return sp.csr_matrix(
        (vals[keep].astype(np.float32), (rows[keep], cols[keep])), shape=(n_items, n_items), dtype=np.float32
    )


def _check_knn(k: int, shrink: float) -> tuple[int, float]:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ConfigError(f"ItemKNN.k: must be a positive integer (neighbours per item), got {k!r}")
    if isinstance(shrink, bool) or not isinstance(shrink, (int, float, np.floating, np.integer)) or shrink < 0:
        raise ConfigError(f"ItemKNN.shrink: must be a number >= 0, got {shrink!r}")
    return int(k), float(shrink)


class ItemKNN(_HistoryBaseline):
    """Item-based nearest neighbours with shrunk cosine similarity.

    ``S_ij = |U_i ∩ U_j| / (sqrt|U_i|·sqrt|U_j| + shrink)`` where ``U_i`` are
    the training users of item ``i``; each row ``i`` keeps its ``k`` most
    similar items (its neighbours), ``S_ii = 0``. Scores of a history ``x[I]``
    are ``x·S``: each item collects the similarity from every history item
    that has it as a neighbour. ``shrink`` damps similarities supported by few
    users (Sarwar et al. 2001; Deshpande & Karypis 2004).
    """

    name = "ItemKNN"

    def __init__(self, k: int = 100, shrink: float = 10.0, *, log_every_s: float | None = None) -> None:
        super().__init__()
        self.k, self.shrink = _check_knn(k, shrink)
        self.log_every_s = log_every_s  # seconds between progress lines of the similarity pass; None: none
        self.similarity: sp.csr_matrix | None = None  # S [I, I] float32

    def _fit(self, x: sp.csr_matrix) -> None:
        ranked = _top_similar(x, self.shrink, self.k, self.log_every_s)
        self.similarity = _keep_top_k_per_row(ranked, self.k, x.shape[1])

    @classmethod
    def from_tuning(cls, keep: Mapping[str, Any], k: int, *, log_every_s: float | None = None) -> "ItemKNN":
        """The model of ``k`` neighbours fitted from :func:`tune_itemknn`'s ``keep`` (its similarity pass, cut to ``k``)."""
        if k > keep["max_k"]:
            raise ConfigError(f"ItemKNN k={k} is above the largest k tuned ({keep['max_k']}); fit it with .fit(train)")
        return cls(k=k, shrink=keep["shrink"], log_every_s=log_every_s)._fit_from_similarity(keep["train"], keep["ranked"])

    def _fit_from_similarity(self, x: sp.csr_matrix, ranked: tuple[np.ndarray, ...]) -> "ItemKNN":
        """Fit from :func:`_top_similar` entries of ``x`` computed for a ``k`` at least this model's."""
        t0 = time.perf_counter()
        self.similarity = _keep_top_k_per_row(ranked, self.k, x.shape[1])
        self._train = x
        self.fit_seconds = time.perf_counter() - t0
        return self

    def _score(self, history: sp.csr_matrix) -> np.ndarray:
        assert self.similarity is not None
        return np.asarray((history @ self.similarity).toarray(), dtype=np.float32)  # [U', I]

    def rank(self, users: np.ndarray, k: int, exclude: sp.spmatrix | sp.sparray | None) -> np.ndarray:
        """Top-``k`` item rows ``[B, k]`` of ``users``, ``exclude`` (aligned with ``users``) removed, -1 padded.

        The lists ``topk_excluding(self.score(users), k, exclude)`` gives, without a dense row of ``I``
        scores per user: a user's scores are non-zero only on the neighbours of their history (similarities
        are >= 0), so their list is those items by score (ties: the smaller row), then the smallest item
        rows neither excluded nor scored, which all tie at 0. It sorts the stored scores only: on a 1M-item
        catalogue the dense path evaluated ~12 users/s, a six-``k`` tuning on 176k validation users days.
        """
        return self._rank_histories(self._require_fitted()[self._user_rows(users)], k, exclude)

    def rank_history(self, history: sp.spmatrix | sp.sparray, k: int,
                     exclude: sp.spmatrix | sp.sparray | None) -> np.ndarray:
        """:meth:`rank` for ad-hoc histories ``history[B, I]``: the lists of
        ``topk_excluding(self.score_history(history), k, exclude)``, without dense score rows
        (``evaluate --history-from`` at 1M items: ~12 users/s through them)."""
        return self._rank_histories(self._history_csr(history), k, exclude)

    def _rank_histories(self, history: sp.csr_matrix, k: int, exclude: sp.spmatrix | sp.sparray | None) -> np.ndarray:
        _check_rank_k(k)
        assert self.similarity is not None
        n_items, b = self.n_items, history.shape[0]
        out = np.full((b, k), PAD_ID, dtype=np.int64)
        if b == 0:
            return out
        scores = sp.csr_matrix(history @ self.similarity)  # [B, I], few stored per row
        scores.eliminate_zeros()  # a stored 0 ties with the unstored ones: rank it among them
        scores.sum_duplicates()
        ex = _exclusion_mask(exclude, b, n_items)
        rows = np.repeat(np.arange(b), np.diff(scores.indptr))  # [E] the row of each stored score
        cols, vals = scores.indices.astype(np.int64), scores.data
        if ex is not None:  # excluded items are no candidates, whatever their score
            ex_keys = np.repeat(np.arange(b, dtype=np.int64), np.diff(ex.indptr)) * n_items + ex.indices
            keep = ~np.isin(rows * n_items + cols, ex_keys)
            rows, cols, vals = rows[keep], cols[keep], vals[keep]
        order = np.lexsort((cols, -vals, rows))  # by row, then score descending, then the smaller item row
        rows, cols = rows[order], cols[order]
        n_pos = np.bincount(rows, minlength=b)  # [B] positive-score candidates per user
        pos = np.arange(rows.size) - np.repeat(np.cumsum(n_pos) - n_pos, n_pos)  # rank within the row
        top = pos < k
        out[rows[top], pos[top]] = cols[top]
        fill = np.flatnonzero(n_pos < k)  # [F] users whose list goes on with score-0 items, by item row
        if fill.size:
            n_ex = np.diff(ex.indptr)[fill] if ex is not None else np.zeros(fill.size, np.int64)
            # a row's first k - n_pos unblocked items lie below k + its blocked (excluded or positive) items
            width = min(n_items, k + int((n_ex + n_pos[fill]).max()))
            blocked = np.zeros((fill.size, width), dtype=bool)  # [F, W]
            at = np.full(b, -1, dtype=np.int64)
            at[fill] = np.arange(fill.size)
            sel = (at[rows] >= 0) & (cols < width)
            blocked[at[rows[sel]], cols[sel]] = True
            if ex is not None:
                sub = ex[fill]
                r = np.repeat(np.arange(fill.size), np.diff(sub.indptr))
                c = sub.indices.astype(np.int64)
                blocked[r[c < width], c[c < width]] = True
            first = np.argsort(blocked, axis=1, kind="stable")[:, :k]  # [F, min(k, W)] unblocked rows first
            for j, u in enumerate(fill.tolist()):  # F rows of at most k items each
                need = min(k - int(n_pos[u]), first.shape[1])
                ids = first[j, :need]
                ids = ids[~blocked[j, ids]]  # fewer than k items left: the rest stays padding
                out[u, n_pos[u] : n_pos[u] + ids.size] = ids
        return out


def _tuning_setup(
    train: sp.spmatrix | sp.sparray, valid_relevant: sp.spmatrix | sp.sparray, metric: str,
    log_every_s: float | None = None,
) -> tuple[sp.csr_matrix, sp.csr_matrix, EvalProtocol]:
    base, k = parse_metric(metric)
    if base not in PER_USER_METRICS:
        raise ConfigError(f"tuning metric must be one of {list(PER_USER_METRICS)} at some k, got {metric!r}")
    x = _binary_csr(train, "train")
    valid = _binary_csr(valid_relevant, "valid_relevant")
    if valid.shape != x.shape:
        raise DataError(f"valid_relevant has shape {valid.shape} but train has {x.shape}; use the same rows")
    # each setting's evaluation logs too: one takes minutes on a large catalogue (ItemKNN k=500 over 299k items)
    return x, valid, EvalProtocol(ks=(k,), log_every_s=log_every_s)


def _tuning_row(param: str, value: float, model: _HistoryBaseline, result: dict[str, float], k: int) -> dict:
    row: dict = {param: value}
    row.update({f"{name}@{k}": result[f"{name}@{k}"] for name in PER_USER_METRICS})
    row["users_evaluated"] = result["users_evaluated"]
    row["fit_seconds"] = model.fit_seconds
    return row


def _pick(table: list[dict], param: str, metric: str) -> float:
    """The parameter with the best ``metric``; ties go to the earliest row."""
    best = max(range(len(table)), key=lambda i: (table[i][metric], -i))
    return table[best][param]


def sample_tuning_users(valid: sp.csr_matrix, max_users: int | None, seed: int, what: str) -> sp.csr_matrix:
    """``valid`` with the rows of all but ``max_users`` of its users who have a relevant item emptied (the
    evaluator scores only users with one), drawn with ``seed``; unchanged when there are no more than that.

    A tuning's cost is its scoring of each validation user over the catalogue once per setting tried (ItemKNN:
    63-167 s a k for 30,000 users over 40,000 items): a seeded sample of ``eval.ease_tune_max_users`` users
    ranks a handful of settings well enough. The log says how many users ``what`` scores.
    """
    if max_users is not None and max_users < 1:
        raise ConfigError(f"max_users: must be >= 1 or None (validation users for {what}), got {max_users}")
    seed = check_seed(seed)
    users = np.flatnonzero(np.diff(valid.indptr) > 0)
    if max_users is None or users.size <= max_users:
        return valid
    keep = np.zeros(valid.shape[0])
    # its own stream ([seed, 1]): the draw is the same whichever tuning asks, so two tunings score the same users
    keep[np.random.default_rng([seed, 1]).choice(users, size=max_users, replace=False)] = 1.0
    sampled = sp.csr_matrix(sp.diags(keep) @ valid)
    sampled.eliminate_zeros()
    log.info("%s on a sample of %d of the %d validation users", what, max_users, users.size)
    return sampled


#: the ridges λ EASE's tuning tries (the low-rank EASE's too)
EASE_LAMBDAS: tuple[float, ...] = (50, 100, 200, 500, 1000, 2000, 5000)


def tune_ease(
    train: sp.spmatrix | sp.sparray,
    valid_relevant: sp.spmatrix | sp.sparray,
    lambdas: Sequence[float] = EASE_LAMBDAS,
    metric: str = "NDCG@10",
    log_every_s: float | None = None,
    keep: dict[str, Any] | None = None,
    known: Mapping[str, Any] | None = None,
    max_users: int | None = None,
    seed: int = 0,
) -> tuple[float, list[dict]]:
    """Choose EASE's ``l2`` by ``metric`` on validation data.

    Each λ is fitted on ``train`` and scored on ``valid_relevant`` (both
    ``[U, I]``) with training items excluded. The test split is never seen.
    Returns ``(best_lambda, table)``, one table row per λ in the order given
    (ties go to the earlier λ); refit ``EASE(l2=best_lambda)`` to use it.
    ``log_every_s``: seconds between progress log lines (None: none). ``keep``, when given, receives the
    training matrix, its Gram matrix and the best λ's fitted model, from which :meth:`EASE.from_tuning` takes
    the chosen λ's model without solving again, and ``keep["rows"]``: the table with the key of what its rows
    depend on (:func:`ease_rows_key`). ``known``, such a ``keep["rows"]`` from an earlier tuning (the item-item
    term's, recorded in ``run.json``), gives the rows of its λ that are in ``lambdas`` without solving or
    scoring them again, where its key matches this tuning's exactly (else it is ignored): the same rows the
    solve would give, as they come from the same code on the same matrices. ``max_users``: score each λ on at
    most this many validation users (a sample drawn by ``seed``, as :func:`sample_tuning_users` does; None: all):
    the rows' key is the sample's, so the item-item term's rows are reused where it drew the same one.
    """
    if not lambdas:
        raise ConfigError("tune_ease needs at least one lambda, e.g. lambdas=(100, 500)")
    for lam in lambdas:
        _check_l2(lam, "lambdas")  # the argument given, not EASE.l2 the caller never wrote
    x, valid, protocol = _tuning_setup(train, valid_relevant, metric, log_every_s)
    valid = sample_tuning_users(valid, max_users, seed, "tuning EASE's λ")
    key = ease_rows_key(x, valid, metric) if keep is not None or known is not None else None
    reuse = _reusable_rows(known, key, lambdas, metric)
    gram = _gram(x)  # shared by every λ
    if keep is not None:
        keep.update(train=x, gram=gram)
    table: list[dict] = []
    # one EASE solve per λ takes minutes on a large catalogue: the grid would be silent until it ends
    progress = RateLog(log, "tuning EASE λ", len(lambdas), "tried", log_every_s)
    for lam in lambdas:
        if float(lam) in reuse:  # solved and scored on these very matrices before: the same row
            table.append({**reuse[float(lam)], "l2": lam, "fit_seconds": None})  # solved by the earlier tuning
            if keep is not None and all(row[metric] < table[-1][metric] for row in table[:-1]):
                keep.pop("model", None)  # beaten by a λ without a model here: from_tuning solves that one
            progress.update(len(table), f" ({lam:g}: {metric} {table[-1][metric]:.4f}, from the earlier tuning)")
            continue
        model = EASE(l2=lam)._fit_from_gram(x, gram)
        result = evaluate(model, valid, x, protocol, what=f"tuning EASE: λ={lam:g} on valid")
        table.append(_tuning_row("l2", lam, model, result, protocol.ks[0]))
        log.debug("tune_ease: l2=%g %s=%.4f", lam, metric, result[metric])
        progress.update(len(table), f" ({lam:g}: {metric} {result[metric]:.4f})")
        # the best so far is kept for from_tuning (one dense solve fewer: minutes at 20,000 items); the others
        # are freed before the next solve, so at most two weight matrices live at once, as ease_memory_bytes counts
        if keep is not None and all(row[metric] < result[metric] for row in table[:-1]):  # ties: the earlier λ
            keep["model"] = model
        del model
    if keep is not None:
        keep["rows"] = {"key": key, "rows": table}
    return float(_pick(table, "l2", metric)), table


def ease_rows_key(train: sp.spmatrix | sp.sparray, valid_relevant: sp.spmatrix | sp.sparray,
                  metric: str) -> dict[str, str]:
    """What a row of :func:`tune_ease`'s table depends on besides its λ: the exact training and validation
    matrices (binarised, as tuning reads them), the metric, and the code that solved and scored it."""
    from twotower import __version__  # noqa: PLC0415

    x, valid = _binary_csr(train, "train"), _binary_csr(valid_relevant, "valid_relevant")
    return {"train": matrix_digest(x), "valid": matrix_digest(valid), "metric": metric, "version": __version__}


def _reusable_rows(known: Mapping[str, Any] | None, key: dict[str, str] | None, lambdas: Sequence[float],
                   metric: str) -> dict[float, dict]:
    """The rows of ``known`` (an earlier :func:`tune_ease`'s ``keep["rows"]``) for λ of ``lambdas``, by λ; none
    unless its key is ``key``, so rows tuned on other data, users (``train.valid_max_users``) or a metric are
    never mixed into this table."""
    if known is None:
        return {}
    rows = known.get("rows") if isinstance(known, Mapping) else None
    if not isinstance(known, Mapping) or known.get("key") != key or not isinstance(rows, list):
        log.debug("tune_ease: the earlier tuning's rows are not for these matrices and metric; every λ is solved")
        return {}
    grid = {float(lam) for lam in lambdas}
    out = {float(r["l2"]): dict(r) for r in rows if isinstance(r, Mapping) and isinstance(r.get("l2"), (int, float))
           and isinstance(r.get(metric), (int, float)) and float(r["l2"]) in grid}
    if out:  # said: the tuning's seconds drop, and these λ's rows have no fit_seconds of their own
        log.info("tuning EASE λ: %s scored on the same training and validation data already, not solved again",
                 ", ".join(f"{lam:g}" for lam in sorted(out)))
    return out


def tune_itemknn(
    train: sp.spmatrix | sp.sparray,
    valid_relevant: sp.spmatrix | sp.sparray,
    ks: Sequence[int] = (10, 20, 50, 100, 200, 500),
    shrink: float = 10.0,
    metric: str = "NDCG@10",
    log_every_s: float | None = None,
    keep: dict[str, Any] | None = None,
    max_users: int | None = None,
    seed: int = 0,
) -> tuple[int, list[dict]]:
    """Choose ItemKNN's neighbour count ``k`` by ``metric`` on validation data.

    Same protocol as :func:`tune_ease`; the similarity matrix is computed once
    and pruned per ``k``; when the smallest ``k`` of ``ks`` wins, smaller ones (halving, down to 1) are tried
    while the smallest keeps winning. Returns ``(best_k, table)``. ``keep``, when given,
    receives that similarity pass, from which :meth:`ItemKNN.from_tuning` fits
    the chosen ``k`` without a second pass (12 minutes at 299k items).
    ``max_users``: score each k on at most this many validation users (a sample drawn by ``seed``, as
    :func:`sample_tuning_users` does; None: all).
    """
    if not ks:
        raise ConfigError("tune_itemknn needs at least one k, e.g. ks=(50, 100)")
    checked = [_check_knn(k, shrink)[0] for k in ks]
    x, valid, protocol = _tuning_setup(train, valid_relevant, metric, log_every_s)
    valid = sample_tuning_users(valid, max_users, seed, "tuning ItemKNN's k")
    # the largest k's neighbours; each k is a cut of them
    ranked = _top_similar(x, float(shrink), max(checked), log_every_s)
    if keep is not None:
        keep.update(train=x, ranked=ranked, shrink=float(shrink), max_k=max(checked))
    table = []
    progress = RateLog(log, "tuning ItemKNN k", len(checked), "tried", log_every_s)

    def score(k: int) -> None:
        model = ItemKNN(k=k, shrink=shrink)._fit_from_similarity(x, ranked)
        result = evaluate(model, valid, x, protocol, what=f"tuning ItemKNN: k={k} on valid")
        table.append(_tuning_row("k", k, model, result, protocol.ks[0]))
        log.debug("tune_itemknn: k=%d %s=%.4f", k, metric, result[metric])
        progress.update(len(table), f" ({k:g}: {metric} {result[metric]:.4f})")

    for k in checked:
        score(k)
    # a best k at the grid's smallest value may be beaten by a smaller one (ML-1M: k=10 chosen, k=5 better on
    # valid), so the grid is extended downwards by halving while the edge keeps winning; each smaller k is a cut of
    # the neighbours already computed, so this costs one scoring pass a step and only when the edge wins
    best = int(_pick(table, "k", metric))
    while best == min(int(r["k"]) for r in table) and best > 1:
        progress.grow()
        score(max(1, best // 2))
        best = int(_pick(table, "k", metric))
    return best, table
