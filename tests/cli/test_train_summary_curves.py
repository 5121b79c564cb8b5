"""`twotower train`'s last line names the curves.png it drew: no line of its output said the plot existed."""
from __future__ import annotations

from pathlib import Path

from twotower.cli.train_cmd import train_summary
from twotower.training.result import TrainResult


def _result() -> TrainResult:
    rows = [{"epoch": e, "loss": 5.0, "valid_NDCG@10": m} for e, m in ((1, 0.16), (2, 0.18))]
    return TrainResult(best_epoch=2, best_metric=0.18, epochs_run=2, history=rows, seconds=1.0)


def test_the_summary_names_the_curves_it_drew(tmp_path: Path) -> None:
    (tmp_path / "curves.png").write_bytes(b"\x89PNG")
    line = train_summary(_result(), "NDCG@10", tmp_path)
    assert line.endswith(f"; run folder {tmp_path} (training curves: {tmp_path / 'curves.png'})")


def test_no_curves_named_when_none_were_drawn(tmp_path: Path) -> None:
    assert train_summary(_result(), "NDCG@10", tmp_path).endswith(f"; run folder {tmp_path}")
