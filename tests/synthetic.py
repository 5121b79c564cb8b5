"""A small structured interaction dataset with a known right answer.

Two taste groups: users 0..N/2-1 only consume items 0..I/2-1 and the others
only items I/2..I-1, in a fixed cyclic order that starts at a user-specific
offset. A model that learns anything ranks in-group items first, and a
sequence-aware one predicts the next item in the cycle.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd


def make_interactions(n_users: int = 40, n_items: int = 30, per_user: int = 12, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    half = n_items // 2
    rows = []
    for u in range(n_users):
        group = 0 if u < n_users // 2 else 1
        start = int(rng.integers(0, half))
        for j in range(per_user):
            item = group * half + (start + j) % half
            rows.append((f"u{u}", f"i{item}", 1_000_000 + 100 * j + u, 4.0))
    return pd.DataFrame(rows, columns=["user_id", "item_id", "timestamp", "rating"])


def make_items(n_items: int = 30) -> pd.DataFrame:
    half = n_items // 2
    return pd.DataFrame(
        {
            "item_id": [f"i{i}" for i in range(n_items)],
            "title": [f"Movie {i} ({1980 + i})" for i in range(n_items)],
            "genres": ["Action|Thriller" if i < half else "Comedy|Romance" for i in range(n_items)],
            "year": [1980 + i for i in range(n_items)],
        }
    )


def write_dataset(directory: Path, **kw: int) -> dict[str, Path]:
    from twotower.data.splits import temporal_split

    directory.mkdir(parents=True, exist_ok=True)
    df = make_interactions(**kw)
    split = temporal_split(df, (0.8, 0.1, 0.1))
    paths = {}
    for name, part in (("train", split.train), ("valid", split.valid), ("test", split.test)):
        paths[name] = directory / f"{name}.csv"
        part.to_csv(paths[name], index=False)
    paths["all"] = directory / "all.csv"
    df.to_csv(paths["all"], index=False)
    paths["items"] = directory / "items.csv"
    make_items(kw.get("n_items", 30)).to_csv(paths["items"], index=False)
    return paths


def write_dataset_with_cold_items(directory: Path, cold: list[str], **kw: int) -> dict[str, Path]:
    """:func:`write_dataset` with the ``cold`` items' train and valid rows removed: held-out items that no training
    row names (in the vocabulary by the item table), what `evaluate --segments cold-items` sets apart."""
    paths = write_dataset(directory, **kw)
    for part in ("train", "valid"):
        df = pd.read_csv(paths[part])
        df[~df["item_id"].isin(cold)].to_csv(paths[part], index=False)
    return paths


#: small towers for the leave-one-out tests (tests/pipeline/test_history_from.py, tests/serving/test_serve_history_from.py)
LOO_FAST = ["train.batch_size=32", "model.user.hidden=[32]", "model.item.hidden=[32]", "model.user.out_dim=16",
            "model.item.out_dim=16", "model.user.history_len=6", "model.user.history_dim=16", "--no-progress"]


def write_loo_split(directory: Path) -> Path:
    """A SASRec-format file (integer ids, file order = time order) split leave-last-one-out by the CLI, as a user
    of the ML-1M benchmark does: each user's newest item is in valid.csv. Returns the split folder."""
    from twotower.cli.main import main

    df = make_interactions(n_users=30, n_items=24, per_user=10)
    df = df.sort_values(["user_id", "timestamp"], kind="stable")
    lines = [f"{u[1:]} {int(i[1:]) + 1}" for u, i in zip(df["user_id"], df["item_id"])]
    (directory / "seq.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert main(["-q", "data", "split", "--input", str(directory / "seq.txt"), "--method", "leave_last", "--n", "1",
                 "--out", str(directory / "split")]) == 0
    return directory / "split"
