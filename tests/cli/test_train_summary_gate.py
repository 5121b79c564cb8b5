"""`twotower train`'s last line names a dual-head item tower's gate alpha at the kept epoch."""
from __future__ import annotations

from pathlib import Path

from twotower.cli.train_cmd import train_summary
from twotower.training.result import TrainResult


def _result(with_alpha: bool) -> TrainResult:
    rows = [{"epoch": e, "loss": 5.0, "valid_NDCG@10": m} for e, m in ((1, 0.16), (2, 0.18), (3, 0.17))]
    if with_alpha:
        for row, a in zip(rows, (0.486, 0.4874, 0.49)):
            row["alpha"] = a
    return TrainResult(best_epoch=2, best_metric=0.18, epochs_run=3, history=rows, seconds=1.0)


def test_the_summary_names_the_kept_epochs_gate() -> None:
    line = train_summary(_result(True), "NDCG@10", Path("runs/x"))
    assert line == ("trained: best valid NDCG@10 0.1800 at epoch 2 (3 epochs, 1.0s), gate alpha 0.487 "
                    "(semantic head's weight); run folder runs/x")


def test_a_tower_without_a_gate_gets_no_gate_clause() -> None:
    line = train_summary(_result(False), "NDCG@10", Path("runs/x"))
    assert line == "trained: best valid NDCG@10 0.1800 at epoch 2 (3 epochs, 1.0s); run folder runs/x"


def test_a_resume_whose_best_epoch_came_before_it_still_names_the_gate(tmp_path, monkeypatch) -> None:
    # the summary reads the best epoch's row from result.history: after --resume that holds the checkpoint's
    # epochs too (resume_state restores them), so a best epoch from before the resume keeps its alpha
    import numpy as np

    import twotower.pipeline.run as run_mod
    from tests.synthetic import make_interactions, make_items
    from twotower.config import load_config

    fast = ["train.epochs=2", "train.progress=false", "train.threads=1", "train.checkpoint=true", "eval.baselines=[]",
            "model.user.hidden=[16]", "model.item.hidden=[16]", "model.user.out_dim=8", "model.item.out_dim=8",
            "model.item.dual_head=true", "data.title_col=title", "model.item_item.enabled=false"]
    frames = {"path": make_interactions(n_users=20, n_items=15, per_user=8), "items": make_items(15)}
    monkeypatch.setattr(run_mod, "encode_item_texts", lambda config, prep, cache_dir=None: (
        np.random.default_rng(0).normal(size=(prep.n_items, 4)).astype(np.float32), "st@w"))
    run_mod.train_run(load_config(overrides=fast), tmp_path / "run", frames=frames)
    # train.epochs=2 again: the checkpoint's epoch 2 is the best and nothing is trained in this call
    _, result, _ = run_mod.train_run(load_config(overrides=fast), tmp_path / "run", resume=True, frames=frames)
    assert result.epochs_run == 2 and result.best_epoch <= 2
    assert "gate alpha " in train_summary(result, "NDCG@10", tmp_path / "run")
