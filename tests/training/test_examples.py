from __future__ import annotations

import numpy as np
import pytest

from twotower.models import UserSequences
from twotower.training.examples import build_examples, make_histories


def _seqs() -> UserSequences:
    return UserSequences.from_arrays(np.array([0] * 5), np.arange(5), np.arange(5), 1)


def test_causal_examples_never_see_the_target_or_the_future():
    seqs = _seqs()
    ex = build_examples(seqs, "causal")
    hist = make_histories(seqs, ex.users, ex.positions, ex.denoise, L=3, pad=99, rng=np.random.default_rng(0), keep=1.0)
    targets = seqs.items[ex.positions]
    for row, t in zip(hist, targets):
        real = row[row != 99]
        assert t not in real
        assert (real < t).all()  # items are in time order here, so only earlier ones
    assert hist.tolist()[-1] == [1, 2, 3]  # target 4 sees the last 3 items before it


def test_denoising_examples_exclude_the_target_and_can_see_later_items():
    seqs = _seqs()
    ex = build_examples(seqs, "denoising")
    hist = make_histories(seqs, ex.users, ex.positions, ex.denoise, L=4, pad=99, rng=np.random.default_rng(0), keep=1.0)
    assert hist[0].tolist() == [1, 2, 3, 4]  # target 0 predicted from the rest
    for row, t in zip(hist, seqs.items[ex.positions]):
        assert t not in row


def test_both_mode_doubles_the_examples():
    ex = build_examples(_seqs(), "both")
    assert len(ex) == 10 and ex.denoise.sum() == 5


def _long_seqs() -> UserSequences:
    n = 400  # two users, 200 items each, item ids = positions
    users = np.repeat([0, 1], n // 2)
    return UserSequences.from_arrays(users, np.arange(n), np.arange(n), 2)


def test_history_dropout_pads_causal_items_in_place():
    seqs = _long_seqs()
    ex = build_examples(seqs, "causal")
    args = (seqs, ex.users, ex.positions, ex.denoise)
    full = make_histories(*args, L=50, pad=-1, rng=np.random.default_rng(0), keep=1.0)
    rng = np.random.default_rng(0)
    dropped = make_histories(*args, L=50, pad=-1, rng=rng, keep=1.0, drop=0.3)
    real = full != -1
    gone = real & (dropped == -1)
    # about 30% of the real items are gone; every survivor is the item that stood in its column (its age kept)
    assert 0.27 < gone.sum() / real.sum() < 0.33
    kept = dropped != -1
    assert (dropped[kept] == full[kept]).all()
    assert not (dropped != -1)[~real].any()  # padding stays padding
    # drop=0 is the old input, and draws nothing from the stream (a run without it is unchanged)
    rng0 = np.random.default_rng(1)
    same = make_histories(*args, L=50, pad=-1, rng=rng0, keep=1.0, drop=0.0)
    assert (same == full).all()
    assert rng0.random() == np.random.default_rng(1).random()


def test_history_dropout_leaves_denoising_rows_to_denoise_keep():
    seqs = _long_seqs()
    ex = build_examples(seqs, "both")
    args = (seqs, ex.users, ex.positions, ex.denoise)
    hist = make_histories(*args, L=50, pad=-1, rng=np.random.default_rng(0), keep=1.0, drop=0.5)
    denoise_rows = hist[ex.denoise]
    # keep=1.0: a denoising row holds the user's newest 50 other items, none padded by the dropout
    assert (denoise_rows != -1).all()
    causal_rows = hist[~ex.denoise][60:]  # rows with 50+ items before the target
    assert 0.4 < (causal_rows == -1).mean() < 0.6


def test_history_dropout_setting_is_checked():
    from twotower.config import TrainConfig
    from twotower.errors import ConfigError

    for bad in (-0.1, 1.0):
        with pytest.raises(ConfigError, match=r"train\.history_dropout: must be in \[0, 1\)"):
            TrainConfig(history_dropout=bad)


def test_a_history_dropout_that_drops_nothing_is_said_at_start_up(caplog):
    # the default 0.2 is recorded in every run's config.json, but windows of train.examples=sequence are read
    # whole and a tower without history has none: the start-up log said nothing of it
    from twotower.config import EvalConfig, LossConfig, TrainConfig, load_config
    from twotower.models.two_tower import TwoTowerModel
    from twotower.training.examples import unused_history_dropout
    from twotower.training.trainer import Trainer

    assert unused_history_dropout(TrainConfig(), reads_history=True) is None  # causal examples: applied
    assert unused_history_dropout(TrainConfig(examples="sequence", history_dropout=0.0), True) is None
    assert "reads no history" in unused_history_dropout(TrainConfig(), reads_history=False)
    # denoising rows are never dropped (make_histories masks them out), and the log said nothing of it
    said = unused_history_dropout(TrainConfig(examples="denoising"), reads_history=True)
    assert said.startswith("train.history_dropout=0.2 is not applied: train.examples=denoising")
    assert "denoising examples' input histories" not in said
    assert unused_history_dropout(TrainConfig(examples="both"), reads_history=True) is None  # its causal half
    seqs = _long_seqs()
    cfg = load_config(overrides=["model.user.history=gru", "model.user.use_id=false", "model.user.history_len=8"])
    model = TwoTowerModel(cfg.model, seqs.n_users, 400)
    with caplog.at_level("INFO", logger="twotower.training.trainer"):
        Trainer(model, seqs, loss=LossConfig(), train=TrainConfig(examples="sequence", progress=False),
                eval=EvalConfig(baselines=()))
    assert ("train.history_dropout=0.2 is not applied: train.examples=sequence reads each window whole" in caplog.text)
    assert all(r.levelname == "INFO" for r in caplog.records if "is not applied" in r.getMessage())  # the default
    caplog.clear()
    with caplog.at_level("INFO", logger="twotower.training.trainer"):  # a value set: a warning, which -q keeps
        Trainer(model, seqs, loss=LossConfig(), eval=EvalConfig(baselines=()),
                train=TrainConfig(examples="sequence", history_dropout=0.5, progress=False))
    assert [r.levelname for r in caplog.records if "is not applied" in r.getMessage()] == ["WARNING"]


def test_examples_per_epoch_counts_what_the_trainer_builds() -> None:
    # the memory estimate counts an epoch before building it (pipeline.experiment); it must be the trainer's count
    import numpy as np

    from twotower.models.history import UserSequences
    from twotower.training.examples import build_examples, examples_per_epoch
    from twotower.training.sequence import SequenceExamples

    # users 0..3 with 3, 1, 0 and 2 items
    seqs = UserSequences(np.array([0, 3, 4, 4, 6]), np.array([1, 2, 3, 4, 5, 6]), np.arange(6))
    lengths = seqs.lengths()
    for mode in ("causal", "denoising", "both"):
        assert examples_per_epoch(lengths, mode) == len(build_examples(seqs, mode))
    assert examples_per_epoch(lengths, "sequence") == len(SequenceExamples(seqs, 4, 7)) == 2
    assert examples_per_epoch(lengths, "both", cap=5) == 5 and examples_per_epoch(lengths, "causal", None) == 6
