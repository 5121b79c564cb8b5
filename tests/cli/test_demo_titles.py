"""`twotower demo` prints items by title: a title two items share is printed apart, as explanations name it.

MovieLens-100K has 18 titles held by two ids each ("Chasing Amy (1997)" is 246 and 268); "recently watched:
Chasing Amy (1997); Chasing Amy (1997)" and a similar-items line listing one title twice did not say which.
The step 4/4 lines are checked on a tiny trained run standing in for the default one (no download).
"""
from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd

from twotower.cli.main import main

sys.path.insert(0, str(Path(__file__).parents[1] / "explain"))
from explain_tiny_run import train_tiny_run, write_tiny_data  # noqa: E402


def _stand_ins(monkeypatch, tmp_path) -> tuple[list, list]:
    """The demo's data, training and evaluation replaced by a tiny run; the plot calls recorded; the twin items."""
    import twotower.cli.evaluate_cmd as evaluate_cmd
    import twotower.cli.train_cmd as train_cmd
    import twotower.data.movielens as movielens
    import twotower.evaluation.plots as plots
    import importlib

    from twotower.pipeline.artifacts import TrainedRun

    # the modules, not the functions of one name that twotower.pipeline exports
    evaluate_run = importlib.import_module("twotower.pipeline.evaluate_run")
    run_mod = importlib.import_module("twotower.pipeline.run")

    data = tmp_path / "run_data"
    write_tiny_data(data)
    train = pd.read_csv(data / "train.csv")
    last_two = train[train.user_id == "u1"].sort_values("timestamp").item_id.tolist()[-2:]
    items = pd.read_csv(data / "items.csv")
    items.loc[items.item_id.isin(last_two), "title"] = "Twin (1990)"
    items.to_csv(data / "items.csv", index=False)
    run = TrainedRun.load(train_tiny_run(tmp_path / "run", epochs=1, write_data=False))

    frame = pd.DataFrame({"user_id": ["u1"], "item_id": ["i0"], "timestamp": [1]})
    monkeypatch.setattr(movielens, "fetch_movielens_100k", lambda *a, **k: tmp_path)
    monkeypatch.setattr(movielens, "load_movielens_100k", lambda *a, **k: SimpleNamespace(interactions=frame))
    result = SimpleNamespace(best_metric=0.1, best_epoch=1, seconds=1.0)
    monkeypatch.setattr(run_mod, "train_run", lambda cfg, out: (run, result, None))
    monkeypatch.setattr(evaluate_run, "evaluate_run", lambda *a, **k: [])
    # where cmd_demo looks them up (it imports them from these modules when it runs)
    monkeypatch.setattr(evaluate_cmd, "print_eval_table", lambda *a, **k: None)
    monkeypatch.setattr(train_cmd, "item_item_summary", lambda *a, **k: None)
    plotted = []
    monkeypatch.setattr(plots, "plot_recall_at_k", lambda *a, **k: plotted.append(k))
    monkeypatch.chdir(tmp_path)
    return plotted, last_two


def test_demo_prints_a_shared_title_apart(monkeypatch, tmp_path, capsys) -> None:
    plotted, last_two = _stand_ins(monkeypatch, tmp_path)
    assert main(["demo", "--user", "u1", "--epochs", "1", "--threads", "1", "--out", str(tmp_path / "demo")]) == 0
    watched = next(line for line in capsys.readouterr().out.splitlines() if "recently watched:" in line)
    a, b = last_two
    assert watched.endswith(f"Twin (1990) [item {a}]; Twin (1990) [item {b}]"), watched
    # recall_at_k.png names its split and run, as `evaluate --plot` does (it was titled "Recall@k" alone)
    assert plotted == [{"title": f"Recall@k, MovieLens-100K test (full catalogue), run {tmp_path / 'demo'}"}]


def test_demo_without_matplotlib_skips_its_plot_with_a_note(monkeypatch, tmp_path, capsys) -> None:
    """matplotlib missing (a --no-deps or partial install): the demo trained, printed its table, then ended in a
    ModuleNotFoundError traceback from recall_at_k.png, the recommendations unprinted."""
    plotted, _ = _stand_ins(monkeypatch, tmp_path)
    monkeypatch.setitem(sys.modules, "matplotlib.backends.backend_agg", None)  # `import` of it raises ImportError
    assert main(["demo", "--user", "u1", "--epochs", "1", "--threads", "1", "--out", str(tmp_path / "demo")]) == 0
    out = capsys.readouterr().out
    assert f"   no {tmp_path / 'demo' / 'recall_at_k.png'}: matplotlib does not import (" in out
    assert "recently watched:" in out and not plotted
