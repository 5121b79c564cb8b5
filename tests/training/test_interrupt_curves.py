"""A fit stopped by Ctrl-C (or SIGTERM) draws curves.png of the epochs it finished, as a diverged fit does."""
from __future__ import annotations

from tests.synthetic import write_dataset
from tests.training.test_resume_best_weights import _train


def test_an_interrupted_fit_draws_the_curves_of_its_finished_epochs(tmp_path, monkeypatch):
    from twotower.training.trainer import Trainer

    data = write_dataset(tmp_path / "data", n_users=24, per_user=8)
    real_epoch = Trainer._run_epoch

    def ctrl_c_in_epoch_3(self, epoch):
        if epoch == 3:
            raise KeyboardInterrupt
        return real_epoch(self, epoch)

    monkeypatch.setattr(Trainer, "_run_epoch", ctrl_c_in_epoch_3)
    out = tmp_path / "run"
    assert _train(data, out, 5) == 130
    assert (out / "curves.png").stat().st_size > 1000  # epochs 1-2, drawn; before, no curves.png at all
