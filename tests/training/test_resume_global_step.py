"""A resumed fit counts its steps on from the checkpoint's, as the run would have without the stop: the loop's
``global_step`` restarted at 0 after ``--resume`` (a run interrupted after epoch 1 of 2 ended at 6 steps, not 12)."""
from __future__ import annotations

import pytest

import twotower.training.hooks as hooks
from twotower.config import EvalConfig, LossConfig, TrainConfig
from twotower.training.trainer import Trainer

from tests.training.tiny_trainer import tiny_mean_model


def _trainer(out, epochs: int) -> Trainer:
    _, _, seqs, model = tiny_mean_model()
    cfg = TrainConfig(epochs=epochs, batch_size=8, progress=False, lr_schedule="cosine", patience=100, threads=1)
    return Trainer(model, seqs, loss=LossConfig(), train=cfg, eval=EvalConfig(baselines=()), out_dir=out)


@pytest.mark.parametrize("older_checkpoint", [False, True])
def test_a_run_resumed_after_epoch_1_counts_steps_lrs_and_losses_as_the_straight_run(tmp_path, monkeypatch,
                                                                                    older_checkpoint):
    straight = _trainer(tmp_path / "straight", 2)
    ref = straight.fit(curves=False)
    if older_checkpoint:  # a checkpoint written before the count was kept: the optimizer's own step count
        real = hooks.save_checkpoint

        def without_count(directory, model, optimizers, state, rng, extra=None):
            return real(directory, model, optimizers, {k: v for k, v in state.items() if k != "global_step"}, rng, extra)

        monkeypatch.setattr(hooks, "save_checkpoint", without_count)
    _trainer(tmp_path / "run", 1).fit(curves=False)
    resumed = _trainer(tmp_path / "run", 2)
    got = resumed.fit(resume=True, curves=False)
    assert straight.loop.global_step == 12  # 48 examples in batches of 8, two epochs
    assert resumed.loop.global_step == straight.loop.global_step
    assert [(r["epoch"], r["lr"], r["loss"]) for r in got.history] == [(r["epoch"], r["lr"], r["loss"]) for r in ref.history]
