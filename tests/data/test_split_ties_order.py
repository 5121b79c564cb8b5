"""Rows tied on (user, time, item) keep the frame's order in every split (the sort is stable)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from twotower.data.splits import leave_last_n_out, random_split, temporal_split


def _tied_frame() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    n = 4000  # few users, times and items: most rows tie with others on all three
    return pd.DataFrame({"user_id": rng.choice(["u1", "u2", "007", "7"], n), "item_id": rng.choice(["10", "9", "x"], n),
                         "timestamp": rng.integers(0, 3, n), "rating": np.arange(n, dtype=np.float32)})


@pytest.mark.parametrize("split", [lambda df: temporal_split(df, (0.5, 0.25, 0.25)), lambda df: leave_last_n_out(df, 2),
                                   lambda df: random_split(df, (0.5, 0.25, 0.25), seed=1)])
def test_rows_tied_on_user_time_and_item_keep_the_frame_order(split):
    df = _tied_frame()
    parts = pd.concat(list(split(df)), ignore_index=True)
    assert sorted(parts["rating"].tolist()) == df["rating"].tolist()  # every row once
    for part in split(df):
        # the rating is the row's position in the frame: within a tie group it only increases
        groups = part.groupby(["user_id", "timestamp", "item_id"], sort=False)["rating"]
        assert groups.apply(lambda r: bool(r.is_monotonic_increasing)).all()


def test_random_split_does_not_depend_on_the_file_row_order():
    # Before: the seed's permutation was drawn over the rows in the file's order, then sorted, so the same
    # interactions in another order (a re-export, `cat b a`) cut into other train/valid/test sets with one seed,
    # while `data split` said it sorted the rows before splitting them (ML-100K: 12,924 of 64,648 train rows moved)
    rng = np.random.default_rng(5)
    n = 600
    df = pd.DataFrame({"user_id": rng.choice([f"u{i}" for i in range(20)], n), "item_id": [str(i) for i in range(n)],
                       "timestamp": rng.integers(0, 50, n), "rating": np.ones(n, dtype=np.float32)})
    shuffled = df.sample(frac=1.0, random_state=7).reset_index(drop=True)
    for a, b in zip(random_split(df, (0.8, 0.1, 0.1), seed=1), random_split(shuffled, (0.8, 0.1, 0.1), seed=1)):
        pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True))
