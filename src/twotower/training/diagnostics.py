"""Per-epoch embedding diagnostics: spread, collapse alarm, alignment and uniformity."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor

if TYPE_CHECKING:
    from twotower.models.two_tower import TwoTowerModel

__all__ = ["embedding_spread", "alignment", "uniformity", "embedding_diagnostics", "model_diagnostics", "COLLAPSE_STD"]

log = logging.getLogger(__name__)

#: Mean per-dimension standard deviation below which embeddings have collapsed.
COLLAPSE_STD = 0.01


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
    sq = torch.pdist(x.float(), p=2).pow(2)
    return float(sq.mul(-t).exp().mean().log())


def embedding_diagnostics(items: Tensor, users: Tensor | None = None, positives: Tensor | None = None) -> dict[str, float | bool]:
    """Spread of item (and user) embeddings, collapse alarm, alignment/uniformity."""
    out: dict[str, float | bool] = {"item_std": embedding_spread(items), "item_uniformity": uniformity(items)}
    if users is not None and users.shape[0] > 1:
        out["user_std"] = embedding_spread(users)
    if users is not None and positives is not None and len(users) == len(positives):
        out["alignment"] = alignment(users, positives)
    collapsed = out["item_std"] < COLLAPSE_STD or out.get("user_std", 1.0) < COLLAPSE_STD
    out["collapse_alarm"] = bool(collapsed)
    if collapsed:
        log.warning(
            "embedding collapse: std item=%.4f user=%s < %.2f; lower the learning rate or raise the temperature",
            out["item_std"], f"{out['user_std']:.4f}" if "user_std" in out else "n/a", COLLAPSE_STD,
        )
    return out


def model_diagnostics(model: "TwoTowerModel", rng: np.random.Generator, last: tuple[Tensor, Tensor] | None,
                      *, max_items: int = 200_000, sample: int = 50_000) -> dict[str, float | bool]:
    """:func:`embedding_diagnostics` of the item tower and the last batch's ``(queries[B, D], positives[B, D])``.

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
    return embedding_diagnostics(items, *(last or (None, None)))
