"""A training whose loss or weights stop being finite stops at once, naming the learning rate.

Fuzzing `train.lr=1e30`: the weights turned NaN and the run failed only at validation with "scores contain
NaN; the scorer must return finite scores", which names no setting, after training on NaN weights."""
from __future__ import annotations

import pytest
import torch

from twotower.config import EvalConfig, LossConfig, TrainConfig
from twotower.errors import TrainingDiverged
from twotower.training.loop import TrainLoop
from twotower.training.trainer import Trainer

from tests.training.tiny_trainer import tiny_mean_model


def test_a_step_whose_loss_is_nan_is_refused_before_its_update() -> None:
    w = torch.nn.Parameter(torch.ones(3))
    loop = TrainLoop([w], lr=0.1, total_steps=4, progress=False)
    with loop.epoch(1, n_batches=2, n_examples=2) as run:
        def closure() -> tuple[float, int]:
            (w * float("nan")).sum().backward()
            return float("nan"), 1

        with pytest.raises(TrainingDiverged, match=r"the loss of step 1 of epoch 1 is nan \(learning rate 0.1 at that step\); "
                                                    r"that step's update was not applied"):
            run.step(closure)
    assert torch.equal(w.detach(), torch.ones(3))  # the NaN gradient never reached the weights


@pytest.mark.parametrize("batch_size", [8, 512])  # several steps an epoch, and one (its update is the last)
def test_a_learning_rate_that_blows_the_weights_up_stops_the_run_naming_it(batch_size: int) -> None:
    _, _, seqs, model = tiny_mean_model()
    tr = Trainer(model, seqs, loss=LossConfig(), eval=EvalConfig(baselines=()),
                 train=TrainConfig(epochs=3, batch_size=batch_size, lr=1e30, progress=False, checkpoint=False))
    with pytest.raises(TrainingDiverged, match=r"training diverged.*learning rate 1e\+30.*Lower the learning rate"):
        tr.fit()


def test_a_run_that_diverges_draws_the_curves_of_the_epochs_before(tmp_path, monkeypatch) -> None:
    # the curves were drawn only when a fit ended, so a diverged run's out folder had log lines but no curves.png:
    # the rising loss before the NaN, the first thing to look at, was not drawn
    import twotower.training.trainer as trainer_module
    from twotower.training.diagnostics import check_finite_weights

    def diverge_in_epoch_3(model, epoch, lr, suspect=None):  # noqa: ANN001
        if epoch == 3:
            raise TrainingDiverged("training diverged in epoch 3 (made to order)")
        check_finite_weights(model, epoch, lr, suspect)

    monkeypatch.setattr(trainer_module, "check_finite_weights", diverge_in_epoch_3)
    _, _, seqs, model = tiny_mean_model()
    tr = Trainer(model, seqs, loss=LossConfig(), eval=EvalConfig(baselines=()), out_dir=tmp_path,
                 train=TrainConfig(epochs=5, batch_size=8, progress=False, checkpoint=False))
    with pytest.raises(TrainingDiverged, match="epoch 3"):
        tr.fit()
    assert (tmp_path / "curves.png").is_file() and [r["epoch"] for r in tr.history] == [1, 2]


def test_a_divergence_names_its_epoch_and_the_step_within_it_also_after_several_epochs() -> None:
    # train.lr=1e30 on resume, in epoch 2 of MovieLens-100K after 20 steps of epoch 1, said "the loss of step 2":
    # no epoch, and a count the resume had restarted
    w = torch.nn.Parameter(torch.ones(3))
    loop = TrainLoop([w], lr=0.1, progress=False)
    with loop.epoch(1, n_batches=3, n_examples=3) as run:
        for _ in range(3):
            run.step(lambda: ((w * 0.0).sum().backward(), (0.5, 1))[1])
    with loop.epoch(2, n_batches=3, n_examples=3) as run:
        run.step(lambda: ((w * 0.0).sum().backward(), (0.5, 1))[1])
        with pytest.raises(TrainingDiverged, match=r"the loss of step 2 of epoch 2 is nan"):
            run.step(lambda: ((w * 0.0).sum().backward(), (float("nan"), 1))[1])
