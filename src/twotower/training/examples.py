"""Training examples: which history predicts which target.

*Causal*: every training interaction is predicted from the items the user
interacted with strictly before it (no peeking at later items, which is
exactly what a temporal split rewards). *Denoising*: a target is predicted
from a random subset of the user's *other* training items. In both the target
never appears in its own input.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from twotower.config import TrainConfig
from twotower.models.history import UserSequences, windows_before

__all__ = ["ExampleSet", "build_examples", "examples_per_epoch", "make_histories", "unused_history_dropout"]


@dataclass(frozen=True)
class ExampleSet:
    """One row per training example (flat positions into ``UserSequences``).

    ``users[E]`` user rows, ``positions[E]`` index of the target in the flat
    sequence array, ``denoise[E]`` whether the input is a random subset of the
    other items (True) or the causal prefix (False).
    """

    users: np.ndarray
    positions: np.ndarray
    denoise: np.ndarray

    def __len__(self) -> int:
        return int(self.users.shape[0])


def build_examples(seqs: UserSequences, mode: str) -> ExampleSet:
    n = len(seqs.items)
    users = np.repeat(np.arange(seqs.n_users, dtype=np.int64), seqs.lengths())
    positions = np.arange(n, dtype=np.int64)
    if mode == "causal":
        return ExampleSet(users, positions, np.zeros(n, dtype=bool))
    if mode == "denoising":
        return ExampleSet(users, positions, np.ones(n, dtype=bool))
    if mode == "both":
        return ExampleSet(
            np.concatenate([users, users]),
            np.concatenate([positions, positions]),
            np.concatenate([np.zeros(n, bool), np.ones(n, bool)]),
        )
    raise ValueError(f"unknown example mode {mode!r}")


def examples_per_epoch(lengths: np.ndarray, mode: str, cap: int | None = None) -> int:
    """The units an epoch of ``train.examples=mode`` trains on, counted before any is built: ``len`` of
    :func:`build_examples` (one per training interaction, twice for "both"), or for "sequence" the users with a
    target (:class:`~twotower.training.sequence.SequenceExamples`); at most ``cap``
    (``train.max_examples_per_epoch``), as the trainer draws them."""
    n = int((lengths >= 2).sum()) if mode == "sequence" else (2 if mode == "both" else 1) * int(lengths.sum())
    return min(n, cap) if cap else n


def make_histories(
    seqs: UserSequences,
    users: np.ndarray,
    positions: np.ndarray,
    denoise: np.ndarray,
    L: int,
    pad: int,
    rng: np.random.Generator,
    keep: float,
    drop: float = 0.0,
) -> np.ndarray:
    """Input histories [B, L] for a batch of examples (targets excluded).

    ``drop``: each causal input item is replaced by padding with this probability (``train.history_dropout``).
    The tower then learns from partial views of a history, so no few items it happens to hold decide its
    embedding; the items keep their places, so a pool's recency weights still read each item's true age.
    """
    starts = seqs.indptr[users]
    hist = windows_before(seqs.items, starts, positions, L, pad)  # causal prefix
    if denoise.any():
        for b in np.flatnonzero(denoise):
            s, e, p = starts[b], seqs.indptr[users[b] + 1], positions[b]
            others = np.concatenate([np.arange(s, p), np.arange(p + 1, e)])
            if keep < 1.0 and len(others):
                others = others[rng.random(len(others)) < keep]
            others = others[-L:]
            row = np.full(L, pad, dtype=np.int64)
            if len(others):
                row[L - len(others) :] = seqs.items[others]
            hist[b] = row
    if drop > 0:  # one draw per cell whatever the rows, so the stream does not depend on which rows are causal
        dropped = rng.random(hist.shape) < drop
        if denoise.any():
            dropped &= ~denoise[:, None]
        np.putmask(hist, dropped, pad)
    return hist


def unused_history_dropout(train: TrainConfig, reads_history: bool) -> str | None:
    """The sentence saying that ``train.history_dropout`` (a default, 0.2) drops nothing in this run, or None.

    It drops items of causal examples' input histories only (``make_histories``): windows of
    ``train.examples=sequence`` are read whole, denoising examples' subsets are thinned by ``train.denoise_keep``
    instead, and a user tower that reads no history has none to drop. The run's config.json records the value all
    the same, so the start-up log says it is not applied."""
    if not train.history_dropout:
        return None
    if train.examples == "sequence":
        why = "train.examples=sequence reads each window whole"
    elif train.examples == "denoising":
        why = "train.examples=denoising thins each input by train.denoise_keep instead"
    elif not reads_history:
        why = "the user tower reads no history (model.user.history=none)"
    else:
        return None
    return (f"train.history_dropout={train.history_dropout:g} is not applied: {why}; it drops items of causal "
            "examples' input histories (set train.history_dropout=0 to record that)")
