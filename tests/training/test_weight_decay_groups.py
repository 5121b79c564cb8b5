"""``train.decay_1d``: weight decay on every parameter (the default), or on matrices and tables only."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.synthetic import write_dataset
from twotower.cli.main import main
from twotower.config import ConfigError, TrainConfig
from twotower.training.loop import decay_groups, make_optimizers

FAST = ["model.user.hidden=[16]", "model.item.hidden=[16]", "model.user.out_dim=16",
        "model.item.out_dim=16", "model.item.id_dim=16", "model.user.history_dim=16", "model.user.history_len=8",
        "model.user.history=transformer", "model.user.seq_layers=1", "train.examples=sequence", "train.batch_size=8",
        "train.threads=1", "eval.baselines=[]", "data.rating_col=null", "--no-progress", "--no-eval"]


def _decayed_after_one_step(decay_1d: bool) -> tuple[bool, bool, bool]:
    """(matrix shrank, bias shrank, LayerNorm gain shrank) after one AdamW step with zero gradients."""
    lin, norm = torch.nn.Linear(4, 4), torch.nn.LayerNorm(4)
    params = [*lin.parameters(), *norm.parameters()]
    before = [p.detach().clone() for p in params]
    (opt,) = make_optimizers(decay_groups(params, decay_1d), lr=0.1, weight_decay=0.5)
    for p in params:
        p.grad = torch.zeros_like(p)  # only the decay moves a weight
    opt.step()
    moved = [not torch.equal(p.detach(), b) for p, b in zip(params, before)]
    return moved[0], moved[1], moved[2]


def test_decay_1d_false_leaves_biases_and_norm_gains_undecayed():
    assert _decayed_after_one_step(True) == (True, True, True)  # the default: every parameter decays
    assert _decayed_after_one_step(False) == (True, False, False)


def test_a_run_records_it_and_resume_with_the_other_setting_names_it(tmp_path: Path, capsys):
    data = write_dataset(tmp_path / "data", n_users=24, per_user=8)
    out = tmp_path / "run"
    assert main(["-q", "train", "--train", str(data["train"]), "--out", str(out), "--epochs", "1", *FAST,
                 "train.decay_1d=false", "train.weight_decay=0.1"]) == 0
    from twotower.pipeline.artifacts import TrainedRun

    run = TrainedRun.load(out)
    assert run.config.train.decay_1d is False
    # resuming a run with the other setting is refused by name, not with torch's bare group-count error
    assert main(["-q", "train", "--train", str(data["train"]), "--out", str(out), "--epochs", "2", *FAST,
                 "train.decay_1d=true", "train.weight_decay=0.1", "--resume"]) != 0
    assert "train.decay_1d differs from the run's" in capsys.readouterr().err


def test_decay_1d_must_be_a_bool():
    with pytest.raises(ConfigError, match="train.decay_1d"):
        TrainConfig(decay_1d="no")  # type: ignore[arg-type]
