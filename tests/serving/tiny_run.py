"""A tiny deterministic trained run for service and index tests (about 5 s on one thread).

60 items ``i0..i59`` with titles, pipe-joined genres and years; 40 users
``u0..u39`` with 12 interactions each. The user tower is history-only
(recency pooling), so unseen users can be embedded from a history.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

GENRES = ["Action", "Comedy", "Drama", "Horror"]
N_USERS, N_ITEMS = 40, 60
#: ``build_tiny_run(retitle=DUP_TITLES)``: i1 (year 1991) and i20 (1990) titled "Movie 0" as i0 (1990) is
DUP_TITLES = {"i1": "Movie 0", "i20": "Movie 0"}
#: their names (explain/names.py): i1's year is its own, i0 and i20 share theirs, so the id tells them apart
DUP_NAMES = {"i0": "Movie 0 [item i0]", "i1": "Movie 0 (1991)", "i20": "Movie 0 [item i20]"}


def write_tiny_data(folder: Path) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    items = pd.DataFrame({
        "item_id": [f"i{j}" for j in range(N_ITEMS)],
        "title": [f"Movie {j}" for j in range(N_ITEMS)],
        # item j: genre j % 4, plus the next genre when j % 3 == 0 -> "Action|Comedy" for i0
        "genres": [GENRES[j % 4] + ("|" + GENRES[(j + 1) % 4] if j % 3 == 0 else "") for j in range(N_ITEMS)],
        "year": [1990 + j % 20 for j in range(N_ITEMS)],
    })
    rows = [(f"u{u}", f"i{(u * 3 + t * (1 + u % 5)) % N_ITEMS}", t) for u in range(N_USERS) for t in range(12)]
    inter = pd.DataFrame(rows, columns=["user_id", "item_id", "timestamp"]).drop_duplicates(["user_id", "item_id"])
    items.to_csv(folder / "items.csv", index=False)
    inter.to_csv(folder / "interactions.csv", index=False)
    return folder / "interactions.csv", folder / "items.csv"


def build_tiny_run(folder: Path, rename_users: dict[str, str] | None = None,
                   retitle: dict[str, str] | None = None, title_col: str | None = "title",
                   titles: bool = True, unplaced: int = 0, item_columns: dict[str, list] | None = None) -> Path:
    """Train the tiny run into ``folder / "run"`` and return that path; ``rename_users`` gives users other ids
    (``{"u7": "7", "u8": "007"}``: ids that are text, not numbers), ``retitle`` items other titles
    (``{"i1": "Movie 0"}``: two items with one title), ``title_col`` its ``data.title_col`` (None: unset, the
    item table's ``title`` column still there); ``titles=False``: an item table without a title column (and
    ``data.title_col`` unset), items named by id; ``unplaced``: that many more items ``x0, x1, ...`` in the
    item table and never in training, which the ID-only item tower cannot place (a zero vector); ``item_columns``:
    columns set in the item table (``{"year": [...]}``, a value per item; None: an empty cell), metadata the
    towers do not read."""
    from twotower.config import load_config
    from twotower.pipeline.run import train_run

    inter, items = write_tiny_data(folder / "data")
    if rename_users:
        df = pd.read_csv(inter, dtype=str)
        df["user_id"] = df["user_id"].replace(rename_users)
        df.to_csv(inter, index=False)
    if not titles:
        pd.read_csv(items).drop(columns=["title"]).to_csv(items, index=False)
        title_col = None
    if unplaced:
        table = pd.read_csv(items)
        extra = pd.DataFrame({"item_id": [f"x{j}" for j in range(unplaced)], "title": [f"New {j}" for j in range(unplaced)],
                              "genres": ["Drama"] * unplaced, "year": [2000] * unplaced})
        pd.concat([table, extra]).to_csv(items, index=False)
    if item_columns:
        table = pd.read_csv(items)
        for name, values in item_columns.items():
            table[name] = values
        table.to_csv(items, index=False)
    if retitle:
        table = pd.read_csv(items)
        table["title"] = [retitle.get(i, t) for i, t in zip(table["item_id"], table["title"])]
        table.to_csv(items, index=False)
    overrides = [
        f"data.path={json.dumps(str(inter))}", f"data.items={json.dumps(str(items))}",
        f"data.title_col={json.dumps(title_col)}",
        "data.rating_col=null", "train.epochs=1", "train.progress=false", "train.batch_size=64", "train.threads=1",
        "train.checkpoint=false", "model.user.use_id=false", 'model.user.history="recency"',
        "model.user.history_len=8", "model.user.history_dim=16", "model.user.out_dim=16", "model.user.hidden=[32]",
        "model.item.out_dim=16", "model.item.hidden=[32]", "model.item.id_dim=16", "eval.baselines=[]",
    ]
    out = folder / "run"
    train_run(load_config(overrides=overrides), out)
    np.random.seed(None)  # do not leak the training seed into other tests
    return out
