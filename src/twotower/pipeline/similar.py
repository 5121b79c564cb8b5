"""The query vector of an item-to-item search (``/similar-items``, the demo's "items most similar to").

A warm item is queried with its own served vector. A cold item (no training interactions) of a dual-head item
tower is queried, by default, with its semantic head's vector against the same served vectors: its mixed vector
is half a collaborative head that read a zero ID vector, shared by every cold item, so its neighbours were other
cold and rarely-rated items (bench/cold_similar.py: 74-80% of a cold anchor's top 10 were cold items, which are
16% of the catalogue; "The Godfather: Part II" made cold ranked "The Godfather" 3rd behind two cold items, its
semantic vector ranks it 1st; warm-neighbour HR@10 0.575 -> 0.631 on held-out anchors).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from twotower.config import COLD_SIMILAR


def cold_item_mask(run: Any) -> np.ndarray | None:
    """``[I]`` bool, the items with no training interactions, for a dual-head run; None for any other (its cold
    items are queried as warm ones)."""
    if getattr(run.model.item_tower, "semantic", None) is None:
        return None
    return np.bincount(np.asarray(run.history.items, dtype=np.int64), minlength=run.n_items)[: run.n_items] == 0


def similar_query(run: Any, vectors: np.ndarray, row: int, cold: np.ndarray | None,
                  cold_similar: str = COLD_SIMILAR[0]) -> tuple[np.ndarray, str]:
    """``([1, D] query, space)`` for the neighbours of item ``row`` among ``vectors`` [I, D]: ``space`` is "item"
    (the row of ``vectors``) or "semantic" (a cold item's semantic head, zero-padded to ``D`` where the
    vectors carry item-item factors, which are zero for an item without interactions)."""
    if cold_similar not in COLD_SIMILAR:
        raise ValueError(f"cold_similar must be one of {', '.join(COLD_SIMILAR)}, got {cold_similar!r}")
    if cold_similar == "item" or cold is None or not 0 <= row < len(cold) or not cold[row]:
        return vectors[row : row + 1], "item"
    import torch

    tower = run.model.item_tower
    was = tower.training
    tower.eval()
    with torch.inference_mode():
        heads = tower.forward_heads(torch.as_tensor([row], dtype=torch.long))[1]
    tower.train(was)
    sem = heads.semantic.numpy().astype(np.float32)
    query = np.zeros((1, vectors.shape[1]), np.float32)
    query[:, : sem.shape[1]] = sem
    return query, "semantic"
