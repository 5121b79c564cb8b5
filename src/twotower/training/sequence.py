"""Sequence-level training examples: one window per user, a target at every position.

``train.examples=sequence`` (the all-positions causal objective of SASRec,
Kang & McAuley 2018): the input window is the user's train items ``[s, e-1)``
(the newest ``L``), right-aligned and padded on the left; the target at column
``t`` is the item right after the input item at column ``t``. One forward pass
of a sequence user tower (:meth:`~twotower.models.towers.UserTower.forward_all`,
causal: column ``t`` reads columns ``<= t`` only) yields a prediction at every
valid position, so a user with ``n`` train items gives ``min(n - 1, L)``
targets for the cost of one sequence. Padding columns are masked out of the
loss (their targets are the pad id).

With ``random_windows`` a user longer than ``L + 1`` gets a window ending at a
random position each epoch (else always the newest items).

Shape legend: ``B`` users, ``L`` window length, ``P`` valid positions.
"""
from __future__ import annotations

import numpy as np

from twotower.models.history import UserSequences, windows_before

__all__ = ["SequenceExamples"]


class SequenceExamples:
    """The users that have a target (>= 2 train items) and their windows."""

    def __init__(self, seqs: UserSequences, L: int, pad: int, *, random_windows: bool = False) -> None:
        self.seqs, self.L, self.pad, self.random_windows = seqs, L, pad, random_windows
        self.users = np.flatnonzero(seqs.lengths() >= 2).astype(np.int64)  # [U']

    def __len__(self) -> int:
        return int(self.users.shape[0])

    def n_positions(self) -> int:
        """Target positions per epoch with the newest windows."""
        return int(np.minimum(self.seqs.lengths()[self.users] - 1, self.L).sum())

    def windows(self, units: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(users[B], inputs[B, L], targets[B, L])`` for example indices ``units``; pad where no target."""
        users = self.users[units]
        s, e = self.seqs.indptr[users], self.seqs.indptr[users + 1]
        end = e.copy()  # one past the last target
        if self.random_windows:
            long = e - s > self.L + 1
            if long.any():
                lo = s[long] + self.L + 1
                end[long] = lo + (rng.random(int(long.sum())) * (e[long] - lo + 1)).astype(np.int64)
        inputs = windows_before(self.seqs.items, s, end - 1, self.L, self.pad)  # [B, L] items [end-1-L, end-1)
        targets = windows_before(self.seqs.items, s + 1, end, self.L, self.pad)  # [B, L] the next item of each
        return users, inputs, targets
