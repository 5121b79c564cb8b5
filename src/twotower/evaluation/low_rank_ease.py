"""EASE for catalogues too large for its dense solve: the same closed form on a low-rank Gram matrix.

EASE (Steck 2019, "Embarrassingly Shallow Autoencoders for Sparse Data", WWW) needs ``P = (G + λI)⁻¹`` for the
item Gram matrix ``G = XᵀX``: ``I³`` flops and ``I²`` memory. Keep instead the ``k`` leading eigenpairs
``G ≈ V diag(s²) Vᵀ`` (``V [I, k]`` orthonormal, found by a seeded randomized eigensolver that multiplies by
``X`` and ``Xᵀ`` and never forms ``G``) and take the rest of the spectrum as zero. Then (Woodbury)::

    P = I/λ − V F Vᵀ,          F = diag(s² / (λ (s² + λ)))
    d = diag(P) = Σ_k V_ik² / (s_k² + λ) + (1 − Σ_k V_ik²) / λ

and EASE's ``B = I − P diag(1/d)`` is, off its diagonal, ``(V F)(diag(1/d) V)ᵀ``. A history ``x`` scores item
``j`` with ``Σ_i x_i B_ij``, where ``B_jj`` (zero) only meets ``x_j``: an item of the history. So every item's
score is ``x (V F) (diag(1/d) V)ᵀ``, a rank-``k`` product held in ``O(I·k)`` memory, less ``x_j`` times the
product's diagonal (``1/(λ d_j) − 1``, not EASE's zero) for the items of the history: ranked without excluding
the history (`evaluate --no-exclude-seen`), they are scored as the dense EASE scores them.

Cost: a few passes of ``X`` over ``k`` columns (``O(nnz·k)``) and QR factorisations of ``[I, k]`` blocks.
On MovieLens-1M's 3,416 items, 256 eigenpairs validate at NDCG@10 0.0506 against the dense solve's 0.0518.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import scipy.sparse as sp

from twotower.errors import ConfigError
from twotower.evaluation.baselines import (
    EASE_LAMBDAS,
    EaseSolveError,
    _check_l2,
    _HistoryBaseline,
    _pick,
    _tuning_row,
    _tuning_setup,
    ease_skip_reason,
    log,
    _scientific,
    sample_tuning_users,
)
from twotower.evaluation.protocol import evaluate
from twotower.utils.progress import RateLog
from twotower.utils.arguments import check_seed

__all__ = ["LowRankEASE", "choose_ease_solver", "gram_eigenpairs", "low_rank_ease_memory_bytes", "tune_low_rank_ease"]

#: extra directions the randomized eigensolver carries beyond ``k`` and its power iterations (Halko, Martinsson
#: & Tropp 2011, "Finding structure with randomness", Alg. 4.4 and 5.3)
_OVERSAMPLE = 16
_POWER_ITERATIONS = 4


def gram_eigenpairs(x: sp.csr_matrix, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(V [I, k], s2 [k])``: the ``k`` leading eigenvectors and eigenvalues of ``XᵀX`` (float64, descending),
    ``k`` at most ``min(U, I)``. Seeded, so a run's seed fixes them."""
    n_users, n_items = x.shape
    k = min(k, n_users, n_items)
    width = min(k + _OVERSAMPLE, n_users, n_items)
    xt = x.T.tocsr()
    rng = np.random.default_rng(seed)
    y = xt @ (x @ rng.standard_normal((n_items, width)))  # [I, width]
    for _ in range(_POWER_ITERATIONS):  # re-orthonormalised each pass, or the small directions round away
        y, _ = np.linalg.qr(y)
        y = xt @ (x @ y)
    basis, _ = np.linalg.qr(y)  # [I, width]
    # XᵀX restricted to the basis is (X basis)ᵀ(X basis): its SVD gives the eigenpairs
    _, s, vt = np.linalg.svd(np.asarray(x @ basis), full_matrices=False)
    return basis @ vt[:k].T, np.square(s[:k])


def low_rank_ease_memory_bytes(n_items: int, k: int) -> int:
    """Peak memory of :func:`gram_eigenpairs` and the factors: a few float64 ``[I, k + oversample]`` blocks."""
    return 6 * 8 * n_items * (k + _OVERSAMPLE)


def choose_ease_solver(
    n_items: int,
    solver: str,
    *,
    dense_max_items: int,
    eigenpairs: int,
    available_bytes: int | None,
    solver_setting: str,
    dense_setting: str,
    dense_fix: str | None = None,
    low_rank_max_items: int | None = None,
    low_rank_setting: str = "",
    low_rank_fix: str | None = None,
) -> tuple[str, str | None, str | None]:
    """``(solver, why_not_dense, why_not_at_all)`` for an EASE on ``n_items``: ``"dense"`` (the exact solve) or
    ``"low_rank"`` (:class:`LowRankEASE` on ``eigenpairs``); why the dense solve is not used (None when it is);
    why EASE cannot be fitted at all (None: go ahead). Shared by the item-item term and the EASE baseline.

    ``solver`` is ``auto`` (dense up to ``dense_max_items`` where its memory is available, low-rank otherwise),
    ``dense`` (no low-rank fallback: :func:`~twotower.evaluation.baselines.ease_skip_reason` against
    ``dense_max_items``) or ``low_rank`` (``solver_setting = low_rank``). The low-rank form is refused above
    ``low_rank_max_items`` (None: no limit) and where its memory is not available. ``*_setting`` name the
    settings in the messages and ``*_fix`` end the ones that a larger limit would lift.
    """
    if solver == "low_rank":
        dense_why: str | None = f"{solver_setting} = low_rank"
    else:
        dense_why = ease_skip_reason(n_items, dense_max_items, available_bytes, setting=dense_setting, fix=dense_fix)
        if dense_why is None or solver == "dense":
            return "dense", dense_why, dense_why
    need = low_rank_ease_memory_bytes(n_items, eigenpairs)
    if low_rank_max_items is not None and n_items > low_rank_max_items:
        # its time, not its memory, is what the limit guards: each λ tried scores every validation user over
        # the whole catalogue through the eigenpairs, ~2·I·eigenpairs flops a user
        return "low_rank", dense_why, (f"{n_items:,} items > {low_rank_setting}={low_rank_max_items:,} (the "
                                       f"low-rank EASE on {eigenpairs} eigenpairs needs ~{need / 2**30:.1f} GiB and "
                                       f"~{_scientific(2 * n_items * eigenpairs)} flops per user scored)"
                                       + (f"; {low_rank_fix}" if low_rank_fix else ""))
    if available_bytes is not None and need > available_bytes:
        return "low_rank", dense_why, (f"{n_items:,} items need ~{need / 2**30:.1f} GiB for the low-rank EASE's "
                                       f"{eigenpairs} eigenpairs, more than the {available_bytes / 2**30:.1f} GiB "
                                       "available")
    return "low_rank", dense_why, None


class LowRankEASE(_HistoryBaseline):
    """EASE on the ``k`` leading eigenpairs of its Gram matrix (the module docstring has the math).

    ``l2`` is EASE's λ, ``k`` the eigenpairs asked for (the item-item term's ``model.item_item.eigenpairs``;
    :attr:`eigenpairs` is how many a fit kept, at most ``min(users, items)``), ``seed`` the randomized
    eigensolver's. :meth:`with_l2`
    gives the model of another λ from the same eigenpairs (tuning solves once). :meth:`factors` returns
    ``(A, C)`` with the scores of items outside the history ``x A Cᵀ``.
    """

    name = "EASE (low-rank)"

    def __init__(self, l2: float = 500.0, *, k: int, seed: int = 0) -> None:
        super().__init__()
        if k < 1:
            raise ConfigError(f"LowRankEASE.k: must be >= 1, got {k!r}")
        self.l2, self.k, self.seed = _check_l2(l2, "LowRankEASE.l2"), int(k), check_seed(seed, "LowRankEASE.seed")
        self._eigen: tuple[np.ndarray, np.ndarray] | None = None
        self._factors: tuple[np.ndarray, np.ndarray] | None = None
        self._scoring: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def _fit(self, x: sp.csr_matrix) -> None:
        self._eigen = gram_eigenpairs(x, self.k, self.seed)
        self._factors = self._scoring = None

    @property
    def eigenpairs(self) -> int:
        """The eigenpairs the fit kept: ``k``, or fewer where the training matrix has fewer users or items (a run
        labelled with ``k`` claimed 256 eigenpairs from 40 users' 40)."""
        self._require_fitted()
        assert self._eigen is not None
        return int(self._eigen[1].shape[0])

    def with_l2(self, l2: float) -> "LowRankEASE":
        """The fitted model of ridge ``l2`` from this model's eigenpairs (no second eigensolve)."""
        other = LowRankEASE(l2, k=self.k, seed=self.seed)
        other._eigen, other._train, other.fit_seconds = self._eigen, self._require_fitted(), self.fit_seconds
        return other

    def factors(self) -> tuple[np.ndarray, np.ndarray]:
        """``(A [I, k], C [I, k])`` float64: off the diagonal, EASE's ``B = A Cᵀ``."""
        if self._factors is None:
            self._require_fitted()
            assert self._eigen is not None
            v, s2 = self._eigen
            lam = self.l2
            outside = np.clip(1.0 - np.square(v).sum(axis=1), 0.0, None)  # the part of e_i outside span(V)
            d = (np.square(v) / (s2 + lam)).sum(axis=1) + outside / lam  # diag(P) > 0
            self._factors = (v * (s2 / (lam * (s2 + lam))), v / d[:, None])
        return self._factors

    def _score(self, history: sp.csr_matrix) -> np.ndarray:
        if self._scoring is None:  # float32 products: twice the float64 speed, and EASE's dense B is float32 too
            a, c = self.factors()
            with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused below, in words
                diagonal = np.einsum("ik,ik->i", a, c)  # [I] the product's diagonal, where EASE's B has zeros
                scoring = (a.astype(np.float32), np.ascontiguousarray(c.T, dtype=np.float32),
                           diagonal.astype(np.float32))
            if not all(np.isfinite(f).all() for f in scoring):  # A grows as 1/λ: λ=1e-300 scored NaN everywhere
                raise EaseSolveError("its weights pass float32's range (they grow as 1/λ)", self.l2, model=self.name)
            self._scoring = scoring
        a32, ct32, diagonal = self._scoring
        scores = np.asarray(history @ a32) @ ct32  # [U', I]
        # a history item's own term x_j B_jj is zero in EASE: unmasked (--no-exclude-seen) the product's diagonal,
        # up to 1/(λ d_j), put every history item first (ML-100K, λ=100: Recall@10 0.0000 where EASE has 0.0098)
        rows = np.repeat(np.arange(history.shape[0]), np.diff(history.indptr))
        scores[rows, history.indices] -= history.data * diagonal[history.indices]
        return scores


def tune_low_rank_ease(
    train: sp.spmatrix | sp.sparray,
    valid_relevant: sp.spmatrix | sp.sparray,
    lambdas: Sequence[float] = EASE_LAMBDAS,
    metric: str = "NDCG@10",
    *,
    k: int,
    seed: int = 0,
    log_every_s: float | None = None,
    max_users: int | None = None,
) -> tuple[LowRankEASE, list[dict]]:
    """Choose :class:`LowRankEASE`'s λ by ``metric`` on validation, as :func:`tune_ease` chooses EASE's: one
    eigensolve, then each λ scored with training items excluded (ties to the earlier λ). Returns the model of
    the chosen λ, fitted, and one table row per λ.

    ``max_users``: score each λ on at most this many validation users (a sample drawn by ``seed``; None: all).
    Scoring, not the eigensolve, is what grows here: every λ ranks the whole catalogue for each validation user,
    about 12 CPU-minutes per λ for 100,000 users over 50,000 items, where the eigensolve took 35 s.
    """
    if not lambdas:
        raise ConfigError("tune_low_rank_ease needs at least one lambda, e.g. lambdas=(100, 500)")
    for lam in lambdas:  # all of them before the eigensolve, named as given (it said LowRankEASE.l2:)
        _check_l2(lam, "lambdas")
    if max_users is not None and max_users < 1:
        raise ConfigError(f"max_users: must be >= 1 or None (validation users for tuning low-rank EASE's λ), "
                          f"got {max_users}")
    x, valid, protocol = _tuning_setup(train, valid_relevant, metric, log_every_s)
    valid = sample_tuning_users(valid, max_users, seed, "tuning low-rank EASE's λ")
    base = LowRankEASE(lambdas[0], k=k, seed=seed).fit(x)
    table: list[dict] = []
    # only the best λ's model so far is kept: each holds its float64 factors and a float32 scoring copy (2.3 GB a
    # λ at 373,000 items and k=256), and keeping every λ's took twice the memory low_rank_ease_memory_bytes
    # estimates (9.6 GB where it said 4.5 GiB, three λ tried)
    best: LowRankEASE | None = None
    progress = RateLog(log, "tuning low-rank EASE λ", len(lambdas), "tried", log_every_s)
    for lam in lambdas:
        model = base.with_l2(lam)
        result = evaluate(model, valid, x, protocol, what=f"tuning low-rank EASE: λ={lam:g} on valid")
        table.append(_tuning_row("l2", lam, model, result, protocol.ks[0]))
        log.debug("tune_low_rank_ease: l2=%g %s=%.4f", lam, metric, result[metric])
        if best is None or _pick(table, "l2", metric) == lam:  # ties to the earlier λ, as _pick's
            best = model
        del model  # a λ that is not the best lets go of its factors now, not after the last λ
        progress.update(len(table), f" ({lam:g}: {metric} {result[metric]:.4f})")
    assert best is not None and best.l2 == _pick(table, "l2", metric)
    return best, table
