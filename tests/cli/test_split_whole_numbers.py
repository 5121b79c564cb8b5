"""`twotower data split --dataset` writes items.csv / users.csv with whole numbers as integers (``year`` 1995, not
1995.0: pandas reads a column with an empty cell as float), missing ones empty, as the JSON answers give them."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd

from twotower.cli.main import main


def test_whole_numbers_are_written_as_integers(tmp_path, monkeypatch) -> None:
    from twotower.data import movielens

    interactions = pd.DataFrame({"user_id": [f"u{i % 4}" for i in range(40)], "item_id": [f"i{i % 6}" for i in range(40)],
                                 "timestamp": range(40), "rating": 1.0})
    items = pd.DataFrame({"item_id": [f"i{j}" for j in range(6)], "title": [f"Movie {j}" for j in range(6)],
                          "year": [1995.0, np.nan, 1990.0, 2001.0, 1977.0, 1995.0],  # whole, one missing
                          "score": [3.5, 4.0, np.nan, 1.0, 2.0, 2.5],  # a real fraction: kept as floats
                          "big": [float(2**60)] * 6})  # past 2**53 a float is no exact integer: kept as floats
    users = pd.DataFrame({"user_id": [f"u{i}" for i in range(4)], "age": [24.0, 53.0, np.nan, 30.0]})
    monkeypatch.setattr(movielens, "fetch_movielens_100k", lambda *a, **k: tmp_path)
    monkeypatch.setattr(movielens, "load_movielens_100k",
                        lambda *a, **k: SimpleNamespace(interactions=interactions, items=items, users=users))
    out = tmp_path / "split"
    assert main(["-q", "data", "split", "--dataset", "movielens-100k", "--out", str(out)]) == 0
    lines = (out / "items.csv").read_text().splitlines()
    assert lines[:3] == ["item_id,title,year,score,big", f"i0,Movie 0,1995,3.5,{float(2**60)}",
                         f"i1,Movie 1,,4.0,{float(2**60)}"]
    assert (out / "users.csv").read_text().splitlines() == ["user_id,age", "u0,24", "u1,53", "u2,", "u3,30"]
    assert "1.0" in (out / "train.csv").read_text()  # the interactions are written as read
    back = pd.read_csv(out / "items.csv")  # the same numbers read back
    assert back["year"].tolist()[2:] == [1990, 2001, 1977, 1995] and np.isnan(back["year"][1])
