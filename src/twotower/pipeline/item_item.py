"""Fit the closed-form item-item term (models/item_item.py) after training, its weight chosen on validation.

Order of work: EASE's ridge λ is chosen on validation as the EASE baseline's is (:func:`tune_ease`), its
item-item matrix ``B`` is factorised to ``model.item_item.rank`` (a randomized SVD, seeded), and each weight of
``model.item_item.weights`` is scored with the trainer's own validation (the same users, exclusions and metric
as early stopping). The best weight is kept; ``0`` leaves the towers alone. The test split is never read.
Above ``model.item_item.max_items`` items EASE is solved on its Gram matrix's leading eigenpairs
(evaluation/low_rank_ease.py: ``O(I·k)`` memory instead of ``I²``) and the same steps follow.
"""
from __future__ import annotations

import contextlib
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

import numpy as np
import torch

from twotower.config import ItemItemConfig
from twotower.errors import ConfigError
from twotower.training.scorer import TwoTowerScorer

if TYPE_CHECKING:
    import scipy.sparse as sp

    from twotower.models.history import UserSequences
    from twotower.models.two_tower import TwoTowerModel
    from twotower.pipeline.prepare import Prepared
    from twotower.training.trainer import Trainer

__all__ = ["factorise", "factorise_off_diagonal", "factorise_product", "fit_item_item", "gain_words", "save_fits",
           "skip_reason", "solver", "towers_learned_little"]

log = logging.getLogger(__name__)

#: extra directions the randomized SVD carries beyond the rank, and its power iterations (Halko et al. 2011,
#: "Finding structure with randomness", Alg. 4.4): enough for the leading singular vectors of an EASE matrix
_OVERSAMPLE = 16
_POWER_ITERATIONS = 4

#: the towers alone under this share of the validation figure with the term: the figure is the term's, and a
#: relative gain measures how little the towers learned, not what the term adds (3 optimizer steps of
#: train.examples=sequence on 1,500 ML-1M users: NDCG@10 0.0007 alone, "+3265.2% over the towers alone")
TOWERS_NEAR_NOTHING = 0.1
#: what the lines say then, after the towers' figure
LEARNED_LITTLE = "they learned almost nothing; the figure comes from the item-item term"


def towers_learned_little(alone: float | None, best: float) -> bool:
    """Whether the towers alone (``alone``, the weight-0 validation figure) scored near nothing beside ``best``,
    the figure with the term (under :data:`TOWERS_NEAR_NOTHING` of it)."""
    return alone is not None and best > 0 and alone < TOWERS_NEAR_NOTHING * best


def gain_words(alone: float | None, best: float) -> str:
    """The log line's clause on the term's gain: ``" (+6.6% over the towers alone)"``, or where the towers alone
    scored near nothing the two figures (a percentage of nearly nothing reads as a feat of the term); "" with no
    weight-0 row."""
    if towers_learned_little(alone, best):
        return f" (the towers alone {alone:.4f} against {best:.4f}: {LEARNED_LITTLE})"
    return f" ({best / alone - 1:+.1%} over the towers alone)" if alone else ""


def factorise(b: np.ndarray, rank: int, seed: int) -> tuple[np.ndarray, np.ndarray, float]:
    """``(P [I, r], Q [I, r], share)`` with ``b ~ P Q^T``, ``Q``'s columns orthonormal, and ``share`` the part
    of ``||b||_F^2`` the rank-``r`` factors keep. ``r = min(rank, I)``; exact SVD for small matrices, a seeded
    randomized SVD otherwise, so a run's seed fixes the factors."""
    n = b.shape[0]
    r = min(rank, n)
    if n <= 4 * (r + _OVERSAMPLE):
        u, s, vt = np.linalg.svd(b.astype(np.float64))
    else:
        basis = _range_basis(lambda m: b @ m, lambda m: b.T @ m, n, r + _OVERSAMPLE, seed, b.dtype)
        uh, s, vt = np.linalg.svd(basis.T @ b.astype(np.float64), full_matrices=False)
        u = basis @ uh
    return _truncated(u, s, vt, r, float(np.square(b, dtype=np.float64).sum()))


def _range_basis(apply: Callable[[np.ndarray], np.ndarray], apply_t: Callable[[np.ndarray], np.ndarray], n: int,
                 width: int, seed: int, dtype: Any) -> np.ndarray:
    """An orthonormal float64 ``[n, width]`` basis of the leading range of the ``[n, n]`` matrix that ``apply``
    (and ``apply_t``, its transpose) multiply by: seeded, so a run's seed fixes it."""
    rng = np.random.default_rng(seed)
    y = apply(rng.standard_normal((n, width)).astype(dtype))  # [I, k]
    for _ in range(_POWER_ITERATIONS):  # re-orthonormalised each pass, or the small directions round away
        y, _ = np.linalg.qr(y)
        y, _ = np.linalg.qr(apply_t(y))
        y = apply(y)
    basis, _ = np.linalg.qr(y.astype(np.float64))  # [I, k]
    return basis


def _truncated(u: np.ndarray, s: np.ndarray, vt: np.ndarray, r: int, total: float) -> tuple[np.ndarray, np.ndarray,
                                                                                             float]:
    """``(P, Q, share)`` of the SVD ``u diag(s) vt`` cut to rank ``r``; ``total``: the matrix's ``||.||_F^2``."""
    share = float(np.square(s[:r]).sum() / total) if total > 0 else 1.0
    p = (u[:, :r] * s[:r]).astype(np.float32)
    q = np.ascontiguousarray(vt[:r].T, dtype=np.float32)
    return p, q, share


def skip_reason(trainer: "Trainer", prep: "Prepared", config: ItemItemConfig) -> str | None:
    """Why the term is not fitted for this run, before the catalogue's size and the memory are asked about
    (:func:`solver`); None: go on."""
    model = trainer.model
    if not config.enabled:
        return "model.item_item.enabled = false"
    if trainer.valid_relevant is None or prep.valid is None:
        return "no validation data to choose its weight on"
    if not model.user_tower.uses_history:
        return "the user tower reads no history (model.user.history = none)"
    if model.item_tower.semantic is not None:
        return "the dual-head item tower's explanations split its score between its two heads only"
    return None


def solver(n_items: int, config: ItemItemConfig) -> tuple[str, str | None, str | None]:
    """``(solver, why_not_dense, why_not_at_all)``: ``"dense"`` (EASE's exact solve) or ``"low_rank"`` (on the Gram
    matrix's leading eigenpairs, evaluation/low_rank_ease.py); why the dense solve is not used (None when it
    is); why the term cannot be fitted here at all (None: go ahead). ``auto`` solves densely up to
    ``max_items`` where the memory is available, and low-rank otherwise."""
    from twotower.evaluation.low_rank_ease import choose_ease_solver
    from twotower.utils.runtime import available_memory

    # forced dense: max_items aside (the memory still decides); the baseline's eval.ease_solver=dense keeps its limit
    return choose_ease_solver(n_items, config.solver,
                              dense_max_items=config.max_items if config.solver == "auto" else n_items,
                              eigenpairs=config.eigenpairs, available_bytes=available_memory(),
                              solver_setting="model.item_item.solver", dense_setting="model.item_item.max_items",
                              low_rank_max_items=config.low_rank_max_items,
                              low_rank_setting="model.item_item.low_rank_max_items",
                              low_rank_fix="raise model.item_item.low_rank_max_items to fit it anyway")


def factorise_product(a: np.ndarray, c: np.ndarray, rank: int) -> tuple[np.ndarray, np.ndarray, float]:
    """:func:`factorise` for a matrix given as the product ``a cᵀ`` (``[I, k]`` each), without forming it: the
    SVD of the ``[k, k]`` core between the two QR factors."""
    qa, ra = np.linalg.qr(a.astype(np.float64))
    qc, rc = np.linalg.qr(c.astype(np.float64))
    u, s, wt = np.linalg.svd(ra @ rc.T)
    r = min(rank, s.size)
    total = float(np.square(s).sum())
    share = float(np.square(s[:r]).sum() / total) if total > 0 else 1.0
    p = ((qa @ u[:, :r]) * s[:r]).astype(np.float32)
    q = np.ascontiguousarray(qc @ wt[:r].T, dtype=np.float32)
    return p, q, share


def factorise_off_diagonal(a: np.ndarray, c: np.ndarray, rank: int, seed: int) -> tuple[np.ndarray, np.ndarray,
                                                                                          float]:
    """:func:`factorise` for the matrix ``a cᵀ`` (``[I, k]`` each) with its diagonal set to zero, without forming
    it: EASE's ``B`` as :meth:`~twotower.evaluation.low_rank_ease.LowRankEASE.factors` gives it. The product's own
    diagonal (``1/(λ d_j) − 1``) is no part of ``B``: factorised with it, each history item scored itself, up to
    1.5 above EASE's score of it on 30 items, and ranked first wherever the history is not excluded."""
    n = a.shape[0]
    r = min(rank, n)
    diagonal = np.einsum("ik,ik->i", a, c)  # [I]
    if n <= 4 * (r + _OVERSAMPLE):
        b = a @ c.T
        np.fill_diagonal(b, 0.0)
        return factorise(b, rank, seed)
    basis = _range_basis(lambda m: a @ (c.T @ m) - diagonal[:, None] * m,
                         lambda m: c @ (a.T @ m) - diagonal[:, None] * m, n, r + _OVERSAMPLE, seed, np.float64)
    projected = c @ (a.T @ basis) - diagonal[:, None] * basis  # Bᵀ basis, [I, width]
    uh, s, vt = np.linalg.svd(projected.T, full_matrices=False)
    # ||a cᵀ||_F² from the [k, k] Gram matrices, less the diagonal's own share
    total = float(((a.T @ a) * (c.T @ c)).sum() - np.square(diagonal).sum())
    return _truncated(basis @ uh, s, vt, r, total)


def fit_item_item(trainer: "Trainer", prep: "Prepared", config: ItemItemConfig, *, metric: str,
                  seed: int, max_users: int | None = None) -> dict[str, Any] | None:
    """Fit the term into ``trainer.model`` (its best weights, after ``fit``) and return what ``run.json``
    records of it (the weight chosen, ``0.0`` when the towers alone validate best), or None when skipped.
    ``max_users``: λ and the weight are chosen on a sample of at most this many of the early-stopping users,
    drawn with ``seed`` (``eval.ease_tune_max_users``, as the baselines' tunings; None: all of them)."""
    from twotower.evaluation.baselines import EASE, sample_tuning_users, tune_ease
    from twotower.evaluation.low_rank_ease import low_rank_ease_memory_bytes, tune_low_rank_ease
    from twotower.utils.progress import heartbeat

    # the solver is chosen once: the memory available, which it reads, may change between two asks
    why = skip_reason(trainer, prep, config)
    how, dense_why, too_big = solver(prep.n_items, config) if why is None else ("", None, None)
    why = why or too_big
    if why is not None:
        if config.enabled:
            log.info("item-item term: not fitted (%s)", why)
        return None
    t0 = time.perf_counter()
    model = trainer.model
    # each λ is a dense solve of the item-item Gram matrix, minutes at 20,000 items: the log says so, then beats
    every = trainer.cfg.log_every_s if trainer.cfg.progress else None
    solve = "" if how == "dense" else (f" on its Gram matrix's {config.eigenpairs} leading eigenpairs ({dense_why}; "
                                       f"~{low_rank_ease_memory_bytes(prep.n_items, config.eigenpairs) / 2**30:.1f} GiB)")
    log.info("item-item term: tuning EASE's λ (%s)%s on valid %s over %d items, factorising to rank %d, then "
             "choosing the weight (%s) ...", ", ".join(f"{lam:g}" for lam in config.lambdas), solve, metric,
             prep.n_items, config.rank, ", ".join(f"{w:g}" for w in sorted(set(config.weights))))
    kept = 0  # the low-rank solve's eigenpairs, as fitted: fewer than asked where there are fewer users or items
    lambda_table: dict[str, Any] | None = None  # the dense tuning's rows (the low-rank one is seeded and sampled)
    # on a seeded sample of the early-stopping users (train.valid_max_users draws those once): every λ and every
    # weight scores each of them over the catalogue, 9 weights and 3 λ taking minutes at 30,000 users x 40,000
    # items. The sampled matrix is what the λ rows' key digests, so the EASE baseline reuses them only on it
    assert trainer.valid_relevant is not None  # skip_reason said so
    valid = sample_tuning_users(trainer.valid_relevant, max_users, seed, "item-item term: choosing λ and the weight")
    with heartbeat(log, "item-item term", every), _lambda_named():
        if how == "dense":
            keep: dict[str, Any] = {}
            lam, _ = tune_ease(prep.matrix("train"), valid, lambdas=config.lambdas, metric=metric,
                               log_every_s=every, keep=keep)
            b = EASE.from_tuning(keep, lam).weights
            # its rows (λ, valid metrics) and what they were computed on: the EASE baseline's tuning takes the
            # rows of the λ its grid shares instead of solving them again, where its matrices and metric match
            # (without the solves' seconds: run.json records what was chosen, and a refit on the same data the same)
            lambda_table = {"key": keep["rows"]["key"],
                            "rows": [{k: v for k, v in row.items() if k != "fit_seconds"} for row in keep["rows"]["rows"]]}
            keep.clear()
            assert b is not None
            p, q, share = factorise(b, config.rank, seed)
            del b
        else:
            low, _ = tune_low_rank_ease(prep.matrix("train"), valid, lambdas=config.lambdas,
                                        metric=metric, k=config.eigenpairs, seed=seed, log_every_s=every)
            lam, kept = low.l2, low.eigenpairs
            p, q, share = factorise_off_diagonal(*low.factors(), config.rank, seed)
            del low
    model.set_item_item(torch.from_numpy(p), torch.from_numpy(q), 0.0)
    listed = sorted(set(config.weights))
    # the towers alone (weight 0) are validated even when the list leaves 0 out, for the record and the summary: a
    # list of [1.0] kept a term that lowered validation, and the summary said "chosen" with no figure to compare
    table = _weight_grid(trainer, sorted(set(listed) | {0.0}), metric, every, valid)
    best = max((row for row in table if row["weight"] in listed), key=lambda row: row[metric])
    base = next((row[metric] for row in table if row["weight"] == 0.0), None)
    if 0.0 not in listed and base is not None and base > best[metric]:
        log.warning("item-item term: the towers alone validate better (%s %.4f) than every weight in "
                    "model.item_item.weights (best %g: %.4f); the term is kept as the list asks. Add 0 to the list "
                    "to let training drop it, or set model.item_item.enabled=false", metric, base, best["weight"],
                    best[metric])
    if best["weight"] == 0.0:
        model.detach_item_item()
    else:
        model.set_item_item_weight(best["weight"])
    info = {"weight": best["weight"], "rank": int(q.shape[1]), "lambda": float(lam), "energy": round(share, 6),
            "solver": how, **({"eigenpairs": kept} if how == "low_rank" else {}),
            **({"lambda_table": lambda_table} if lambda_table is not None else {}),
            "metric": metric, "valid_metric": best[metric], "valid": table, "weights": listed,
            "seconds": round(time.perf_counter() - t0, 3)}
    shown = ", ".join(f"{row['weight']:g}: {row[metric]:.4f}" for row in table)
    gain = gain_words(base, best[metric]) if best["weight"] else ""
    # on a sample the figures are not the early-stopping figure printed beside them: say whose they are
    scored, of = _users_with_rows(valid), _users_with_rows(trainer.valid_relevant)
    info["valid_users"], info["valid_users_of"] = scored, of  # `twotower train` prints the sample too
    sample = f" (a sample of {scored:,} of the {of:,} validation users)" if scored < of else ""
    log.info("item-item term (%sEASE λ=%g, rank %d, %.0f%% of its energy): weight %g chosen on valid %s%s%s [%s], "
             "%.1fs", "" if how == "dense" else f"low-rank ({kept} eigenpairs) ", lam, info["rank"], 100 * share,
             best["weight"], metric, sample, gain, shown, info["seconds"])
    return info


@contextlib.contextmanager
def _lambda_named() -> Iterator[None]:
    """EASE's failed solve (either solver) refused as the setting its λ came from: model.item_item.lambdas=[1e-300]
    failed after training with "EASE: G + λI is not positive definite (LAPACK potrf info 600); raise l2
    (λ=1e-300)", naming no setting (the low-rank solve with "scores contain NaN")."""
    from twotower.evaluation.baselines import EaseSolveError

    try:
        yield
    except EaseSolveError as e:
        default = ", ".join(f"{lam:g}" for lam in ItemItemConfig.lambdas)
        raise ConfigError(f"model.item_item.lambdas: λ={e.l2:g} is too small for EASE's solve on the training "
                          f"interactions ({e.reason}); give larger values (typical 50..5000; the default is "
                          f"[{default}])") from None


def _users_with_rows(matrix: Any) -> int:
    """Users with at least one relevant item: those a validation scores."""
    return int((np.diff(matrix.indptr) > 0).sum())


class _WeightGridScorer(TwoTowerScorer):
    """Scores as the model does at ``weight``, from vectors computed once at weight 1.

    Both sides carry ``sqrt(w)`` times the term's last ``r`` columns (models/item_item.py), so a weight only scales
    those columns: the user tower's forward pass (a third of each validation for a transformer over 30,000 users)
    runs once for the grid instead of once per weight.
    """

    def __init__(self, model: "TwoTowerModel", history: "UserSequences") -> None:
        model.set_item_item_weight(1.0)  # the vectors the weights scale (the model is set to each weight, too)
        super().__init__(model, history)
        self._items_at_1 = self.items
        self._users_at_1: dict[bytes, torch.Tensor] = {}  # validation scores the same batches for every weight
        self._r = model.item_tower.output_dim - model.config.item.out_dim
        self.weight = self._items_weight = 1.0

    def _scaled(self, v: torch.Tensor) -> torch.Tensor:
        out = v.clone()
        out[:, v.shape[1] - self._r :] *= float(np.sqrt(self.weight))
        return out

    def user_vectors(self, users: np.ndarray) -> torch.Tensor:
        key = np.asarray(users, np.int64).tobytes()
        if key not in self._users_at_1:
            weight = float(self.model.user_tower.item_item.weight)  # type: ignore[union-attr]
            self.model.set_item_item_weight(1.0)
            self._users_at_1[key] = super().user_vectors(users)
            self.model.set_item_item_weight(weight)
        return self._scaled(self._users_at_1[key])

    def score(self, users: np.ndarray) -> np.ndarray:
        if self._items_weight != self.weight:  # once per weight, not per batch of users
            self.items, self._items_weight = self._scaled(self._items_at_1), self.weight
        return super().score(users)


def _weight_grid(trainer: "Trainer", weights: list[float], metric: str, every: float | None,
                 valid: "sp.csr_matrix") -> list[dict[str, float]]:
    """Validate each weight (ascending: a tie keeps the smaller one), with a progress line every ``every`` s: each
    weight is a full validation (15 s for 30,000 users over 40,000 items), and the grid was silent for minutes."""
    from twotower.utils.progress import RateLog

    progress = RateLog(log, "item-item term: choosing the weight", len(weights), "weights", every)
    scorer = _WeightGridScorer(trainer.model, trainer.seqs)
    table: list[dict[str, float]] = []
    # the trainer's own validation (its exclusions, cut-offs and progress), on the sample of its users: theirs
    # again afterwards, should anything validate after the fit
    held, trainer.valid_relevant = trainer.valid_relevant, valid
    try:
        for w in weights:
            trainer.model.set_item_item_weight(w)
            scorer.weight = w
            table.append({"weight": w, metric: float(trainer.validate(scorer)[metric])})
            progress.update(len(table), f" ({w:g}: {metric} {table[-1][metric]:.4f})")
    finally:
        trainer.valid_relevant = held
    return table


def save_fits(out: Path, model: torch.nn.Module, records: dict[str, dict[str, Any]], *, weights: bool) -> None:
    """Record the fits made after training as ``out/run.json[key]`` for each key of ``records`` and, with
    ``weights``, the weights they changed in ``model.safetensors``: one set, written once for all of them, so a
    kill between the files never leaves weights that ``run.json`` does not describe."""
    from safetensors.torch import save

    from twotower.training.checkpoint import state_tensors
    from twotower.utils.atomic import atomic_write_set, json_text, read_json

    files = {out / "run.json": json_text({**read_json(out / "run.json"), **records}).encode("utf-8")}
    if weights:
        files[out / "model.safetensors"] = save(state_tensors(model))
    atomic_write_set(files)
