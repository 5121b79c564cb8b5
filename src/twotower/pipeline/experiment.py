"""Train a two-tower model on prepared data and compare it with baselines in one harness.

Protocol (printed with every table): parameters and the history the user
tower reads come from the training part only; validation is used only for
model selection and early stopping (epochs, EASE's λ, ItemKNN's k); test lists
rank the full catalogue and exclude each user's training and validation items.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from twotower.config import EvalConfig, RunConfig, TrainConfig
from twotower.evaluation.protocol import EvalProtocol, evaluate
from twotower.models.two_tower import TwoTowerModel
from twotower.pipeline.item_item import fit_item_item
from twotower.pipeline.prepare import Prepared
from twotower.training.hooks import draw_curves
from twotower.training.examples import examples_per_epoch
from twotower.training.scorer import TwoTowerScorer
from twotower.training.trainer import Trainer, TrainResult

__all__ = ["PROTOCOL_TEXT", "protocol_text", "build_model_for", "check_model_fits_data", "make_trainer", "train_model", "baseline_scorers", "evaluate_scorers", "exclusion_matrix"]

log = logging.getLogger(__name__)

PROTOCOL_TEXT = (
    "protocol: fit on train only (weights and the history the user tower reads); valid only for selection / "
    "early stopping; test ranks the full catalogue excluding each user's train+valid items; users without test "
    "items skipped"
)

#: What replaces "valid only for selection / early stopping" in the footer of a table scored on valid itself.
SELECTION_SPLIT_TEXT = ("valid is the split the early stopping, the item-item term's weight and the baselines' "
                        "λ / k were chosen on, so these figures are not held out (--split test is)")


#: What replaces "valid only for selection / early stopping" in the footer of a run trained without a valid split.
NO_VALID_TEXT = "no valid split (nothing was chosen on held-out data)"


def protocol_text(history_from: Sequence[str] | None = None, split: str = "test", *, exclude_seen: bool = True,
                  has_valid: bool = True) -> str:
    """The protocol line under an evaluation table: :data:`PROTOCOL_TEXT`, or what ``--history-from`` changes.

    With input-history files the weights are still fit on train only, but every model reads each user's
    history from those files and their items are excluded too, so the footer must not claim train-only input.
    ``exclude_seen=False`` (`evaluate --no-exclude-seen`): nothing is excluded, and the line says so.
    ``has_valid=False``: the run has no valid split, so no valid item is excluded and nothing was selected on one.
    """
    if not history_from:
        text = PROTOCOL_TEXT if split == "test" else PROTOCOL_TEXT.replace("test ranks", f"{split} ranks").replace(
            "train+valid", "train").replace("without test", f"without {split}")
    else:
        files = " ".join(str(f) for f in history_from)
        text = (f"protocol: weights fit on train only; every model reads each user's input history from {files} "
                f"(time order) without refitting; {split} ranks the full catalogue excluding that history and each "
                f"user's train{'+valid' if split == 'test' else ''} items; valid only for selection / early stopping; "
                f"users without {split} items skipped")
    if not has_valid:
        # a run trained without --valid: the footer said "valid only for selection / early stopping" and "excluding
        # each user's train+valid items", of a valid split the run never had (its warnings said "train history")
        text = text.replace("valid only for selection / early stopping", NO_VALID_TEXT).replace("train+valid", "train")
    if split == "valid":
        # the footer said "valid only for selection / early stopping" under a table of valid figures, as if they
        # were held out: the early stop, the item-item term's weight and the baselines' λ / k were chosen on them
        text = text.replace("valid only for selection / early stopping", SELECTION_SPLIT_TEXT)
    if exclude_seen:
        return text
    head, _, tail = text.partition(" ranks the full catalogue ")
    rest = tail.split(";", 1)[1] if ";" in tail else ""
    return (f"{head} ranks the full catalogue, seen items included (--no-exclude-seen: nothing is excluded, so a "
            f"repeat of a history item can be hit);{rest}")


def check_model_fits_data(config: RunConfig, prep: Prepared, text_dim: int = 0) -> list[Any]:
    """ConfigError, before the model is built, when training it cannot fit in this machine's memory
    (models/size.py): `model.item.hidden=[65536, 65536, 65536]` ended in torch's out-of-memory traceback, and
    `loss.kind=full` over a large catalogue, whose parameters fit, was killed in its first steps. Else the
    estimate's terms (``models.size.MemoryTerm``, largest first)."""
    from twotower.models.size import check_training_fits
    from twotower.models.towers import check_item_inputs, check_user_inputs

    item, user = config.model.item, config.model.user
    feats = prep.item_features if item.use_features else None
    # "the collaborative head has no input" came after the item texts were encoded (minutes on a large catalogue)
    check_item_inputs(item, _feature_width(feats))
    check_user_inputs(user, _feature_width(prep.user_features if user.use_features else None))
    n_examples = examples_per_epoch(prep.train_seqs.lengths(), config.train.examples, config.train.max_examples_per_epoch)
    return check_training_fits(config, prep.n_users, prep.n_items, user_features=prep.user_features,
                               item_features=prep.item_features, text_dim=text_dim, n_examples=n_examples)


def _feature_width(feats: Any) -> int:
    """How many feature columns a tower reads from ``feats`` (a data.features table; None: none)."""
    return 0 if feats is None else len(feats.categorical_sizes) + len(feats.multi_sizes) + int(feats.numeric.shape[1])


def build_model_for(config: RunConfig, prep: Prepared, item_text: np.ndarray | None = None) -> TwoTowerModel:
    check_model_fits_data(config, prep, 0 if item_text is None else int(item_text.shape[1]))
    torch.manual_seed(config.train.seed)
    model = TwoTowerModel(
        config.model,
        prep.n_users,
        prep.n_items,
        user_features=prep.user_features,
        item_features=prep.item_features,
        item_text=item_text,
        sparse=config.train.optimizer == "sparse_adam",
    )
    # Items never seen in training keep a zero ID vector, so they are ranked by
    # their features alone instead of by random initial weights.
    cold = np.flatnonzero(prep.item_counts() == 0)
    if model.item_tower.id_emb is not None and len(cold):
        with torch.no_grad():
            model.item_tower.id_emb.weight[torch.as_tensor(cold)] = 0.0
    # Users without training rows (a time split's new users, known by the user table) likewise: no example ever
    # reads their ID row, which kept its random start and moved their lists away from what their features say.
    new_users = np.flatnonzero(prep.train_seqs.lengths() == 0)
    if model.user_tower.id_emb is not None and len(new_users):
        with torch.no_grad():
            model.user_tower.id_emb.weight[torch.as_tensor(new_users)] = 0.0
    return model


def make_trainer(
    config: RunConfig,
    prep: Prepared,
    *,
    out_dir: Path | None = None,
    item_text: np.ndarray | None = None,
) -> tuple[TwoTowerModel, Trainer]:
    """The model and its trainer, not yet fitted: settings they refuse are refused before anything is written."""
    model = build_model_for(config, prep, item_text)
    trainer = Trainer(
        model,
        prep.train_seqs,
        loss=config.loss,
        train=config.train,
        eval=config.eval,
        valid_relevant=prep.matrix("valid"),
        train_matrix=prep.matrix("train"),
        out_dir=out_dir,
    )
    return model, trainer


def train_model(
    config: RunConfig,
    prep: Prepared,
    *,
    out_dir: Path | None = None,
    resume: bool = False,
    item_text: np.ndarray | None = None,
) -> tuple[TwoTowerModel, TrainResult]:
    model, trainer = make_trainer(config, prep, out_dir=out_dir, item_text=item_text)
    result = trainer.fit(resume=resume, curves=False)  # drawn once the item-item term is fitted: the model returned
    try:
        result.item_item = fit_item_item(trainer, prep, config.model.item_item, metric=config.eval.select_metric,
                                         seed=config.train.seed, max_users=config.eval.ease_tune_max_users)
    finally:
        draw_curves(trainer, result.best_epoch or None, item_item=result.item_item)
    return model, result


def exclusion_matrix(prep: Prepared, split: str) -> sp.csr_matrix:
    """What a user must not be recommended when scoring ``split``: train (+ valid for test)."""
    ex = prep.matrix("train")
    if split == "test" and prep.valid is not None:
        ex = (ex + prep.matrix("valid")).tocsr()
        ex.data[:] = 1.0
    return ex


def baseline_scorers(prep: Prepared, names: tuple[str, ...], ks_metric: str = EvalConfig.select_metric, *,
                     ease_max_items: int = EvalConfig.ease_max_items, ease_solver: str = EvalConfig.ease_solver,
                     ease_eigenpairs: int = EvalConfig.ease_eigenpairs,
                     ease_low_rank_max_items: int = EvalConfig.ease_low_rank_max_items,
                     ease_tune_max_users: int | None = EvalConfig.ease_tune_max_users,
                     seed: int = TrainConfig.seed,
                     ) -> dict[str, tuple[Any, float, dict[str, Any]]]:
    """Fit baselines on train (hyper-parameters tuned on valid): name -> (scorer, fit seconds, info).

    EASE is solved as :func:`~twotower.evaluation.baselines.ease_baseline_solver` says (the ``eval.ease_*``
    settings): densely, on ``ease_eigenpairs`` eigenpairs above ``ease_max_items`` (``info["solver"]`` says
    which), or left out with a warning saying why."""
    from twotower.evaluation.baselines import EASE, ItemKNN, Popularity, ease_baseline_solver, tune_ease, tune_itemknn
    from twotower.evaluation.low_rank_ease import LowRankEASE, tune_low_rank_ease

    train = prep.matrix("train")
    valid = prep.matrix("valid")
    out: dict[str, tuple[Any, float, dict[str, Any]]] = {}
    for name in names:
        t0 = time.perf_counter()
        info: dict[str, Any] = {}
        if name == "popularity":
            scorer = Popularity().fit(train)
        elif name == "ease":
            how = ease_baseline_solver(prep.n_items, solver=ease_solver, max_items=ease_max_items,
                                       eigenpairs=ease_eigenpairs, low_rank_max_items=ease_low_rank_max_items)
            if how is None:
                continue
            info["solver"] = how  # a low-rank EASE approximates the dense one: its row must say which it is
            if how == "low_rank":  # tuned on the same λ grid as the dense EASE, from one eigensolve
                scorer = (tune_low_rank_ease(train, valid, metric=ks_metric, k=ease_eigenpairs,
                                             max_users=ease_tune_max_users, seed=seed)[0] if valid is not None
                          else LowRankEASE(k=ease_eigenpairs, seed=seed).fit(train))
                info["eigenpairs"] = scorer.eigenpairs  # kept, at most min(users, items): not always as asked
            elif valid is not None:  # the chosen λ from the tuning's own Gram matrix, not a second one
                keep: dict[str, Any] = {}
                lam, _ = tune_ease(train, valid, metric=ks_metric, keep=keep, max_users=ease_tune_max_users,
                                   seed=seed)
                scorer = EASE.from_tuning(keep, lam)
                keep.clear()  # the Gram matrix is not held while the next baseline is tuned
            else:  # its default, untuned when there is no validation split
                scorer = EASE().fit(train)
            info["lambda"] = scorer.l2
        elif name == "itemknn":
            if valid is not None:  # the chosen k from the tuning's similarity pass, not a second pass
                keep = {}
                # on the seeded sample of validation users the low-rank EASE is tuned on (its cost: every k
                # scores each of them over the catalogue)
                k, _ = tune_itemknn(train, valid, metric=ks_metric, keep=keep, max_users=ease_tune_max_users,
                                    seed=seed)
                info["k"] = k
                scorer = ItemKNN.from_tuning(keep, k)
                keep.clear()  # nor the similarity pass
            else:
                scorer = ItemKNN().fit(train)
        else:
            raise ValueError(name)
        out[name] = (scorer, time.perf_counter() - t0, info)
    return out


def evaluate_scorers(
    prep: Prepared,
    scorers: dict[str, Any],
    *,
    split: str = "test",
    ks: tuple[int, ...] = (10, 20, 50, 100),
) -> dict[str, dict[str, float]]:
    relevant = prep.matrix(split)
    if relevant is None:
        raise ValueError(f"no {split} split to evaluate")
    exclude = exclusion_matrix(prep, split)
    pop = prep.item_counts()
    return {name: evaluate(s, relevant, exclude, EvalProtocol(ks=ks), pop) for name, s in scorers.items()}


def two_tower_scorer(model: TwoTowerModel, prep: Prepared) -> TwoTowerScorer:
    return TwoTowerScorer(model, prep.train_seqs)
