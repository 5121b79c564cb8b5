"""`twotower train`'s curves.png is drawn once the item-item term is fitted, and its title gives the term's figure.

It was drawn at the end of the fit, before the term: "best valid NDCG@10 0.1300 (saved)" of a run whose saved model
validated at 0.1360 with the term, as the summary line under it said.
"""
from __future__ import annotations

import json

import pytest

from tests.synthetic import write_dataset
from twotower.cli.main import main


def test_the_curves_title_agrees_with_the_item_item_summary(tmp_path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    import twotower.training.plots as plots

    titles: list[str] = []
    real_title = plots.curves_title
    monkeypatch.setattr(plots, "curves_title", lambda *a: titles.append(real_title(*a)) or titles[-1])
    paths = write_dataset(tmp_path / "src", n_users=40, per_user=10)
    out = tmp_path / "run"
    assert main(["-q", "train", "--train", str(paths["train"]), "--valid", str(paths["valid"]), "--out", str(out),
                 "--epochs", "2", "--no-progress", "--no-eval", "train.threads=1", "model.user.hidden=[16]",
                 "model.item.hidden=[16]", "eval.baselines=[]", "model.item_item.enabled=true",
                 "model.item_item.rank=8"]) == 0
    term = json.loads((out / "run.json").read_text())["item_item"]
    assert len(titles) == 1, titles  # once, after the term: not once by the fit and again by the pipeline
    if term["weight"]:
        assert f"with the item-item term (weight {term['weight']:g}) {term['valid_metric']:.4f}" in titles[0]
        assert f"chosen on valid NDCG@10 ({term['valid_metric']:.4f}" in capsys.readouterr().out
    else:
        assert "(saved; the item-item term did not help)" in titles[0]
    assert (out / "curves.png").is_file()
