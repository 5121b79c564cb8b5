from __future__ import annotations

import numpy as np

from twotower.models import UserSequences
from twotower.training.examples import build_examples, make_histories


def _seqs() -> UserSequences:
    return UserSequences.from_arrays(np.array([0] * 5), np.arange(5), np.arange(5), 1)


def test_causal_examples_never_see_the_target_or_the_future():
    seqs = _seqs()
    ex = build_examples(seqs, "causal")
    hist = make_histories(seqs, ex.users, ex.positions, ex.denoise, L=3, pad=99, rng=np.random.default_rng(0), keep=1.0)
    targets = seqs.items[ex.positions]
    for row, t in zip(hist, targets):
        real = row[row != 99]
        assert t not in real
        assert (real < t).all()  # items are in time order here, so only earlier ones
    assert hist.tolist()[-1] == [1, 2, 3]  # target 4 sees the last 3 items before it


def test_denoising_examples_exclude_the_target_and_can_see_later_items():
    seqs = _seqs()
    ex = build_examples(seqs, "denoising")
    hist = make_histories(seqs, ex.users, ex.positions, ex.denoise, L=4, pad=99, rng=np.random.default_rng(0), keep=1.0)
    assert hist[0].tolist() == [1, 2, 3, 4]  # target 0 predicted from the rest
    for row, t in zip(hist, seqs.items[ex.positions]):
        assert t not in row


def test_both_mode_doubles_the_examples():
    ex = build_examples(_seqs(), "both")
    assert len(ex) == 10 and ex.denoise.sum() == 5
