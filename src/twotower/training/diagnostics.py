"""Per-epoch embedding diagnostics: spread, collapse alarm, alignment and uniformity."""
from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor

from twotower.errors import TrainingDiverged
from twotower.training.loop import lower_the_rate

if TYPE_CHECKING:
    from twotower.models.two_tower import TwoTowerModel

__all__ = ["embedding_spread", "alignment", "uniformity", "embedding_diagnostics", "model_diagnostics", "COLLAPSE_STD",
           "IDENTICAL_STD", "FIRST_EPOCH_FACTOR", "collapse_advice", "collapse_std", "temperature_line_scale", "check_finite_weights",
           "check_finite_output"]

log = logging.getLogger(__name__)

#: Mean per-dimension standard deviation below which embeddings of :data:`COLLAPSE_DIM` dimensions have collapsed.
#: Healthy runs sit above it: MovieLens-100K default 0.017-0.026 (items), its transformer tower with sequence
#: examples 0.010 (a plateau from epoch 8 on, where 0.01 fired a COLLAPSE at epoch 11 of a model still at its
#: best NDCG), ML-1M's default 0.008-0.009 after epoch 1; collapses fall through it: loss.temperature=100's user
#: tower 0.0047 -> 0.0028 -> 0.0016, train.weight_decay=1000's items 0.0001.
COLLAPSE_STD = 0.005
#: The width :data:`COLLAPSE_STD` is for (the default out_dim); other widths scale it (:func:`collapse_std`).
COLLAPSE_DIM = 64


def collapse_std(dim: int) -> float:
    """The alarm's line for ``dim``-wide embeddings: :data:`COLLAPSE_STD` × sqrt(64 / dim).

    Unit vectors spread over the sphere have a per-dimension std of about 1/sqrt(dim), so one line for every width
    read a healthy out_dim=512 model on MovieLens-100K (std 0.006-0.010 over 5 epochs, valid NDCG@10 0.189, above
    the default's 0.183) as "spread low" every epoch at a 0.01 line, one dip short of a COLLAPSE."""
    return COLLAPSE_STD * math.sqrt(COLLAPSE_DIM / max(int(dim), 1))
#: A first epoch's spread below :func:`collapse_std` / this is a collapse already: untrained towers spread ~0.047
#: (MovieLens-100K, items and users alike) and a first epoch narrows them to 0.014-0.057 there (train.lr 1e-5 to 0.1),
#: ML-1M's to 0.008; train.weight_decay=1000's items read 0.0001 and were called "usual after a first epoch"
FIRST_EPOCH_FACTOR = 10
#: Spread below which a tower gives every row the same vector: no barely trained state (untrained towers spread
#: ~0.05 on MovieLens-100K), so a collapse from the first epoch on
IDENTICAL_STD = 1e-6

#: The alarm's advice when no setting is suspect: scores are divided by the temperature, so a high one flattens the
#: softmax and the towers stop spreading (loss.temperature=100 collapsed the user tower on MovieLens-100K)
GENERIC_ADVICE = "lower the learning rate (train.lr) or the temperature (loss.temperature)"


def collapse_advice(lr: float, weight_decay: float, temperature: float) -> str:
    """What the collapse alarm tells the user to change: the settings raised above their defaults that shrink the
    embeddings' spread, named with their values, else :data:`GENERIC_ADVICE`. ``train.weight_decay=1000`` collapsed
    the item tower on MovieLens-100K (std 0.0001 after one epoch) and the alarm said to lower lr or temperature."""
    from twotower.config import LossConfig, TrainConfig

    raised = [f"{key}={value:g} (default {default:g})" for key, value, default in (
        ("train.weight_decay", weight_decay, TrainConfig.weight_decay), ("loss.temperature", temperature,
         LossConfig.temperature), ("train.lr", lr, TrainConfig.lr)) if value > default]
    if raised:
        return f"lower {', '.join(raised)}"
    if temperature < LossConfig.temperature:
        # "lower the temperature" was said to a run at 0.0001, 200x below the default: at a low temperature the
        # towers need little spread, and a lower one narrows it further
        return (f"loss.temperature={temperature:g} is below its default ({LossConfig.temperature:g}), which keeps the "
                "spread small: if validation stops improving, raise it (or lower the learning rate, train.lr)")
    return GENERIC_ADVICE


def temperature_line_scale(temperature: float) -> float:
    """The factor on :func:`collapse_std` for a ``loss.temperature`` below its default: sqrt(T / default), at most 1.

    Scores are divided by the temperature, so a lower one gets the same softmax from vectors spread less: on
    MovieLens-100K the items' spread was 0.008 at T=0.002 and 0.0013 at T=0.0001 while validation NDCG@10 rose every
    epoch (0.0871 -> 0.1588 -> 0.1763 at 0.0001), and the fixed line called that a collapse."""
    from twotower.config import LossConfig

    return min(1.0, math.sqrt(max(float(temperature), 0.0) / LossConfig.temperature))


def embedding_spread(emb: Tensor) -> float:
    """Mean over dimensions of the per-dimension std of ``emb[N, D]``.

    Unit vectors spread uniformly over the sphere have std ≈ 1/sqrt(D); a
    collapsed tower (every item the same vector) has std ≈ 0.
    """
    if emb.shape[0] < 2:
        return 0.0
    return float(emb.float().std(dim=0).mean())


def alignment(a: Tensor, b: Tensor, alpha: float = 2.0) -> float:
    """Wang & Isola (2020): E ||f(x) - f(y)||^alpha over positive pairs (lower is better)."""
    return float((a - b).norm(dim=1).pow(alpha).mean())


def uniformity(x: Tensor, t: float = 2.0, max_n: int = 2048, seed: int = 0) -> float:
    """Wang & Isola (2020): log E exp(-t ||f(x) - f(y)||^2) over distinct pairs (lower is better)."""
    if x.shape[0] > max_n:
        g = torch.Generator().manual_seed(seed)
        x = x[torch.randperm(x.shape[0], generator=g)[:max_n]]
    if x.shape[0] < 2:
        return 0.0
    sq = torch.pdist(x.double(), p=2).pow(2)
    # log-sum-exp, not log(mean(exp)): vectors ~11 apart (unnormalised towers) underflowed every exp to 0 in
    # float32, and the epoch logged -inf where the value is about -107
    return float(torch.logsumexp(sq.mul(-t), dim=0)) - math.log(sq.numel())


def embedding_diagnostics(items: Tensor, users: Tensor | None = None, positives: Tensor | None = None, *,
                          earlier: Sequence[Mapping[str, Any]] = (), advice: str = GENERIC_ADVICE,
                          item_ids: bool = True, line_scale: float = 1.0) -> dict[str, float | bool]:
    """Spread of item (and user) embeddings, collapse alarm, alignment/uniformity.

    ``earlier``: the rows of the epochs before (their ``item_std``/``user_std``). A spread below
    :func:`collapse_std` of the width (``collapse_std`` in the row) is a collapse only when it did not grow since the last of them: after a first epoch
    (none before) it can be a dip (training first narrows the untrained towers' spread), and the alarm's advice (a
    lower learning rate) misled; it is then logged as a point to watch, unless it lies :data:`FIRST_EPOCH_FACTOR`
    times below the line, far below any untrained or barely trained tower's. A spread below :data:`IDENTICAL_STD`
    (every row one vector) is a collapse at any epoch. ``advice``: what the alarm says to
    change (:func:`collapse_advice`); ``item_ids``: whether the item tower reads an ID embedding (without one,
    identical items are the features' doing: every item given the same values); ``line_scale``: a factor on the
    line (:func:`temperature_line_scale`).
    """
    out: dict[str, float | bool] = {"item_std": embedding_spread(items), "item_uniformity": uniformity(items)}
    if users is not None and users.shape[0] > 1:
        out["user_std"] = embedding_spread(users)
    if users is not None and positives is not None and len(users) == len(positives):
        out["alignment"] = alignment(users, positives)
    line = collapse_std(items.shape[1]) * line_scale
    out["collapse_std"] = line
    low = [key for key in ("item_std", "user_std") if key in out and out[key] < line]
    before = next((row for row in reversed(earlier) if "item_std" in row), None)
    not_growing = [key.split("_")[0] for key in low if before is not None and key in before and out[key] <= before[key]]
    shrinking = bool(not_growing)
    # one item constant feature and no ID embedding: "usual after a first epoch", then "lower the learning rate"
    identical = [key.split("_")[0] for key in low if out[key] < IDENTICAL_STD]
    # a first epoch far below where untrained towers start: no dip of a barely trained model
    far = before is None and any(out[key] < line / FIRST_EPOCH_FACTOR for key in low)
    out["collapse_alarm"] = bool(low) and (shrinking or bool(identical) or far)
    stds = (out["item_std"], f"{out['user_std']:.4f}" if "user_std" in out else "n/a", line)
    if identical:
        if "item" in identical and not item_ids:  # no weight can tell apart items whose inputs are the same
            advice = ("the item tower reads no ID (model.item.use_id=false) and its features give every item the same "
                      "values: set model.item.use_id=true or give it features that differ between items")
        log.warning("embedding collapse: std item=%.4f user=%s < %.3g: every %s gets the same vector; %s", *stds,
                    " and every ".join(identical), advice)
    elif far:
        log.warning("embedding collapse: std item=%.4f user=%s < %.3g after the first epoch, far below untrained "
                    "towers' (about 0.05 on MovieLens-100K); %s", *stds, advice)
    elif out["collapse_alarm"]:
        # the spread that did not grow named: "not growing" was said of both while the items' had grown
        log.warning("embedding collapse: std item=%.4f user=%s < %.3g and the %s spread not growing since the epoch "
                    "before; %s", *stds, " and ".join(not_growing), advice)
    elif low:
        log.info("embedding spread low: std item=%.4f user=%s < %.3g, %s; a collapse only if it shrinks in later "
                 "epochs", *stds, "can be a first epoch's dip (training narrows untrained towers' spread, about 0.05 "
                 "on MovieLens-100K, before it widens)" if before is None else "but growing since the epoch before")
    return out


def model_diagnostics(model: "TwoTowerModel", rng: np.random.Generator, last: tuple[Tensor, Tensor] | None,
                      *, max_items: int = 200_000, sample: int = 50_000,
                      earlier: Sequence[Mapping[str, Any]] = (), advice: str = GENERIC_ADVICE,
                      line_scale: float = 1.0) -> dict[str, float | bool]:
    """:func:`embedding_diagnostics` of the item tower and the last batch's ``(queries[B, D], positives[B, D])``,
    with the ``earlier`` epochs' rows and the alarm's ``advice``.

    Every item up to ``max_items``; above, ``sample`` items drawn with ``rng``.
    """
    if model.n_items <= max_items:
        with torch.no_grad():
            items = model.all_item_embeddings()
    else:
        ids = torch.as_tensor(rng.choice(model.n_items, sample, replace=False), device=next(model.parameters()).device)
        # in eval mode, as all_item_embeddings embeds a smaller catalogue: called mid-training, the sample took the
        # towers' dropout, whose noise read as spread (and drew masks from the training's random stream)
        was = model.training
        model.eval()
        try:
            with torch.no_grad():
                items = model.item_tower(ids)
        finally:
            model.train(was)
    return embedding_diagnostics(items, *(last or (None, None)), earlier=earlier, advice=advice,
                                 item_ids=getattr(model.item_tower, "id_emb", None) is not None, line_scale=line_scale)


def check_finite_weights(model: torch.nn.Module, epoch: int, lr: float, suspect: str | None = None) -> None:
    """TrainingDiverged when a weight of ``model`` is NaN or infinite after ``epoch``'s updates.

    The per-step loss check stops a step whose loss is not finite, but an epoch's last update can itself blow
    the weights up (a one-step epoch at a huge learning rate): validation then failed with "scores contain
    NaN", naming no setting, and the run was left as if it had trained.
    """
    for name, p in model.named_parameters():
        if not bool(torch.isfinite(p).all()):
            raise _diverged_in(epoch, f"the weights of {name}", lr, suspect)


def _diverged_in(epoch: int, what: str, lr: float, suspect: str | None, lr_setting: str = "train.lr") -> TrainingDiverged:
    """``training diverged in epoch 2: WHAT are not finite after its updates (learning rate 0.5). Lower the learning
    rate (train.lr) and train again``: one wording for the weights and for what a model computes."""
    return TrainingDiverged(f"training diverged in epoch {epoch}: {what} are not finite after its updates (learning "
                            f"rate {lr:g}). {lower_the_rate(lr_setting, suspect)}")


def check_finite_output(out: Tensor, what: str, epoch: int, lr: float, suspect: str | None = None, *,
                        lr_setting: str = "train.lr") -> None:
    """TrainingDiverged, in the words of :func:`check_finite_weights`, when ``out`` (what the model computes after
    ``epoch``'s updates, named by ``what``: "the query tower's embeddings") holds NaN or inf.

    Finite weights can still compute NaN: one step of `search train --lr 1e12` left weights near 1e12, finite, and a
    loss as low as any, and the next epoch's mining failed with "queries contain NaN or inf; check the encoder
    output" (naming no flag), or with one epoch the model was saved and scored NaN. ``lr``: the rate the user set;
    ``lr_setting``: where (``--lr``)."""
    if not bool(torch.isfinite(out).all()):
        raise _diverged_in(epoch, what, lr, suspect, lr_setting)
