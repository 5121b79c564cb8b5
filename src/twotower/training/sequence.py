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

Speed: batches are cut from an epoch order bucketed by length
(:meth:`SequenceExamples.bucketed`: users of similar length together, batch
order shuffled), and each batch's windows drop the columns that are padding in
every row. The encoder aligns positions to the right edge, so a trimmed window
gives exactly the states of the full one, at the cost of the real columns only
(ML-1M: ~53% of the 200-column grid).

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

    def bucketed(self, order: np.ndarray, batch: int, rng: np.random.Generator, *, chunk: int = 64) -> np.ndarray:
        """``order`` regrouped so that each run of ``batch`` units has similar window lengths.

        Within chunks of ``chunk`` batches the units are sorted by length, cut
        into batches, and the batches of the whole epoch shuffled with ``rng``
        (so the result depends on the seed only, like ``order``).
        """
        lengths = np.minimum(self.seqs.lengths()[self.users[order]] - 1, self.L)  # [n]
        span = batch * chunk
        batches: list[np.ndarray] = []
        for s in range(0, len(order), span):
            part = order[s : s + span]
            part = part[np.argsort(lengths[s : s + span], kind="stable")]
            batches.extend(part[i : i + batch] for i in range(0, len(part), batch))
        full = [b for b in batches if len(b) == batch]
        rest = [b for b in batches if len(b) != batch]
        perm = rng.permutation(len(full))
        return np.concatenate([*(full[i] for i in perm), *rest]) if batches else order

    def window_ends(self, units: np.ndarray, rng: np.random.Generator | None) -> np.ndarray:
        """One past the last target of each unit's window, ``[B]`` offsets into the sequences.

        The newest items, or with ``random_windows`` a random end for users
        longer than ``L + 1`` (one ``rng.random`` draw per such user, in order).
        """
        users = self.users[units]
        s, e = self.seqs.indptr[users], self.seqs.indptr[users + 1]
        end = e.copy()
        if self.random_windows:
            long = e - s > self.L + 1
            if long.any():
                if rng is None:
                    raise ValueError("random_windows needs a generator")
                lo = s[long] + self.L + 1
                end[long] = lo + (rng.random(int(long.sum())) * (e[long] - lo + 1)).astype(np.int64)
        return end

    def windows(self, units: np.ndarray, rng: np.random.Generator | None = None, *,
                ends: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(users[B], inputs[B, L'], targets[B, L'])`` for example indices ``units``; pad where no target.

        ``ends`` (from :meth:`window_ends`) fixes the windows, e.g. drawn for a
        whole global batch and sliced per rank; else they are drawn with ``rng``.
        ``L' <= L``: the columns that are padding in every row are dropped.
        """
        users = self.users[units]
        s = self.seqs.indptr[users]
        end = self.window_ends(units, rng) if ends is None else ends  # one past the last target
        inputs = windows_before(self.seqs.items, s, end - 1, self.L, self.pad)  # [B, L] items [end-1-L, end-1)
        targets = windows_before(self.seqs.items, s + 1, end, self.L, self.pad)  # [B, L] the next item of each
        # drop the columns that are padding in every row (rounded to 8 columns): same states, less work
        width = int(np.minimum(end - s - 1, self.L).max()) if len(users) else self.L
        keep = min(self.L, -(-max(width, 1) // 8) * 8)
        return users, inputs[:, self.L - keep :], targets[:, self.L - keep :]
