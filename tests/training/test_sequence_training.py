"""train.examples=sequence: one window per user, a target at every position, with every loss."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from twotower.config import EvalConfig, LossConfig, ModelConfig, TowerConfig, TrainConfig
from twotower.errors import ConfigError, DataError
from twotower.models.history import UserSequences
from twotower.models.two_tower import TwoTowerModel
from twotower.training.sequence import SequenceExamples
from twotower.training.trainer import Trainer

N_USERS, N_ITEMS, L = 6, 20, 5


def _seqs() -> UserSequences:
    rng = np.random.default_rng(0)
    lengths = [2, 3, 5, 7, 9, 4]
    users = np.repeat(np.arange(N_USERS), lengths)
    items = rng.integers(0, N_ITEMS, size=users.size)
    return UserSequences.from_arrays(users, items, np.arange(users.size), N_USERS)


def _model() -> TwoTowerModel:
    torch.manual_seed(0)
    cfg = ModelConfig(user=TowerConfig(use_id=False, history="transformer", history_len=L, history_dim=8, out_dim=8,
                                       hidden=(16,), dropout=0.0, seq_dropout=0.0),
                      item=TowerConfig(id_dim=8, out_dim=8, hidden=(16,), dropout=0.0))
    return TwoTowerModel(cfg, N_USERS, N_ITEMS)


def test_windows_shift_targets_by_one_and_pad_alike() -> None:
    seqs = _seqs()
    ex = SequenceExamples(seqs, L, N_ITEMS)
    users, inputs, targets = ex.windows(np.arange(len(ex)), np.random.default_rng(0))
    for u, x, y in zip(users, inputs, targets):
        s = seqs.of(u)
        n = min(len(s) - 1, L)
        assert (x[: L - n] == N_ITEMS).all() and (y[: L - n] == N_ITEMS).all()
        assert list(x[L - n :]) == list(s[-n - 1 : -1]) and list(y[L - n :]) == list(s[-n:])
    assert ex.n_positions() == sum(min(n - 1, L) for n in seqs.lengths())


def test_loss_at_position_t_ignores_later_items() -> None:
    """Per-position full-softmax losses up to t are unchanged when the items after t change."""
    model = _model().eval()
    hist = torch.tensor([[N_ITEMS, 1, 2, 3, 4]])  # one padding column, then four items
    tgt = torch.tensor([[N_ITEMS, 2, 3, 4, 5]])
    items = model.item_tower(torch.arange(N_ITEMS))

    def per_position(h: torch.Tensor) -> torch.Tensor:
        q = model.user_tower.forward_all(None, h)[0]  # [L, D]
        logits = q @ items.T / 0.1
        return torch.nn.functional.cross_entropy(logits[1:], tgt[0, 1:], reduction="none")  # valid columns

    base = per_position(hist)
    changed = hist.clone()
    changed[0, 3:] = torch.tensor([11, 12])  # items after column t = 2
    got = per_position(changed)
    assert torch.allclose(got[:2], base[:2], atol=1e-6)  # columns 1, 2 read only columns <= 2
    assert not torch.allclose(got[2:], base[2:])


@pytest.mark.parametrize("kind", ["full", "inbatch", "sampled", "bpr"])
def test_sequence_training_runs_and_learns(kind: str) -> None:
    model = _model()
    train = TrainConfig(examples="sequence", epochs=3, batch_size=3, lr=1e-2, progress=False, checkpoint=False)
    tr = Trainer(model, _seqs(), loss=LossConfig(kind=kind, temperature=0.1, sampled_negatives=8),
                 train=train, eval=EvalConfig(baselines=()))
    res = tr.fit()
    assert res.epochs_run == 3 and len(res.history) == 3
    assert all(np.isfinite(r["loss"]) for r in res.history)
    assert res.history[-1]["loss"] < res.history[0]["loss"]
    assert res.history[0]["positions_per_s"] > 0


def test_sequence_examples_need_a_sequence_tower() -> None:
    cfg = ModelConfig(user=TowerConfig(use_id=False, history="mean"), item=TowerConfig())
    with pytest.raises(ConfigError, match="sequence user tower"):
        Trainer(TwoTowerModel(cfg, N_USERS, N_ITEMS), _seqs(), loss=LossConfig(),
                train=TrainConfig(examples="sequence"), eval=EvalConfig(baselines=()))


@pytest.mark.parametrize("kind", ["full", "inbatch"])
def test_bf16_step_follows_the_fp32_step(kind: str) -> None:
    """train.precision=bf16: the same step to bfloat16 rounding (loss within 2%, gradients within a few %)."""
    seqs = _seqs()
    grads, losses = {}, {}
    for precision in ("fp32", "bf16"):
        model = _model()
        tr = Trainer(model, seqs, loss=LossConfig(kind=kind, temperature=0.1),
                     train=TrainConfig(examples="sequence", batch_size=6, progress=False, checkpoint=False,
                                       precision=precision),
                     eval=EvalConfig(baselines=()))
        assert tr.bf16 == (precision == "bf16")
        losses[precision] = tr._step(np.arange(len(tr.examples)))[0]
        grads[precision] = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
    assert losses["bf16"] == pytest.approx(losses["fp32"], rel=2e-2)
    g32, g16 = grads["fp32"], grads["bf16"]
    assert float((g16 - g32).norm() / g32.norm()) < 0.05


@pytest.mark.parametrize("examples", ["sequence", "causal"])
def test_data_that_gives_no_batch_is_refused_not_trained_on(examples: str) -> None:
    """Every user with one training item: sequence windows have no target, so each epoch skipped every batch,
    logged loss 0.0 and kept the untrained weights as the best epoch; one causal example is no batch either."""
    singles = UserSequences.from_arrays(np.arange(N_USERS), np.arange(N_USERS), np.zeros(N_USERS), N_USERS)
    seqs = singles if examples == "sequence" else UserSequences.from_arrays(np.array([0]), np.array([3]),
                                                                            np.zeros(1), N_USERS)
    train = TrainConfig(examples=examples, epochs=1, batch_size=4, progress=False, checkpoint=False)
    with pytest.raises(DataError, match="train.examples=causal" if examples == "sequence" else r"^1 training example \(causal\)"):
        Trainer(_model(), seqs, loss=LossConfig(), train=train, eval=EvalConfig(baselines=()))
    # the same users as causal examples train: one example per interaction, the history may be empty
    if examples == "sequence":
        tr = Trainer(_model(), singles, loss=LossConfig(temperature=0.1), train=TrainConfig(
            examples="causal", epochs=1, batch_size=4, progress=False, checkpoint=False), eval=EvalConfig(baselines=()))
        row = tr.fit().history[0]
        assert row["loss"] > 0 and np.isfinite(row["loss"])


def test_max_examples_per_epoch_below_a_batch_is_refused() -> None:
    from twotower.training.hooks import check_enough_examples

    train = TrainConfig(examples="sequence", epochs=1, batch_size=4, max_examples_per_epoch=2, progress=False)
    Trainer(_model(), _seqs(), loss=LossConfig(), train=train, eval=EvalConfig(baselines=()))  # 2 make a batch
    three_ranks = TrainConfig(examples="causal", epochs=1, batch_size=4, max_examples_per_epoch=2, progress=False)
    tr = Trainer(_model(), _seqs(), loss=LossConfig(), train=three_ranks, eval=EvalConfig(baselines=()))
    tr.world = 3  # what the check reads under torchrun: each rank needs one example of the batch
    with pytest.raises(ConfigError, match="train.max_examples_per_epoch=2 leaves 2 examples"):
        check_enough_examples(tr)


def test_progress_lines_off_a_terminal_count_sequences(caplog: pytest.LogCaptureFixture) -> None:
    # a log file's progress lines said "examples/s" for whole-window training, where the epoch line says "seq/s"
    import logging

    train = TrainConfig(examples="sequence", epochs=1, batch_size=2, progress=True, log_every_s=1e-9, checkpoint=False)
    tr = Trainer(_model(), _seqs(), loss=LossConfig(), train=train, eval=EvalConfig(baselines=()))
    with caplog.at_level(logging.INFO, logger="twotower.training.loop"):
        tr.fit()
    lines = [r.getMessage() for r in caplog.records if ": batch " in r.getMessage()]
    assert lines and all(" sequences/s, " in line and "ETA" in line for line in lines), lines
