"""How much each history item moves one (user, item) score, read off the model itself.

The user tower pools its history with weights ``w[L]`` (0 on padding)::

    pooled = sum_j w_j * e_j / sum_j w_j

Two attributions of the score ``s = <user(w), item>`` to history positions:

``loo`` (leave one out, exact)
    ``c_j = s(w) - s(w with w_j = 0)``: the score lost when position ``j`` is
    dropped from the history. All ``L`` variants run as one batch [1 + L, L].
    For mean pooling, the GRU and the transformer with ``seq_positions="left"``
    a zero weight *is* the deletion of the item from the list (``tests/explain``
    asserts it); for recency pooling and the transformer with ``"right"``
    (recency) positions it is not (the older items would keep their ages or
    positions), so there each variant is the window re-read without the item:
    the older items move up one step, as ``recommend --history`` without the
    item reads them (on the demo run a zero weight gave 129 of 726 contributions
    the sign opposite to the removal's).
    A history longer than the window: deleting an item lets the newest item before the window move in, so then
    every tower's variant is the window re-read without the item, with that item entering at its oldest column
    (``entering``; the window alone gave contributions of the wrong sign, 24 of 50 on an ML-1M user of 78 items).
``gradxinput`` (first-order)
    ``c_j = w_j * ds/dw_j`` at the window's own weights, one backward pass: gradient x input of item ``j``'s
    embedding. A sequence tower (transformer, GRU) reads ``w_j`` as a scale on that embedding; a pooled tower
    differentiates with each pool's normaliser ``sum_j w_j`` held fixed, so ``c_j`` is the gradient on the pooled
    vector dotted with item ``j``'s term of it, ``w_j e_j / sum_j w_j``, summed over the pools (through the
    normaliser the score does not change when every weight is scaled alike, and the ``c_j`` summed to exactly 0:
    a one-item history got 0). The item-item term's norm is held fixed alike, so its shares add up to its part
    of the score. A first-order estimate, not a removal: it can rank the history differently from ``loo``, which
    stays exact, and the shares need not add up to ``score - empty_score``. Except where the window holds one item
    (at one column or repeated): removing it leaves the empty history, so its share is exactly ``score -
    empty_score`` (``loo``'s, for one column), split evenly over its copies; the estimate gave Star Wars +0.0138 as
    the whole of a history that lowered the score by 0.0421, and the sentence named it as raising the score.

Nothing here is a heuristic over metadata: both read the trained tower. Scores
are taken in float64 from the float32 tower, and a share within float32
rounding of the score (:data:`NOISE`) is reported as exactly 0.
Shapes: B batch, L history length, D dim.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from torch import Tensor

from twotower.errors import ConfigError
from twotower.models import two_tower
from twotower.models.two_tower import TwoTowerModel

__all__ = ["Attribution", "METHODS", "attribute_history", "attribute_history_many", "deletes_on_zero_weight",
           "item_vector", "loo_variants", "user_scores"]

METHODS = ("loo", "gradxinput")

#: A contribution within this share of the score's magnitude (at least 1) is reported as 0. The tower runs in
#: float32, so two variants that differ by nothing (a repeated item dropped from a mean) or by less than float32
#: can tell still score a few ulps apart, and the sign of that rounding decided whether the sentence said the
#: item "raises" the score; 16 float32 epsilons (~2e-6) is above that rounding and far below any real share.
NOISE = 16 * float(np.finfo(np.float32).eps)

#: one new user's encoded features, as ``TrainedRun.encode_user_features`` returns them for one row
Features = tuple[Tensor, list[Tensor], Tensor]


def repeat_features(features: Features | None, batch: int) -> Features | None:
    """One user's feature tensors (one row each) repeated for ``batch`` variants of that user."""
    if features is None:
        return None
    cat, multi, num = features
    if num.shape[0] != 1:
        raise ConfigError(f"explain user_features: the features of one user (one row), got {num.shape[0]} rows")
    return cat.expand(batch, -1), [m.expand(batch, -1) for m in multi], num.expand(batch, -1)


def contributions(score: float, variants: np.ndarray) -> np.ndarray:
    """``score - variants`` (float64) with the shares below float32 resolution (:data:`NOISE`) set to 0."""
    c = float(score) - np.asarray(variants, np.float64)
    c[np.abs(c) <= NOISE * max(1.0, abs(float(score)))] = 0.0
    return c


def empty_history_score(score: float, empty: float, pooled: int) -> float:
    """The empty-history score: ``empty`` where the window pools at least one item, else ``score`` itself. With
    nothing pooled both are the same user, yet another row of the float32 tower's pass scored them a few ulps apart,
    and a user with no history was told "history adds -0.0000" (history_total -5.3e-09, score != empty score)."""
    return float(empty) if pooled else float(score)


@dataclass(frozen=True)
class Attribution:
    """One (user, item) score split over the history window.

    ``positions[n]`` index the valid (non-padding) columns of the window,
    oldest first; ``contributions[n]`` is each one's share of ``score`` under
    ``method``. ``empty_score`` is the score with the whole history pooled to
    zero (the empty-history representation), so ``score - empty_score`` is what
    the history as a whole adds.
    """

    score: float
    empty_score: float
    positions: np.ndarray  # [n] int64 columns of the window
    contributions: np.ndarray  # [n] float64
    method: str
    #: [2, D] float32: the user's vector and the empty history's, where the pass that scored them had both
    #: (:func:`attribute_history_many`'s batched leave-one-out), so the ranks need no second tower pass
    user_vectors: np.ndarray | None = None


def deletes_on_zero_weight(tower: torch.nn.Module) -> bool:
    """Whether a zero history weight is the item's deletion from the history for this user tower (module docstring):
    mean pooling, the GRU and the transformer with ``"left"`` positions; recency pooling and ``"right"`` positions
    would keep the older items' ages, so :func:`loo_variants` re-reads their windows instead."""
    cfg = getattr(tower, "config", None)
    kind = getattr(cfg, "history", None)
    return kind in ("mean", "gru") or (kind == "transformer" and getattr(cfg, "seq_positions", None) == "left")


def loo_variants(tower: torch.nn.Module, hist: Tensor, entering: int | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """``(histories [n + 2, L], weights [n + 2, L], positions [n])`` of leave-one-out for one window ``hist[1, L]``:
    row 0 the window, row ``1 + k`` without valid column ``positions[k]``, the last row the empty history (all
    weights 0). Row ``1 + k`` is the window with that column's weight 0 where that is the deletion
    (:func:`deletes_on_zero_weight`), else the window re-read without the item (the older items one column newer,
    padding at the oldest). ``entering``: the history's newest item before the window (None: the history fits in
    it); a full window is then re-read for every tower, that item entering at the oldest column, as deleting the
    item from the whole history gives."""
    w = tower.history_weights(hist)  # [1, L]
    positions = torch.nonzero(w[0] > 0).flatten()  # [n]
    n, L = int(positions.numel()), hist.shape[1]
    H = hist.repeat(n + 2, 1)  # [n + 2, L]
    full = entering is not None and n == L
    if full or not deletes_on_zero_weight(tower):
        # the window re-read without the item: the older items move up a column (recency pooling's ages and the
        # "right" positions shift, as deleting the item from the history shifts them: a zero weight kept them, and
        # 129 of 726 contributions on the demo run had the sign opposite to removing the item), and the column
        # left at the oldest end takes the item entering from before the window, else padding
        row = hist[0]
        filler = row.new_tensor([int(entering) if full else int(tower.n_items)])  # n_items: the padding row
        for k, p in enumerate(positions.tolist()):
            H[1 + k] = torch.cat([filler, row[:p], row[p + 1:]])
        W = tower.history_weights(H)  # each window's own weights, as the tower reads a history
    else:
        W = w.repeat(n + 2, 1)
        W[1 + torch.arange(n), positions] = 0.0
    W[-1] = 0.0
    return H, W, positions


def item_vector(model: TwoTowerModel, item_row: int) -> Tensor:
    """The item's unit vector [D] (eval mode, no grad)."""
    with torch.no_grad():
        return model.item_tower(torch.tensor([item_row], dtype=torch.long))[0]


def user_scores(
    model: TwoTowerModel,
    user_row: int | None,
    history: Tensor,
    weights: Tensor | None,
    item_vec: Tensor,
    features: Features | None = None,
    *,
    fixed_norms: bool = False,
) -> Tensor:
    """Scores [B] of one item for B variants of one user: ``history[B, L]``, ``weights[B, L]``.

    ``features``: a new user's encoded features (one row; every variant reads them), else the
    user's table row (a known user) or missing features (an ad-hoc history). ``fixed_norms``: the history's
    normalisers held out of autograd (``gradxinput``; the same scores).
    """
    B = history.shape[0]
    rows = None if user_row is None else torch.full((B,), int(user_row), dtype=torch.long)
    u = model.user_tower(rows, history, history_weights=weights, features=repeat_features(features, B),
                         fixed_norms=fixed_norms)  # [B, D]
    # the product in float64, as attribute_history_many takes it: the same (user, item) scores alike on both paths
    return u.double() @ item_vec.double()  # [B]


def attribute_history(
    model: TwoTowerModel,
    user_row: int | None,
    window: np.ndarray,
    item_row: int,
    *,
    method: str = "loo",
    features: Features | None = None,
    entering: int | None = None,
) -> Attribution:
    """Attribute the score of ``item_row`` to the columns of the right-aligned ``window[L]``.

    ``user_row`` is None for an ad-hoc user (a history only, with its encoded ``features`` if
    given: every variant re-runs the tower with them, so ``loo`` stays exact). A tower that
    does not pool history gets an empty attribution. ``entering``: the history's newest item before the window,
    where the history is longer than it (:func:`loo_variants`).
    """
    if method not in METHODS:
        raise ConfigError(f"explain method {method!r} is not one of {', '.join(METHODS)}")
    model.eval()
    tower = model.user_tower
    v = item_vector(model, item_row)  # [D]
    hist = torch.as_tensor(np.asarray(window, np.int64)).unsqueeze(0)  # [1, L]
    if not tower.uses_history:
        with torch.no_grad():
            s = float(user_scores(model, user_row, hist, None, v, features)[0])
        return Attribution(s, s, np.zeros(0, np.int64), np.zeros(0), method)
    w = tower.history_weights(hist)  # [1, L]
    positions = torch.nonzero(w[0] > 0).flatten()  # [n]
    n = int(positions.numel())
    if method == "loo":
        # row 0: full weights; row 1+k: position k dropped; last row: all dropped.
        H, W, _ = loo_variants(tower, hist, entering)  # [n + 2, L] each
        with torch.no_grad():
            s = user_scores(model, user_row, H, W, v, features).double()  # [n + 2]
        contrib = contributions(float(s[0]), s[1 : n + 1].numpy())
        return Attribution(float(s[0]), empty_history_score(s[0], s[-1], n), positions.numpy(), contrib, method)
    with torch.inference_mode(False), torch.enable_grad():  # callers may sit inside no_grad / inference_mode
        # clones made here are ordinary tensors even if the inputs were created under inference_mode
        wg = w.clone().requires_grad_(True)
        feats = None if features is None else (features[0].clone(), [m.clone() for m in features[1]], features[2].clone())
        s_full = user_scores(model, user_row, hist.clone(), wg, v.clone(), feats, fixed_norms=True)[0]
        (grad,) = torch.autograd.grad(s_full, wg)
    s_value = float(s_full.detach())
    # c = w * ds/dw, written as score - (score - c) to share the float32 noise floor with loo
    contrib = contributions(s_value, s_value - (w[0, positions] * grad[0, positions]).double().numpy())
    with torch.no_grad():
        empty = user_scores(model, user_row, hist, torch.zeros_like(w), v, features)[0]
    s_empty = empty_history_score(s_value, empty, n)
    if n and torch.unique(hist[0, positions]).numel() == 1:
        # one item pooled (module docstring): its share is known exactly, so no estimate stands in for it
        contrib = contributions(s_value, np.full(n, s_value - (s_value - s_empty) / n))
    return Attribution(s_value, s_empty, positions.numpy(), contrib, method)


def attribute_history_many(
    model: TwoTowerModel,
    user_row: int | None,
    window: np.ndarray,
    item_rows: list[int],
    *,
    method: str = "loo",
    features: Features | None = None,
    check: Callable[[], None] | None = None,
    entering: int | None = None,
) -> list[Attribution]:
    """:func:`attribute_history` for M items of one user, sharing the user-side work.

    ``loo`` embeds the ``n + 2`` history variants once and scores every item
    against them ([n + 2, D] @ [D, M]), so explaining many items of one user
    costs one tower pass, not one per item. ``gradxinput`` runs per item.
    A sequence tower embeds the variants in blocks of at most ``two_tower.CHECKED_CELLS`` history cells (for
    every caller alike, so the floats do not depend on who asked), with ``check()`` before each: it may raise
    to abandon the work (the service's time budget; 202 variants of a 200-item window: 0.7 s idle, 3 s loaded).
    """
    if method not in METHODS:
        raise ConfigError(f"explain method {method!r} is not one of {', '.join(METHODS)}")
    if method != "loo" or not model.user_tower.uses_history or not item_rows:
        out = []
        for i in item_rows:
            if check is not None:
                check()
            out.append(attribute_history(model, user_row, window, int(i), method=method, features=features,
                                         entering=entering))
        return out
    model.eval()
    hist = torch.as_tensor(np.asarray(window, np.int64)).unsqueeze(0)  # [1, L]
    # [n + 2, L]: row 0 full, row 1 + k drops position k, last row drops all
    H, W, positions = loo_variants(model.user_tower, hist, entering)
    n = int(positions.numel())
    # a pooled tower is one cheap pass; a sequence tower's cost grows with the window, so it runs in blocks
    step = max(1, two_tower.CHECKED_CELLS // hist.shape[1]) if model.user_tower.is_sequence else n + 2
    with torch.no_grad():
        blocks = []
        for s in range(0, n + 2, step):
            if check is not None:
                check()
            b = min(n + 2, s + step) - s
            rows = None if user_row is None else torch.full((b,), int(user_row), dtype=torch.long)
            blocks.append(model.user_tower(rows, H[s : s + b], history_weights=W[s : s + b],
                                           features=repeat_features(features, b)))
        U = torch.cat(blocks)  # [n + 2, D]
        # each item's vector from a batch of one, as explaining that item alone (POST /explain) embeds it: the
        # float32 tower over a batch of M rounds otherwise, so /recommend's inline explanations (M = explain_k items)
        # gave other scores and contributions than /explain for the same item (~1e-8 apart, MovieLens-100K)
        V = torch.cat([model.item_tower(torch.tensor([int(i)], dtype=torch.long)) for i in item_rows])  # [M, D]
        # float64 product: a float32 GEMM over M items rounds otherwise than one item's, and that rounding alone
        # changed which history items "raise" the score between /recommend's inline and /explain's answer
        S = torch.stack([U.double() @ v.double() for v in V], dim=1)  # [n + 2, M], each column as for M = 1
    pos = positions.numpy()
    ends = torch.stack([U[0], U[-1]]).numpy()  # [2, D]: full and empty history
    out = []
    for m in range(len(item_rows)):
        s = S[:, m]
        out.append(Attribution(float(s[0]), empty_history_score(s[0], s[-1], n), pos,
                               contributions(float(s[0]), s[1 : n + 1].numpy()), method, ends))
    return out
