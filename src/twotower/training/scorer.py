"""Full-catalogue scorer for a two-tower model, reading each user's training history."""
from __future__ import annotations

import numpy as np
import torch

from twotower.models.history import UserSequences
from twotower.models.two_tower import TwoTowerModel

__all__ = ["TwoTowerScorer"]


class TwoTowerScorer:
    """``score(users) -> [U, I]``: user vectors from their last L history items · item vectors.

    Item vectors are computed once at construction (the model is frozen while
    scoring), so build a new scorer after each training epoch.
    """

    name = "two-tower"

    def __init__(self, model: TwoTowerModel, history: UserSequences) -> None:
        self.model = model
        self.history = history
        self.items = model.all_item_embeddings()  # [I, D]

    def user_vectors(self, users: np.ndarray) -> torch.Tensor:
        hist = self.history.last_windows(users, self.model.history_len, self.model.pad_item)  # [U, L]
        return self.model.user_embeddings(np.asarray(users, np.int64), hist)

    def score(self, users: np.ndarray) -> np.ndarray:
        u = self.user_vectors(users)  # [U, D]
        return (u @ self.items.T).cpu().numpy()  # [U, I]
