"""An item table whose title column is called otherwise (data.title_col=name): lists show those titles.

Before: `recommend --user` printed bare ids and the HTTP/JSON answers had no "title", because every reader
looked for a column literally named "title".
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from twotower.cli.main import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serving"))
from tiny_run import write_tiny_data  # noqa: E402


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    from twotower.config import load_config
    from twotower.pipeline.run import train_run

    folder = tmp_path_factory.mktemp("titlecol")
    inter, items = write_tiny_data(folder / "data")
    pd.read_csv(items).rename(columns={"title": "name"}).to_csv(items, index=False)
    overrides = [
        f"data.path={json.dumps(str(inter))}", f"data.items={json.dumps(str(items))}", "data.title_col=name",
        "data.rating_col=null", "train.epochs=1", "train.progress=false", "train.threads=1", "train.checkpoint=false",
        "model.user.history_len=8", "model.user.history_dim=16", "model.user.out_dim=16", "model.user.hidden=[32]",
        "model.item.out_dim=16", "model.item.hidden=[32]", "model.item.id_dim=16", "eval.baselines=[]",
    ]
    train_run(load_config(overrides=overrides), folder / "run")
    np.random.seed(None)
    return folder / "run"


def test_recommend_prints_the_named_title_column(run_dir, capsys):
    assert main(["recommend", "--run", str(run_dir), "--user", "u1", "--k", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()[1:]
    assert len(lines) == 3 and all(line.split(". ", 1)[1].startswith("Movie ") for line in lines), lines


def test_json_and_service_records_carry_a_title(run_dir, capsys):
    from twotower.pipeline.artifacts import TrainedRun
    from twotower.serving.catalog import ItemCatalog

    assert main(["recommend", "--run", str(run_dir), "--user", "u1", "--k", "2", "--json"]) == 0
    items = json.loads(capsys.readouterr().out)["items"]
    assert all(it["title"] == it["name"] and it["title"].startswith("Movie ") for it in items)
    run = TrainedRun.load(run_dir)
    rec = ItemCatalog.from_run(run).record(run.item_vocab.index("i5"))
    assert rec["title"] == rec["name"] == "Movie 5"


def test_explanations_carry_the_named_title_column_and_print_it(run_dir, capsys):
    # explanation records took their title from data.title_col; printing keeps the column of titles
    assert main(["explain", "--run", str(run_dir), "--user", "u1", "--item", "i5", "--json"]) == 0
    e = json.loads(capsys.readouterr().out)
    assert e["item"]["title"] == e["item"]["name"] == "Movie 5"
    assert all(h["title"] == h["name"] for h in e["history"])
    assert main(["explain", "--run", str(run_dir), "--user", "u1", "--item", "i5"]) == 0
    out = capsys.readouterr().out
    assert "item i5  Movie 5  score" in out and " title" in out
