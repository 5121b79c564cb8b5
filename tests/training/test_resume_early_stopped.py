"""``--resume`` of a run early stopping ended: nothing more is trained, the run folder stays as it was, and the log
says how to go on (it said "stopping after epoch 2 of 6" and no more); a larger train.patience trains on."""
from __future__ import annotations

import json
import logging
from pathlib import Path

from tests.synthetic import write_dataset
from tests.training.test_resume_best_weights import FAST
from twotower.cli.main import main
from twotower.training.trainer import Trainer

# validation is scripted: epoch 1 best, then worse, so train.patience=1 stops the fit before epoch 3
SCRIPT = [0.5, 0.4, 0.45, 0.3, 0.3, 0.3]


def _train(data: dict[str, Path], out: Path, *extra: str) -> int:
    args = ["-q", "train", "--train", str(data["train"]), "--valid", str(data["valid"]), "--out", str(out),
            "--epochs", "6", *[a for a in FAST if not a.startswith("train.patience")], "model.item_item.enabled=false",
            *extra]
    return main(args)


def _files(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in [out / "log.jsonl", out / "model.safetensors", *(out / "checkpoint").iterdir()]}


def test_resuming_an_early_stopped_run_trains_nothing_and_says_how_to_go_on(tmp_path, monkeypatch, caplog):
    data = write_dataset(tmp_path / "data", n_users=24, per_user=8)
    values = iter(SCRIPT)
    monkeypatch.setattr(Trainer, "validate", lambda self, scorer=None: {"NDCG@10": next(values)})
    out = tmp_path / "run"
    assert _train(data, out, "train.patience=1") == 0
    assert [json.loads(line)["epoch"] for line in (out / "log.jsonl").read_text().splitlines()] == [1, 2]
    before = _files(out)
    caplog.set_level(logging.INFO, logger="twotower")
    assert _train(data, out, "--resume") == 0
    assert _files(out) == before  # no epoch trained, nothing rewritten
    assert ("stopping after epoch 2 of 6: early stopping: valid NDCG@10 not improved for 1 evaluations since epoch 1 "
            "(train.patience=1); nothing is trained (raise train.patience to continue)") in caplog.text
    caplog.clear()
    assert _train(data, out, "--resume", "train.patience=3") == 0  # the advice followed: it trains on
    epochs = [json.loads(line)["epoch"] for line in (out / "log.jsonl").read_text().splitlines()]
    assert epochs == [1, 2, 3, 4]  # 0.45 and 0.3 below epoch 1's 0.5: three evaluations without a better one
    assert "nothing is trained" not in caplog.text
