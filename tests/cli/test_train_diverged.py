"""A `twotower train` that diverges names the setting its command takes, and what the run folder keeps.

Before: "Lower the learning rate (train.lr, or --lr) and train again" -- `twotower train` refuses --lr
("unrecognized arguments: --lr") -- and nothing said that the epochs checkpointed before the divergence could be
continued at a lower rate with --resume.
"""
from __future__ import annotations

import pytest
import torch

from tests.synthetic import write_dataset
from twotower.cli.main import main
from twotower.errors import TrainingDiverged
from twotower.training.loop import TrainLoop


def test_a_nan_loss_names_the_learning_rate_setting_of_its_command() -> None:
    for setting, shown in (({}, "(train.lr)"), ({"lr_setting": "--lr"}, "(--lr)")):
        w = torch.nn.Parameter(torch.ones(2))
        loop = TrainLoop([w], lr=0.1, progress=False, **setting)
        with loop.epoch(1, n_batches=1, n_examples=2) as run, pytest.raises(TrainingDiverged) as got:
            run.step(lambda: (float("nan"), 2))
        assert f"Lower the learning rate {shown} and train again" in str(got.value)


def test_train_diverging_after_checkpoints_says_how_to_resume_at_a_lower_rate(tmp_path, monkeypatch, capsys) -> None:
    import twotower.training.trainer as trainer_module
    from twotower.training.diagnostics import check_finite_weights

    def diverge_in_epoch_3(model, epoch, lr, suspect=None):  # noqa: ANN001
        if epoch == 3:
            raise TrainingDiverged("training diverged in epoch 3 (made to order). Lower the learning rate "
                                   "(train.lr) and train again")
        check_finite_weights(model, epoch, lr, suspect)

    monkeypatch.setattr(trainer_module, "check_finite_weights", diverge_in_epoch_3)
    import twotower.training.plots as plots

    titles = []
    real_title = plots.curves_title
    monkeypatch.setattr(plots, "curves_title", lambda *a: titles.append(real_title(*a)) or titles[-1])
    paths = write_dataset(tmp_path / "src", n_users=24, per_user=8)
    out = tmp_path / "run"
    argv = ["-q", "train", "--train", str(paths["train"]), "--valid", str(paths["valid"]), "--out", str(out),
            "--epochs", "5", "--no-progress", "--no-eval", "train.threads=1", "train.patience=100", "train.lr=0.004",
            "model.user.hidden=[16]", "model.item.hidden=[16]", "eval.baselines=[]"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: training diverged in epoch 3 (made to order). Lower the learning rate (train.lr) "
                          f"and train again; or continue from {out / 'checkpoint'}, which holds epoch 2 from before it")
    assert err.rstrip().endswith(f": `twotower train --out {out} --resume train.lr=0.0004`")
    assert err.count("\n") == 1
    assert (out / "curves.png").is_file()
    # its title says the fit diverged (it read as a finished 2-epoch run)
    assert len(titles) == 1 and titles[0].startswith(f"{out}: DIVERGED in epoch 3; best valid NDCG@10 "), titles
    assert titles[0].endswith(", 2 epochs run"), titles
    # the advice works: the resume continues after epoch 2 at the lower rate
    monkeypatch.setattr(trainer_module, "check_finite_weights", check_finite_weights)
    assert main(["-q", "train", "--out", str(out), "--resume", "train.lr=0.0004", "--epochs", "3", "--no-eval",
                 "--no-progress", "train.threads=1"]) == 0
    log = [line for line in (out / "log.jsonl").read_text().splitlines() if line]
    assert len(log) == 3 and '"lr": 0.0004' in log[2]


def test_a_nan_loss_from_a_tiny_temperature_names_loss_temperature() -> None:
    # loss.temperature=1e-40: 1/t is infinite in float32 and the first loss NaN at any learning rate, yet the error
    # sent the user to train.lr alone
    from twotower.config import EvalConfig, LossConfig, TrainConfig
    from twotower.training.trainer import Trainer

    from tests.training.tiny_trainer import tiny_mean_model

    _, _, seqs, model = tiny_mean_model()
    tr = Trainer(model, seqs, loss=LossConfig(temperature=1e-40), eval=EvalConfig(baselines=()),
                 train=TrainConfig(epochs=1, batch_size=8, progress=False, checkpoint=False))
    with pytest.raises(TrainingDiverged) as got:
        tr.fit()
    assert "Raise loss.temperature=1e-40 (it multiplies the scores by 1e+40; the default is 0.02), or lower the " \
           "learning rate (train.lr), and train again" in str(got.value)
    # a usual temperature leaves the learning rate alone in the advice
    w = torch.nn.Parameter(torch.ones(2))
    loop = TrainLoop([w], lr=0.1, progress=False)
    with loop.epoch(1, n_batches=1, n_examples=2) as run, pytest.raises(TrainingDiverged) as got:
        run.step(lambda: (float("nan"), 2))
    assert "temperature" not in str(got.value)
