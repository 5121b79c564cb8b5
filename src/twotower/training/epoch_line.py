"""The trainer's line an epoch: ``epoch 3/30: loss ... valid NDCG@10 v (best b at e) (s, rate; at most T to go)``."""
from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any

from twotower.training.diagnostics import COLLAPSE_STD
from twotower.training.loop import EarlyStopping

if TYPE_CHECKING:
    from twotower.training.trainer import Trainer

__all__ = ["ACCURACY_KIND", "EPOCH_ACCURACY", "log_epoch", "format_seconds"]

log = logging.getLogger("twotower.training.trainer")


#: How the epoch line names the step's accuracy per loss.kind: BPR's "acc 0.864" (its positive above one random
#: negative) read beside the in-batch softmax's "acc 0.042" (top of 512) as if the same measure, 20x better
EPOCH_ACCURACY = {"inbatch": "acc", "sampled": "sampled acc", "full": "catalogue acc", "bpr": "pairwise acc"}
#: What a log.jsonl row's ``accuracy_kind`` says its ``inbatch_accuracy`` is, per loss.kind: the key is kept for the
#: scripts that read it, though only the in-batch softmax's accuracy is an in-batch one (README: log.jsonl)
ACCURACY_KIND = {"inbatch": "inbatch", "sampled": "sampled", "full": "catalogue", "bpr": "pairwise"}


def log_epoch(tr: "Trainer", row: dict[str, Any], metric: str, stopper: EarlyStopping, horizon: int) -> None:
    """One line an epoch: ``epoch 3/30: loss ... valid M v (best b at e) (s, rate; at most T to go)``.

    "At most": early stopping may end the fit sooner; the estimate is the mean epoch time so far (the
    epochs before a resume included) times the epochs still to run: those scheduled, or under
    ``train.time_budget_min`` those that start before the budget is spent (each then runs in full, so the
    budget left was no cap: it read "at most 0s to go" before a whole last epoch, and after the epoch that
    spent the budget, when nothing was left to run).
    """
    cfg = tr.cfg
    rate = f"{row['examples_per_s']:.0f} {'seq' if tr.sequence else 'ex'}/s"
    if "positions_per_s" in row:
        rate += f", {row['positions_per_s']:.0f} positions/s"
    value = row.get("valid_" + metric)
    if value is None or stopper.best_epoch == 0:
        best = ""
    elif stopper.best_epoch == row["epoch"]:
        before = [r["valid_" + metric] for r in tr.history
                  if r["epoch"] < row["epoch"] and isinstance(r.get("valid_" + metric), (int, float))]
        # best of what? the first validated epoch (epoch 3 under train.eval_every=3) has nothing before it to beat
        best = " (new best)" if before else ""
        if best and before and f"{max(before):.4f}" == f"{value:.4f}":
            # "0.2004 (new best)" under an epoch that read 0.2004 too: the lead is below the printed digits
            best = f" (new best, up {value - max(before):.1g} on {max(before):.6f})"
    else:
        best = f" (best {stopper.best:.4f} at {stopper.best_epoch})"
    last = min(cfg.epochs, horizon)  # a time budget aims the schedule (and the fit's end) at ``horizon``
    left = ""
    if row["epoch"] < last and not stopper.stop:  # patience ran out: the fit ends here, nothing is "to go"
        spent = sum(r.get("seconds", 0.0) for r in tr.history)
        per_epoch = spent / len(tr.history)
        epochs_left = last - row["epoch"]
        if cfg.time_budget_min is not None:  # the budget is checked before each epoch (stop_reason)
            room = cfg.time_budget_min * 60.0 - spent
            epochs_left = 0 if room <= 0 else min(epochs_left, math.ceil(room / per_epoch) if per_epoch > 0 else 1)
        if epochs_left > 0:
            left = f"; at most {format_seconds(per_epoch * epochs_left)} to go"
    log.info(
        "epoch %d/%d: loss %.4f %s %.3f%s%s%s %s%s (%.1fs, %s%s)",
        row["epoch"], last, row["loss"], EPOCH_ACCURACY.get(tr.loss_cfg.kind, "acc"), row["inbatch_accuracy"],
        f" item_std {row['item_std']:.3f}" if "item_std" in row else "",
        # the tower that collapsed: "item_std 0.102 COLLAPSE" blamed the items when the user tower had (0.0047)
        " COLLAPSE" + (f" (user_std {row['user_std']:.4f})" if row.get("user_std", 1.0) < row.get("collapse_std", COLLAPSE_STD) else "")
        if row.get("collapse_alarm") else "",
        f" alpha {row['alpha']:.3f}" if "alpha" in row else "",
        # an epoch train.eval_every skips says so, rather than "valid NDCG@10 nan"
        f"valid {metric} {value:.4f}" if value is not None
        else "no validation data" if tr.valid_relevant is None else "not validated (train.eval_every)",
        best, row["seconds"], rate, left,
    )


def format_seconds(s: float) -> str:
    """``42s``, ``3m05s``, ``1h02m``: a duration as people read it in a log line; ``<1s`` for a moment, which
    read as ``0s`` (nothing left)."""
    if 0 < s < 0.5:
        return "<1s"
    s = int(round(s))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"
