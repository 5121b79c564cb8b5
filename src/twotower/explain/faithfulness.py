"""Is the attribution faithful? Remove the top-attributed history item and see the score fall.

For each (user, item) pair: attribute the item's score to the user's history
window, then re-embed the user twice with one item *deleted from the history
list* (the window re-drawn from the rest of the sequence, as the service would
embed an edited history): once without the top-attributed item, once without
a different history item chosen uniformly at random. A faithful attribution
makes the first drop larger than the second, on average and in most pairs.

The removal is a real edit of the input: for recency pooling the older items
move up one step, and a longer sequence brings an older item into the window.
``loo`` computes exactly that removal (the history's item before the window
entering it, as the explanations attribute it), so its top item is the one
whose removal lowers the score most; ``gradxinput`` only estimates it.
"""
from __future__ import annotations

import logging
from typing import Any, Iterable

import numpy as np
import torch

from twotower.explain.attribution import METHODS, attribute_history, item_vector, user_scores
from twotower.errors import ConfigError
from twotower.models.history import pad_histories

__all__ = ["faithfulness", "removal_scores"]

log = logging.getLogger(__name__)


@torch.no_grad()
def removal_scores(run: Any, user_row: int, item_row: int, drop_at: list[int]) -> np.ndarray:
    """Score of ``item_row`` after deleting, one at a time, ``seq[drop_at[k]]`` from the user's sequence: [K]."""
    seq = run.history.of(user_row)
    hists = [np.delete(seq, i) for i in drop_at]
    H = pad_histories(hists, run.model.history_len, run.model.pad_item)  # [K, L]
    v = item_vector(run.model, item_row)
    return user_scores(run.model, user_row, torch.as_tensor(H), None, v).double().numpy()


def faithfulness(
    run: Any,
    pairs: Iterable[tuple[int, int]],
    seed: int,
    *,
    method: str = "loo",
) -> dict[str, Any]:
    """Mean score drop when removing the top-attributed vs a random other history item.

    ``pairs`` are (user row, item row). Pairs whose window has fewer than two
    items cannot compare and are counted in ``skipped``. ``seed`` fixes the
    random choices. Returns ``{"method", "pairs", "skipped", "mean_drop_top",
    "mean_drop_random", "share_top_greater", "share_ties", "seed"}``.
    """
    if method not in METHODS:
        raise ConfigError(f"faithfulness method {method!r} is not one of {', '.join(METHODS)}")
    if not run.model.user_tower.uses_history:
        raise ConfigError("faithfulness needs a user tower that reads history (model.user.history=mean|recency)")
    rng = np.random.default_rng(seed)
    L, pad = run.model.history_len, run.model.pad_item
    drops_top: list[float] = []
    drops_rand: list[float] = []
    skipped = 0
    for user_row, item_row in pairs:
        user_row, item_row = int(user_row), int(item_row)
        seq = run.history.of(user_row)
        window = run.history.last_windows(np.array([user_row]), L, pad)[0]
        # the item a deletion lets into a full window, as the explanations attribute it (explainer.py): without it
        # a longer history's leave-one-out was a variant no explanation shows, and its top item another one
        entering = int(seq[-L - 1]) if len(seq) > L else None
        att = attribute_history(run.model, user_row, window, item_row, method=method, entering=entering)
        n = len(att.positions)
        if n < 2:
            skipped += 1
            continue
        # window column p holds seq[len(seq) - L + p]
        k_top = int(np.argmax(att.contributions))
        k_rand = int(rng.choice([k for k in range(n) if k != k_top]))
        at = [len(seq) - L + int(att.positions[k]) for k in (k_top, k_rand)]
        s = removal_scores(run, user_row, item_row, at)
        drops_top.append(att.score - float(s[0]))
        drops_rand.append(att.score - float(s[1]))
    top = np.asarray(drops_top)
    rand = np.asarray(drops_rand)
    n_pairs = len(top)
    out = {
        "method": method,
        "pairs": n_pairs,
        "skipped": skipped,
        "mean_drop_top": float(top.mean()) if n_pairs else float("nan"),
        "mean_drop_random": float(rand.mean()) if n_pairs else float("nan"),
        "share_top_greater": float((top > rand).mean()) if n_pairs else float("nan"),
        "share_ties": float(np.isclose(top, rand, rtol=0, atol=1e-7).mean()) if n_pairs else float("nan"),
        "seed": seed,
    }
    log.info("faithfulness (%s) over %d pairs (%d skipped): drop top %.4f vs random %.4f; top > random in %.1f%%",
             method, n_pairs, skipped, out["mean_drop_top"], out["mean_drop_random"], 100 * out["share_top_greater"])
    return out
