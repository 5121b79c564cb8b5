"""What a validation score measures, so that a resumed fit compares its epochs with a best of the same measure.

The checkpoint's best value was measured with the run's ``eval.select_metric`` over the run's validation users
(``train.valid_max_users`` of them, drawn with ``train.seed``), or is the negated training loss of a run without
validation data. A resume that changed either compared its epochs with a figure of another measure, without a
word: ``eval.select_metric=Precision@10`` read the run's NDCG@10 0.1764 as "best Precision@10" (0.13 epochs could
never beat it, and the run kept the old weights), and ``train.valid_max_users=50`` compared 50 users' scores with
all 943 users' best. The checkpoint's state.json records the measure of its best (``best_measure``); a resume
under another one scores the best epoch's weights again (:func:`rescore_resumed_best`).
"""
from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from twotower import distributed as tdist
from twotower.config import EvalConfig, TrainConfig
from twotower.errors import ConfigError
from twotower.utils.wording import plural

if TYPE_CHECKING:
    from twotower.training.loop import EarlyStopping
    from twotower.training.trainer import Trainer

__all__ = ["TRAIN_LOSS", "drawn_users", "validation_measure", "checkpoint_measure", "best_label",
           "measure_changes", "rescore_resumed_best"]

log = logging.getLogger("twotower.training.trainer")

#: the measure of a fit without validation data: early stopping holds the negated training loss
TRAIN_LOSS = "train loss"


def drawn_users(valid: sp.csr_matrix, max_users: int | None, seed: int) -> np.ndarray:
    """The validation users (rows with a relevant item, ascending) that ``train.valid_max_users`` keeps: all of
    them, or ``max_users`` drawn once with ``seed`` (a generator of its own: the training's random streams stay
    those of an uncapped run)."""
    users = np.flatnonzero(np.diff(valid.indptr) > 0)  # [V]
    if max_users is None or users.size <= max_users:
        return users
    return np.sort(np.random.default_rng([seed, 3]).choice(users, max_users, replace=False))


def validation_measure(tr: "Trainer") -> dict[str, Any]:
    """How this fit's validation scores are measured, as the checkpoint records it (state.json ``best_measure``)."""
    if tr.valid_relevant is None:
        return {"metric": TRAIN_LOSS}
    return {"metric": tr.eval_cfg.select_metric, "valid_max_users": tr.cfg.valid_max_users, "seed": tr.cfg.seed}


def checkpoint_measure(state: dict[str, Any], out_dir: Path | None) -> dict[str, Any] | None:
    """The measure of a checkpoint's best: its own record, or for a checkpoint saved before it kept one the run's
    config.json (read before a resume rewrites it) and whether its epochs were validated; None when unknown."""
    if isinstance(state.get("best_measure"), dict):
        return state["best_measure"]
    from twotower.utils.atomic import read_json

    try:
        saved = read_json(out_dir / "config.json") if out_dir is not None else None
    except (OSError, ValueError):
        saved = None
    if not isinstance(saved, dict):
        return None
    if not any(k.startswith("valid_") for row in state.get("history", []) for k in row):
        return {"metric": TRAIN_LOSS}
    ev, train = saved.get("eval") or {}, saved.get("train") or {}
    return {"metric": ev.get("select_metric", EvalConfig.select_metric),
            "valid_max_users": train.get("valid_max_users", TrainConfig.valid_max_users),
            "seed": train.get("seed", TrainConfig.seed)}


def best_label(measure: dict[str, Any], best: float) -> str:
    """``NDCG@10 0.1764`` or ``train loss 5.9876``: a best value under the name of what measured it."""
    if measure["metric"] == TRAIN_LOSS:
        return f"{TRAIN_LOSS} {-best:.4f}"
    return f"{measure['metric']} {best:.4f}"


def _users_said(users: np.ndarray, valid: sp.csr_matrix) -> str:
    total = int((np.diff(valid.indptr) > 0).sum())
    return f"all {plural(total, 'validation user')}" if users.size == total else f"{users.size:,} of the {total:,}"


def measure_changes(tr: "Trainer", then: dict[str, Any] | None) -> list[str]:
    """What differs between the measure ``then`` of the checkpoint's best and this fit's (``setting: the run's,
    now``); empty when the scores compare (``then`` unknown, or no validation now: nothing to score again)."""
    now = validation_measure(tr)
    if then is None or tr.valid_relevant is None:
        return []
    if then["metric"] == TRAIN_LOSS:
        return [f"the run chose its best epoch on the training loss, having no validation data; valid {now['metric']} now"]
    said = []
    if then["metric"] != now["metric"]:
        said.append(f"eval.select_metric: {then['metric']!r} in the run, {now['metric']!r} now")
    before = drawn_users(tr.valid_given, then.get("valid_max_users"), then.get("seed", now["seed"]))
    users = np.flatnonzero(np.diff(tr.valid_relevant.indptr) > 0)
    if not np.array_equal(before, users):
        keys = [f"train.{k}" for k in ("valid_max_users", "seed") if then.get(k, now[k]) != now[k]]
        said.append(f"{', '.join(keys) or 'validation users'}: {_users_said(before, tr.valid_given)} in the run, "
                    f"{_users_said(users, tr.valid_given)} now")
    return said


def rescore_resumed_best(tr: "Trainer", stopper: "EarlyStopping") -> None:
    """After a resume: when validation measures otherwise than when the checkpoint's best epoch was chosen, that
    epoch's weights (the run's model.safetensors) are scored again as validation measures now, and the resumed
    epochs must beat that figure; said in one line. Rank 0 validates, and its figure is every rank's."""
    value = math.nan
    then = (tr.resumed_from or {}).get("best_measure")
    changes = measure_changes(tr, then) if tdist.is_main() and stopper.best_epoch else []
    if changes:
        value = _score_best_weights(tr, then, changes, stopper)
    value = tdist.broadcast_value(value, tr.device)
    if not math.isnan(value):
        stopper.best = value


def _score_best_weights(tr: "Trainer", then: dict[str, Any], changes: list[str], stopper: "EarlyStopping") -> float:
    """The select metric of the best epoch's weights as this fit validates; the model's own weights kept."""
    from twotower.models.item_item import is_item_item_key
    from twotower.training.checkpoint import load_weights, state_tensors

    metric = tr.eval_cfg.select_metric
    path = tr.out_dir / "model.safetensors" if tr.out_dir is not None else None
    if path is None or not path.is_file():
        raise ConfigError(f"cannot resume: validation measures otherwise than when the run chose its best epoch "
                          f"({'; '.join(changes)}), and the best epoch's weights ({path}), to score again, are "
                          "missing; resume with the run's own settings for these, or train into another folder "
                          "without --resume")
    trained = state_tensors(tr.model)  # the checkpoint's last epoch, which training continues from
    load_weights(path, tr.model, skip=is_item_item_key)  # a finished run's file also holds the item-item term
    try:
        value = float(tr.validate()[metric])
    finally:
        tr.model.load_state_dict(trained)
    log.info("resume: validation measures otherwise than when epoch %d was chosen as the best (%s); its weights "
             "scored again: valid %s %.4f (%s as the run measured it), the figure the resumed epochs must beat",
             stopper.best_epoch, "; ".join(changes), metric, value, best_label(then, stopper.best))
    return value
