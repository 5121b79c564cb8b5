"""A tiny run turned into a dual-head run with cold items, as training leaves items it never saw."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch


def dual_head_with_cold(run_dir: Path, cold_ids: tuple[str, ...], *, same_text: tuple[str, str] | None = None) -> Any:
    """The run in ``run_dir`` with a dual-head item tower over random text (seeded) whose ``cold_ids`` have no
    training rows and a zero ID vector (pipeline/experiment.py zeroes them after training); ``same_text``
    ``(a, b)`` gives item ``a`` the text of item ``b``."""
    from twotower.models.history import UserSequences
    from twotower.models.two_tower import TwoTowerModel
    from twotower.pipeline.artifacts import TrainedRun

    run = TrainedRun.load(run_dir)
    cfg = run.config.model
    torch.manual_seed(0)
    text = np.random.default_rng(0).normal(size=(run.n_items, 8)).astype(np.float32)
    row = run.item_vocab.index
    if same_text is not None:
        text[row(same_text[0])] = text[row(same_text[1])]
    cold = [row(i) for i in cold_ids]
    run.model = TwoTowerModel(replace(cfg, item=replace(cfg.item, dual_head=True)), len(run.user_vocab), run.n_items,
                              item_text=text).eval()
    with torch.no_grad():
        run.model.item_tower.id_emb.weight[cold] = 0.0
    h = run.history
    keep = ~np.isin(h.items, cold)
    counts = np.add.reduceat(keep, h.indptr[:-1]) * (np.diff(h.indptr) > 0)
    run.history = UserSequences(np.concatenate([[0], np.cumsum(counts)]).astype(h.indptr.dtype), h.items[keep],
                                h.timestamps[keep])
    run._item_emb, run._fingerprint = None, None
    return run
