"""curves.png of a new run trained into a folder holding an earlier one names the run folder, not its staging folder.

Such a run trains in ``runs/.ml.staging-PID-sSTART`` and is swapped in as ``runs/ml`` once finished; the title was
drawn from the folder the PNG was written in: ``runs/.ml.staging-21241-s1950876: best valid NDCG@10 0.1910 ...``.
"""
from __future__ import annotations

import pytest

from tests.synthetic import write_dataset
from twotower.cli.main import main
from twotower.utils.run_folder import run_shown


def test_run_shown_names_the_folder_a_staging_folder_is_for(tmp_path) -> None:
    assert run_shown(tmp_path / "runs" / ".ml.staging-21241-s1950876") == tmp_path / "runs" / "ml"
    assert run_shown(tmp_path / "runs" / ".ml.staging-21241") == tmp_path / "runs" / "ml"
    assert run_shown(tmp_path / "runs" / "ml") == tmp_path / "runs" / "ml"


def test_a_second_run_into_the_same_folder_titles_its_curves_with_that_folder(tmp_path, monkeypatch:
                                                                             pytest.MonkeyPatch) -> None:
    import twotower.training.plots as plots

    titles: list[str] = []
    real_title = plots.curves_title
    monkeypatch.setattr(plots, "curves_title", lambda *a: titles.append(real_title(*a)) or titles[-1])
    paths = write_dataset(tmp_path / "src", n_users=24, per_user=8)
    out = tmp_path / "run"
    argv = ["-q", "train", "--train", str(paths["train"]), "--valid", str(paths["valid"]), "--out", str(out),
            "--epochs", "1", "--no-progress", "--no-eval", "train.threads=1", "model.user.hidden=[16]",
            "model.item.hidden=[16]", "eval.baselines=[]", "model.item_item.enabled=false"]
    assert main(argv) == 0
    assert main(argv) == 0  # the earlier run is there: this one trains beside it and replaces it
    assert len(titles) == 2, titles
    assert all(t.startswith(f"{out}: best valid NDCG@10 ") for t in titles), titles
    assert (out / "curves.png").is_file()
