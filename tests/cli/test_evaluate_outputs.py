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
    assert main([*base[1:], "--csv", str(csv), "--plot", str(png), "--plot-metric", "NDCG"]) == 0  # -q: no "wrote"
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


def test_an_output_onto_an_input_file_is_refused(run_dir, tmp_path, capsys):
    # `evaluate --test held.csv --csv held.csv` (or recommend --exclude f --out f) read the file, then replaced it
    held = tmp_path / "held.csv"
    held.write_bytes((run_dir / "data" / "test.csv").read_bytes())
    before = held.read_bytes()
    assert main(["-q", "evaluate", "--run", str(run_dir), "--test", str(held), "--csv", str(held)]) == 2
    assert (f"--csv {held}: is the --test file {held}, which writing the output there would replace; choose another "
            "file name") in capsys.readouterr().err
    assert main(["-q", "recommend", "--run", str(run_dir), "--users", "all", "--exclude", str(held), "--out",
                 str(held)]) == 2
    assert f"--out {held}: is the --exclude file {held}" in capsys.readouterr().err
    assert held.read_bytes() == before


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
    assert f"k=15 (eval.ks) is in {out / 'metrics.json'}; `twotower evaluate --run {out}` prints every k" in text
    assert "Recall@15" in json.loads((out / "metrics.json").read_text())["test"][0]


def test_evaluate_metrics_json_python_and_recommend_lists_give_one_answer(tmp_path, capsys):
    """The figures of `twotower evaluate`, of the run's metrics.json and of tt.evaluate_run are one answer, and
    the lists `twotower recommend --exclude train valid` prints give those figures back (recounted here)."""
    import math
    from collections import defaultdict

    import twotower as tt

    # 3 test items a user (several relevant items: IDCG is not 1), catalogue of 60
    paths = write_dataset(tmp_path / "data", n_users=30, n_items=60, per_user=30)
    run = tmp_path / "run"
    assert main(["-q", "train", "--train", str(paths["train"]), "--valid", str(paths["valid"]), "--test",
                 str(paths["test"]), "--out", str(run), "--epochs", "1", "eval.ks=[5,10]",
                 "eval.baselines=popularity", *[a for a in FAST if a != "--no-eval"]]) == 0
    capsys.readouterr()
    assert main(["-q", "evaluate", "--run", str(run), "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    saved = json.loads((run / "metrics.json").read_text())["test"]
    api = tt.evaluate_run(tt.TrainedRun.load(run))
    keys = [k for k in saved[0] if "@" in k] + ["users_evaluated"]
    assert [r["model"] for r in cli] == [r["model"] for r in saved] == [r["model"] for r in api]
    for a, b, c in zip(saved, cli, api):
        assert [a[k] for k in keys] == [b[k] for k in keys] == [c[k] for k in keys], a["model"]

    recs = tmp_path / "recs.csv"
    assert main(["-q", "recommend", "--run", str(run), "--users", "all", "--k", "10", "--exclude",
                 str(run / "data" / "train.csv"), str(run / "data" / "valid.csv"), "--out", str(recs)]) == 0
    lists: dict[str, list[str]] = defaultdict(list)
    for row in pd.read_csv(recs, dtype={"user_id": str, "item_id": str}).sort_values(["user_id", "rank"]).itertuples():
        lists[row.user_id].append(row.item_id)
    test = pd.read_csv(run / "data" / "test.csv", dtype={"user_id": str, "item_id": str})
    relevant = test.groupby("user_id")["item_id"].apply(set).to_dict()
    for k in (5, 10):
        hr = recall = ndcg = mrr = 0.0
        for user, rel in relevant.items():
            hits = [item in rel for item in lists[user][:k]]
            hr += any(hits)
            recall += sum(hits) / len(rel)
            ndcg += (sum(1 / math.log2(j + 2) for j, h in enumerate(hits) if h)
                     / sum(1 / math.log2(j + 2) for j in range(min(len(rel), k))))
            mrr += next((1 / (j + 1) for j, h in enumerate(hits) if h), 0.0)
        n = len(relevant)
        tower = saved[0]
        assert tower["users_evaluated"] == n and min(len(r) for r in relevant.values()) > 1
        for name, value in (("HitRate", hr), ("Recall", recall), ("NDCG", ndcg), ("MRR", mrr)):
            assert tower[f"{name}@{k}"] == pytest.approx(value / n, abs=1e-12), f"{name}@{k}"


def test_csv_has_a_record_of_what_produced_it(run_dir, tmp_path):
    """evaluate --csv wrote the rows with no word of the run, split, cut-offs or baselines behind them, where
    recommend --out and similar --out write FILE.json beside their CSV."""
    import hashlib

    csv = tmp_path / "eval.csv"
    assert main(["-q", "evaluate", "--run", str(run_dir), "--baselines", "popularity", "--ks", "5,10",
                 "--csv", str(csv)]) == 0
    record = json.loads((tmp_path / "eval.csv.json").read_text())
    assert record["command"] == "twotower evaluate" and record["split"] == "test"
    assert record["output"]["sha256"] == hashlib.sha256(csv.read_bytes()).hexdigest()
    assert record["output"]["rows"] == 2
    assert record["run"]["path"] == str(run_dir.resolve()) and record["run"]["fingerprint"]
    assert record["ks"] == [5, 10] and record["baselines"] == ["popularity"]
    assert record["test"] is None and record["history_from"] is None


@pytest.mark.parametrize("plot_name", ["eval.csv", "eval.csv.json", "./sub/../eval.csv"])
def test_a_plot_onto_the_csv_or_its_record_is_refused(run_dir, tmp_path, capsys, plot_name):
    """`--csv e.csv --plot e.csv` (or `--plot e.csv.json`) wrote the CSV and its record, then the PNG over one of
    them: exit 0, a .csv holding a PNG or a record that no longer described the CSV."""
    csv = tmp_path / "eval.csv"
    (tmp_path / "sub").mkdir()
    plot = tmp_path / plot_name
    assert main(["-q", "evaluate", "--run", str(run_dir), "--baselines", "", "--ks", "5", "--csv", str(csv),
                 "--plot", str(plot)]) == 2
    other = "--csv's record" if plot_name.endswith(".json") else "--csv"
    assert f"--plot {plot}: is also the {other} file" in capsys.readouterr().err
    assert not csv.exists() and not (tmp_path / "eval.csv.json").exists()  # refused before any work


def test_plot_metric_without_plot_is_said_to_do_nothing(run_dir, capsys, caplog):
    """`--plot-metric NDCG` without --plot drew nothing and said nothing: the user waited for an NDCG plot."""
    assert main(["-q", "evaluate", "--run", str(run_dir), "--baselines", "", "--ks", "5", "--plot-metric",
                 "NDCG"]) == 0
    assert "--plot-metric NDCG has no effect without --plot FILE.png" in caplog.text
    caplog.clear()
    assert main(["-q", "evaluate", "--run", str(run_dir), "--baselines", "", "--ks", "5"]) == 0
    assert "--plot-metric" not in caplog.text  # the default, not given: nothing to say


def test_ease_limits_without_ease_are_said_to_do_nothing(run_dir, caplog):
    """`--baselines popularity --ease-max-items 50000` sized a baseline that was not fitted, without a word."""
    base = ["-q", "evaluate", "--run", str(run_dir), "--ks", "5"]
    assert main([*base, "--baselines", "popularity", "--ease-max-items", "7", "--ease-low-rank-max-items", "9"]) == 0
    assert "--ease-max-items 7 has no effect: ease is not among the baselines (popularity)" in caplog.text
    assert "--ease-low-rank-max-items 9 has no effect: ease is not among the baselines (popularity)" in caplog.text
    caplog.clear()
    assert main([*base, "--baselines", "ease", "--ease-max-items", "7"]) == 0
    assert "has no effect" not in caplog.text


def test_json_with_csv_to_stdout_is_refused(run_dir, capsys):
    """`--json --csv -` printed the CSV alone and dropped --json without a word (recommend refuses --json --out)."""
    assert main(["-q", "evaluate", "--run", str(run_dir), "--baselines", "", "--ks", "5", "--json", "--csv", "-"]) == 2
    captured = capsys.readouterr()
    assert "--json prints the rows as JSON and --csv - prints them as CSV" in captured.err
    assert captured.out == ""


def test_plot_without_matplotlib_is_refused_before_evaluating(run_dir, tmp_path, capsys, monkeypatch):
    """matplotlib missing (a --no-deps or partial install): the whole evaluation ran (minutes on ML-1M with its
    baselines), then ended in a ModuleNotFoundError traceback from the plot, table and CSV unprinted."""
    import importlib
    import sys

    er = importlib.import_module("twotower.pipeline.evaluate_run")
    evaluated = []
    monkeypatch.setattr(er, "evaluate_run", lambda *a, **k: evaluated.append(1) or [])
    monkeypatch.setitem(sys.modules, "matplotlib.backends.backend_agg", None)  # `import` of it raises ImportError
    png = tmp_path / "recall.png"
    assert main(["-q", "evaluate", "--run", str(run_dir), "--plot", str(png)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --plot {png}: matplotlib does not import (") and "pip install" in err, err
    assert err.count("\n") == 1 and not evaluated and not png.exists()


def test_plot_has_a_record_of_what_produced_it(run_dir, tmp_path):
    """evaluate --plot wrote the PNG with no record beside it, where --csv writes eval.csv.json: p.png.json now holds
    the same keys, of the PNG, with the metric drawn."""
    import hashlib

    csv, png = tmp_path / "eval.csv", tmp_path / "p.png"
    assert main(["-q", "evaluate", "--run", str(run_dir), "--baselines", "popularity", "--ks", "5,10",
                 "--csv", str(csv), "--plot", str(png), "--plot-metric", "NDCG"]) == 0
    record = json.loads((tmp_path / "p.png.json").read_text())
    csv_record = json.loads((tmp_path / "eval.csv.json").read_text())
    assert set(record) == set(csv_record) | {"plot_metric"} and record["plot_metric"] == "NDCG"
    assert record["output"] == {"path": str(png.resolve()), "sha256": hashlib.sha256(png.read_bytes()).hexdigest(),
                                "rows": 2}
    for key in ("command", "run", "split", "ks", "baselines", "exclude_seen"):
        assert record[key] == csv_record[key], key


def test_csv_onto_the_plots_record_is_refused(run_dir, tmp_path, capsys):
    png = tmp_path / "p.png"
    assert main(["-q", "evaluate", "--run", str(run_dir), "--baselines", "", "--ks", "5", "--csv",
                 str(tmp_path / "p.png.json"), "--plot", str(png)]) == 2
    assert f"--plot's record {png}.json: is also the --csv file" in capsys.readouterr().err
    assert not png.exists()


def test_the_plot_is_written_in_the_format_its_name_ends_with(run_dir, tmp_path, capsys):
    """`--plot eval.pdf` (or .txt) wrote PNG bytes whatever the name: a PDF viewer would not open it."""
    for name, magic in (("e.pdf", b"%PDF"), ("e.svg", b"<?xml"), ("e.PNG", b"\x89PNG")):
        assert main(["-q", "evaluate", "--run", str(run_dir), "--baselines", "", "--ks", "5",
                     "--plot", str(tmp_path / name)]) == 0
        assert (tmp_path / name).read_bytes().startswith(magic), name
    assert main(["-q", "evaluate", "--run", str(run_dir), "--baselines", "", "--plot", str(tmp_path / "e.txt")]) == 2
    err = capsys.readouterr().err
    assert "--plot " in err and "the file's ending names the image format: one of .png, .svg, .pdf" in err
    assert "got '.txt'" in err and not (tmp_path / "e.txt").exists()
