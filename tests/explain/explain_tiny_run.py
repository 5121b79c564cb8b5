"""A tiny, deterministic trained run for the explanation tests (seconds to train).

Four genres; each user prefers one and mostly watches its items, so a
trained history tower has real structure to attribute. Users "u0".."u39",
items "i0".."i31" titled "Film 0 (1980)" .. "Film 31 (2011)"; user "u_new" is in the user
table but has no interactions (empty history).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

GENRES = ["Action", "Comedy", "Drama", "Horror"]
N_USERS, N_ITEMS = 40, 32


def write_tiny_data(d: Path, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    d.mkdir(parents=True, exist_ok=True)
    items = []
    for i in range(N_ITEMS):
        g = [GENRES[i % 4]] + ([GENRES[(i // 4) % 4]] if (i // 4) % 4 != i % 4 and i % 3 == 0 else [])
        items.append({"item_id": f"i{i}", "title": f"Film {i} ({1980 + i})", "genres": "|".join(g), "year": 1980 + i})
    pd.DataFrame(items).to_csv(d / "items.csv", index=False)
    rows = []
    for u in range(N_USERS):
        fav = u % 4
        own = [i for i in range(N_ITEMS) if i % 4 == fav]
        other = [i for i in range(N_ITEMS) if i % 4 != fav]
        n = 6 + u % 5
        picks = list(rng.choice(own, size=min(n - 2, len(own)), replace=False)) + list(rng.choice(other, 2, replace=False))
        rng.shuffle(picks)
        for t, i in enumerate(picks):
            rows.append({"user_id": f"u{u}", "item_id": f"i{i}", "timestamp": 1000 * u + t, "rating": 4})
    df = pd.DataFrame(rows)
    last = df.groupby("user_id")["timestamp"].transform("max")
    df[df.timestamp < last].to_csv(d / "train.csv", index=False)
    df[df.timestamp == last].to_csv(d / "valid.csv", index=False)
    pd.DataFrame({"user_id": [f"u{u}" for u in range(N_USERS)] + ["u_new"],
                  "age": [20 + u for u in range(N_USERS)] + [30]}).to_csv(d / "users.csv", index=False)


def train_tiny_run(out: Path, *, history: str = "mean", user_features: bool = False, epochs: int = 2,
                   extra: tuple[str, ...] = (), write_data: bool = True) -> Path:
    """Train the tiny run into ``out`` and return it (``extra``: more config overrides; ``write_data=False``:
    train on the files a test already wrote, and edited, in ``<out>_data``)."""
    from twotower.config import load_config
    from twotower.pipeline.run import train_run

    data = out.parent / (out.name + "_data")
    if write_data:
        write_tiny_data(data)
    overrides = [
        f"data.train={json.dumps(str(data / 'train.csv'))}",
        f"data.valid={json.dumps(str(data / 'valid.csv'))}",
        f"data.items={json.dumps(str(data / 'items.csv'))}",
        "data.item_multi=genres",
        "data.item_numeric=year",
        "data.title_col=title",
        f"model.user.history={history}",
        "model.user.history_len=8",
        "model.user.hidden=32",
        "model.item.hidden=32",
        "model.user.out_dim=16",
        "model.item.out_dim=16",
        "model.user.history_dim=16",
        "model.item.id_dim=16",
        "model.user.dropout=0",
        "model.item.dropout=0",
        f"train.epochs={epochs}",
        "train.batch_size=32",
        "train.lr=0.01",
        "train.progress=false",
        "train.checkpoint=false",
        "train.threads=1",
        "eval.ks=10",
        "eval.baselines=",
    ]
    if user_features:
        overrides += [f"data.users={json.dumps(str(data / 'users.csv'))}", "data.user_numeric=age"]
    train_run(load_config(overrides=[*overrides, *extra]), out)
    return out
