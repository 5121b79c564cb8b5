"""`twotower evaluate --csv FILE --plot FILE.png`: the rows --json prints, as CSV and as a metric-vs-k plot."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from tests.synthetic import write_dataset
from twotower.cli.main import main

FAST = ["train.batch_size=32", "model.user.hidden=[16]", "model.item.hidden=[16]", "model.user.out_dim=8",
        "model.item.out_dim=8", "model.user.history_len=4", "train.threads=1", "--no-progress", "--no-eval"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("eval-out")
    paths = write_dataset(d / "data", n_users=30, n_items=24, per_user=10)
    out = d / "run"
    assert main(["-q", "train", "--train", str(paths["train"]), "--valid", str(paths["valid"]), "--test",
                 str(paths["test"]), "--out", str(out), "--epochs", "1", *FAST]) == 0
    return out


def test_csv_and_plot_hold_the_json_rows(run_dir, tmp_path, capsys):
    """evaluate printed a table or JSON only: a CSV for a spreadsheet and a plot meant re-typing the numbers."""
    base = ["-q", "evaluate", "--run", str(run_dir), "--baselines", "popularity", "--ks", "5,10"]
    assert main([*base, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    csv, png = tmp_path / "eval.csv", tmp_path / "ndcg.png"
    assert main([*base, "--csv", str(csv), "--plot", str(png), "--plot-metric", "NDCG"]) == 0
    captured = capsys.readouterr()
    assert "two-tower" in captured.out  # the table is still printed
    frame = pd.read_csv(csv)
    assert list(frame["model"]) == [r["model"] for r in rows] == ["two-tower", "popularity"]
    for r, (_, got) in zip(rows, frame.iterrows()):
        for key in ("NDCG@5", "Recall@10", "MeanPop@10"):
            assert got[key] == pytest.approx(r[key])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    assert f"wrote NDCG@k of 2 models to {png}" in captured.err


def test_csv_to_stdout_is_the_csv_alone(run_dir, capsys):
    assert main(["-q", "evaluate", "--run", str(run_dir), "--baselines", "", "--ks", "5", "--csv", "-"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("model,") and out.splitlines()[1].startswith("two-tower,")
    assert len(out.splitlines()) == 2


def test_a_bad_output_path_is_refused_before_evaluating(run_dir, tmp_path, capsys):
    assert main(["-q", "evaluate", "--run", str(run_dir), "--plot", "-"]) == 2
    assert "--plot: a PNG needs a file name" in capsys.readouterr().err
    assert main(["-q", "evaluate", "--run", str(run_dir), "--csv", str(tmp_path)]) == 2
    assert "--csv" in capsys.readouterr().err


def test_train_table_says_which_ks_it_leaves_to_metrics_json(tmp_path):
    """train's closing table (eval.txt) showed k=10 and 20 only: with eval.ks=[10, 50] the k=50 rows vanished from
    it without a word, though metrics.json held them."""
    paths = write_dataset(tmp_path / "data", n_users=30, n_items=24, per_user=10)
    out = tmp_path / "run"
    fast = [a for a in FAST if a != "--no-eval"]
    assert main(["-q", "train", "--train", str(paths["train"]), "--valid", str(paths["valid"]), "--test",
                 str(paths["test"]), "--out", str(out), "--epochs", "1", "eval.ks=10,15", "eval.baselines=", *fast]) == 0
    text = (out / "eval.txt").read_text()
    assert "two-tower  10" in text and "two-tower  15" not in text
    assert f"k=15 (eval.ks) are in {out / 'metrics.json'}; `twotower evaluate --run {out}` prints every k" in text
    assert "Recall@15" in json.loads((out / "metrics.json").read_text())["test"][0]
