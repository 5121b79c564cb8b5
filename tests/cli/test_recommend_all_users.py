"""`recommend --users all` lists every user `evaluate` scores, so its lists reproduce evaluate's figures.

A user of the user table without training interactions is a known user: `evaluate` scores their list (from their
features and an empty history), but `--users all` listed only users with an input history, so an audit recomputing
the figures from `--out recs.csv` counted them as misses (a time split with 10 such users of 48: HitRate@10 0.375
from the file against 0.5625 printed). With --history-from, likewise for a user without rows in those files.
"""
from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import pandas as pd
import pytest

from tests.synthetic import write_dataset
from twotower.cli.main import main

FAST = ["train.batch_size=32", "model.user.hidden=[16]", "model.item.hidden=[16]", "model.user.out_dim=8",
        "model.item.out_dim=8", "model.user.history_len=4", "train.threads=1", "--no-progress", "--no-eval",
        "model.item_item.enabled=false"]
NEW = ("u28", "u29")  # in the user table and the held-out files, never in train


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("all-users")
    paths = write_dataset(d / "data", n_users=30, n_items=24, per_user=10)
    train = pd.read_csv(paths["train"], dtype={"user_id": str, "item_id": str})
    train[~train["user_id"].isin(NEW)].to_csv(paths["train"], index=False)
    users = d / "data" / "users.csv"
    pd.DataFrame({"user_id": [f"u{u}" for u in range(30)], "age": [20 + u for u in range(30)]}).to_csv(users, index=False)
    out = d / "run"
    assert main(["-q", "train", "--train", str(paths["train"]), "--valid", str(paths["valid"]), "--test",
                 str(paths["test"]), "--out", str(out), "--users", str(users), "data.user_numeric=[\"age\"]",
                 "--epochs", "1", *FAST]) == 0
    return out


def _figures(recs: Path, test: Path, k: int) -> dict[str, float]:
    """HitRate / Recall (hits / |R|) / NDCG / MRR at k, from the CSV, over the test file's users."""
    lists: dict[str, list[str]] = defaultdict(list)
    for row in pd.read_csv(recs, dtype={"user_id": str, "item_id": str}).sort_values(["user_id", "rank"]).itertuples():
        lists[row.user_id].append(row.item_id)
    relevant = pd.read_csv(test, dtype={"user_id": str, "item_id": str}).groupby("user_id")["item_id"].apply(set)
    sums = dict.fromkeys(("HitRate", "Recall", "NDCG", "MRR"), 0.0)
    for user, rel in relevant.items():
        hits = [item in rel for item in lists[user][:k]]
        sums["HitRate"] += any(hits)
        sums["Recall"] += sum(hits) / len(rel)
        sums["NDCG"] += (sum(1 / math.log2(j + 2) for j, h in enumerate(hits) if h)
                         / sum(1 / math.log2(j + 2) for j in range(min(len(rel), k))))
        sums["MRR"] += next((1 / (j + 1) for j, h in enumerate(hits) if h), 0.0)
    return {name: total / len(relevant) for name, total in sums.items()}


@pytest.mark.parametrize("history_from", [False, True])
def test_the_lists_of_users_all_give_evaluates_figures(run_dir: Path, tmp_path: Path, history_from: bool,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    data = run_dir / "data"
    files = [str(data / "train.csv"), str(data / "valid.csv")]
    inputs = ["--history-from", str(data / "train.csv")] if history_from else []  # NEW have no rows there
    capsys.readouterr()
    assert main(["-q", "evaluate", "--run", str(run_dir), "--baselines", "", "--ks", "5", "--json", *inputs]) == 0
    tower = json.loads(capsys.readouterr().out)[0]
    test_users = set(pd.read_csv(data / "test.csv", dtype={"user_id": str})["user_id"])
    assert set(NEW) <= test_users and tower["users_evaluated"] == len(test_users) == 30

    recs = tmp_path / "recs.csv"
    assert main(["-q", "recommend", "--run", str(run_dir), "--users", "all", "--k", "5", "--exclude", *files,
                 *inputs, "--out", str(recs)]) == 0
    listed = set(pd.read_csv(recs, dtype={"user_id": str})["user_id"])
    assert listed == test_users  # the two users without an input history included
    for name, value in _figures(recs, data / "test.csv", 5).items():
        assert tower[f"{name}@5"] == pytest.approx(value, abs=1e-12), name
    if history_from:  # they are said to be ranked from an empty history
        assert "2 of 30 users have no rows of known items in the --history-from files" in capsys.readouterr().err
