"""An approximate index's measured recall is said not to cover a k above the one it was measured at, nor a filter
applied within its search: an IVF index tuned to recall@10 0.9792 recalled 0.8746 at `recommend --users`' k=100 and
0.8438 under --filter genres=Horror, while stderr said only "ranking with index ..." and the CSV's record held no
recall at all."""
from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

import twotower as tt
from tests.serving.tiny_run import build_tiny_run
from twotower.cli.main import main


@pytest.fixture(scope="module")
def run_and_index(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("recall_notes")
    run = build_tiny_run(folder)
    policy = tt.IndexPolicy(k=5, tune_queries=40, target_recall=0.5)
    tt.build_index(run, "IVF4,Flat", out=folder / "ivf", policy=policy)
    return run, folder / "ivf"


def _recommend(run: Path, index: Path, out: Path, *extra: str) -> int:
    return main(["recommend", "--run", str(run), "--users", "all", "--index", str(index), "--out", str(out), *extra])


def test_a_k_above_the_measured_one_is_warned_and_the_record_holds_the_recall(run_and_index, tmp_path, capsys):
    run, index = run_and_index
    assert _recommend(run, index, tmp_path / "at5.csv", "--k", "5") == 0
    assert "warning" not in capsys.readouterr().err  # the k it was measured at: nothing to say
    assert _recommend(run, index, tmp_path / "at20.csv", "--k", "20") == 0
    err = capsys.readouterr().err
    assert err.count("at k=20 its recall was not measured") == 1, err
    assert f"the index in {index} measured recall@5 " in err and "--exact ranks exactly" in err
    rec = json.loads((tmp_path / "at20.csv.json").read_text())
    assert rec["k"] == 20 and rec["index"]["recall"]["k"] == 5 and 0 < rec["index"]["recall"]["recall"] <= 1


def test_a_filter_through_an_ivf_index_is_said_unmeasured(run_and_index, tmp_path, capsys, caplog):
    run, index = run_and_index
    assert _recommend(run, index, tmp_path / "horror.csv", "--k", "5", "--filter", "genres=Horror") == 0
    err = capsys.readouterr().err
    assert "--filter: the index in" in err and "these lists' recall was not measured" in err, err
    assert main(["recommend", "--run", str(run), "--users", "all", "--exact", "--out", str(tmp_path / "exact.csv"),
                 "--k", "20", "--filter", "genres=Horror"]) == 0
    assert "warning" not in capsys.readouterr().err  # exact search: nothing unmeasured
    with caplog.at_level(logging.WARNING):  # tt.recommend logs the same, in its own argument names
        tt.recommend(tt.TrainedRun.load(run), ["u1"], k=5, index=index, filters={"genres": ["Horror"]})
    assert any(r.getMessage().startswith("filters: the index in") for r in caplog.records)
