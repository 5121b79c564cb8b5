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
