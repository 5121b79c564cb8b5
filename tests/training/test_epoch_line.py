"""The epoch log line: where the fit is (``epoch 3/30``), the best so far, and how long it may still run."""
from __future__ import annotations

import logging
import re

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from twotower.config import EvalConfig, LossConfig, TrainConfig
from twotower.training.epoch_line import format_seconds
from twotower.training.trainer import Trainer

from tests.training.tiny_trainer import tiny_mean_model


def _trainer(**train: object) -> Trainer:
    rng, users, seqs, model = tiny_mean_model()
    valid = sp.csr_matrix((np.ones(8, np.float32), (np.arange(8), rng.integers(0, 30, size=8))), shape=(8, 30))
    train_m = sp.csr_matrix((np.ones(users.size, np.float32), (users, seqs.items)), shape=(8, 30))
    cfg = TrainConfig(**{"epochs": 4, "batch_size": 8, "progress": False, "checkpoint": False, "patience": 10,
                         **train})
    return Trainer(model, seqs, loss=LossConfig(), train=cfg, eval=EvalConfig(baselines=()),
                   valid_relevant=valid, train_matrix=train_m)


def _epoch_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("epoch ")]


def test_each_epoch_line_says_which_of_how_many_and_what_is_left(caplog):
    with caplog.at_level(logging.INFO, logger="twotower.training.trainer"):
        res = _trainer().fit()
    lines = _epoch_lines(caplog)
    assert [line.split(":")[0] for line in lines] == ["epoch 1/4", "epoch 2/4", "epoch 3/4", "epoch 4/4"]
    assert all("to go" in line for line in lines[:-1]) and "to go" not in lines[-1]  # nothing left after the last
    for row, line in zip(res.history, lines):
        if row["epoch"] == res.best_epoch and row["epoch"] > 1:
            assert "(new best)" in line
        elif row["epoch"] > res.best_epoch:
            assert re.search(rf"\(best {res.best_metric:.4f} at {res.best_epoch}\)", line), line


def test_a_time_budget_caps_the_estimate(caplog):
    with caplog.at_level(logging.INFO, logger="twotower.training.trainer"):
        _trainer(epochs=1000, time_budget_min=0.0005, budget_schedule=False).fit()  # 30 ms: one or two epochs
    first = _epoch_lines(caplog)[0]
    assert first.startswith("epoch 1/1000:")
    left = re.search(r"at most (\S+) to go", first)
    # not 999 epochs' worth; nothing when the first epoch spent the budget
    assert left is None or left.group(1) in ("<1s", "1s"), first


def _line_after(caplog: pytest.LogCaptureFixture, history: list[float], epochs: int = 6,
                budget_min: float | None = 0.12) -> str:
    """The epoch line logged after epochs that took ``history`` seconds each (ML-100K's 6.4 s on one thread)."""
    from types import SimpleNamespace

    from twotower.training.epoch_line import log_epoch

    rows = [{"epoch": i + 1, "seconds": s, "loss": 5.0, "inbatch_accuracy": 0.02, "examples_per_s": 12868.0}
            for i, s in enumerate(history)]
    tr = SimpleNamespace(cfg=TrainConfig(epochs=epochs, time_budget_min=budget_min), history=rows, sequence=False,
                         loss_cfg=LossConfig(),
                         valid_relevant=None, eval_cfg=EvalConfig())
    stopper = SimpleNamespace(best_epoch=0, best=0.0, stop=False)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="twotower.training.trainer"):
        log_epoch(tr, rows[-1], "NDCG@10", stopper, epochs)  # type: ignore[arg-type]
    return _epoch_lines(caplog)[-1]


def test_under_a_time_budget_the_estimate_counts_the_epochs_that_will_start(caplog):
    # 7.2 s budget, 6.4 s spent: one more whole epoch starts (the budget is checked before each); it said "1s"
    assert "at most 6s to go" in _line_after(caplog, [6.4])
    # 13 s spent: the budget ends the fit here; it said "at most 0s to go"
    assert "to go" not in _line_after(caplog, [6.4, 6.6])
    assert "at most 2m00s to go" in _line_after(caplog, [30.0], epochs=5, budget_min=None)  # no budget: the 4 scheduled


@pytest.mark.parametrize(("s", "text"), [(0.4, "<1s"), (0, "0s"), (42, "42s"), (185, "3m05s"), (3720, "1h02m")])
def test_durations_read_as_people_write_them(s, text):
    assert format_seconds(s) == text


def test_an_epoch_eval_every_skips_says_so_instead_of_nan(caplog):
    with caplog.at_level(logging.INFO, logger="twotower.training.trainer"):
        _trainer(eval_every=2).fit()
    lines = _epoch_lines(caplog)
    assert "not validated (train.eval_every)" in lines[0] and "nan" not in lines[0]
    assert re.search(r"valid NDCG@10 \d\.\d{4}", lines[1]), lines[1]


def test_the_epoch_loss_and_accuracy_are_means_over_the_batches_that_trained():
    # 17 examples in batches of 8: the last batch holds one example, which has no in-batch company and is skipped;
    # it was counted in the means all the same, so the epoch's loss and accuracy read 2/3 of what the steps gave
    tr = _trainer(epochs=1, max_examples_per_epoch=17)
    steps: list[tuple[float, float]] = []
    step = tr._step

    def recording(idx: np.ndarray, *inputs):
        out = step(idx, *inputs)
        steps.append((out[0], out[1]))
        return out

    tr._step = recording  # type: ignore[method-assign]
    row = tr.fit().history[0]
    assert len(steps) == 2
    assert row["loss"] == pytest.approx(np.mean([s[0] for s in steps]), rel=1e-9)
    assert row["inbatch_accuracy"] == pytest.approx(np.mean([s[1] for s in steps]), rel=1e-9)


def test_the_mixture_logq_counts_the_batch_the_steps_take():
    # max_examples_per_epoch=10 cuts every batch to 10 examples, but the in-batch mixture logQ was computed for
    # train.batch_size=512 draws beside the 50 uniform negatives, over-weighting the batch's positives 51-fold
    from twotower.losses.corrections import mixture_log_q

    _, _, seqs, model = tiny_mean_model()
    tr = Trainer(model, seqs, loss=LossConfig(uniform_negatives=50), eval=EvalConfig(baselines=()),
                 train=TrainConfig(batch_size=512, max_examples_per_epoch=10, progress=False, checkpoint=False))
    counts = np.bincount(seqs.items, minlength=30).astype(np.float64)
    want = mixture_log_q(torch.as_tensor(counts / counts.sum(), dtype=torch.float32), 10, 50)
    torch.testing.assert_close(tr.step_fn.log_q, want)


def test_the_start_line_names_ranks_only_under_torchrun(caplog: pytest.LogCaptureFixture) -> None:
    # one process said "batch 8 (1 ranks)": ranks mean nothing there, and under torchrun the batch is the global one
    with caplog.at_level(logging.INFO, logger="twotower"):
        _trainer()
    start = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("training: "))
    assert ", batch 8, loss " in start and "rank" not in start


@pytest.mark.parametrize("loss, said", [
    # how many negatives a query is scored against: the batch's other positives (and the uniform extras)
    (LossConfig(), "loss inbatch: 7 negatives a query (T=0.02, logQ, hit masking), "),
    (LossConfig(uniform_negatives=16, mask_hits=False), "loss inbatch + 16 uniform negatives: 23 negatives a query "
                                                        "(T=0.02, mixture logQ, no hit masking), "),
    (LossConfig(kind="sampled", sampler="popularity", sampled_negatives=8, logq=False),
     "loss sampled, 8 popularity negatives (T=0.02, no logQ, hit masking), "),
    # the defaults loss.logq / loss.mask_hits = true are not read by these kinds: the line said only "loss full"
    (LossConfig(kind="full"), "loss full over 30 items (T=0.02; loss.logq and loss.mask_hits do not apply), "),
    (LossConfig(kind="bpr", logq=False), "loss bpr, one uniform negative per example (T=0.02; loss.mask_hits does "
                                         "not apply), "),
])
def test_the_start_line_says_what_the_loss_applies(caplog: pytest.LogCaptureFixture, loss: LossConfig,
                                                   said: str) -> None:
    # the sampler, the uniform negatives and the corrections were not in the log, and a correction the loss kind
    # does not read was left out silently
    _, _, seqs, model = tiny_mean_model()
    with caplog.at_level(logging.INFO, logger="twotower"):
        Trainer(model, seqs, loss=loss, eval=EvalConfig(baselines=()),
                train=TrainConfig(batch_size=8, progress=False, checkpoint=False))
    start = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("training: "))
    assert said in start


def _sparse_mean_model():
    from twotower.config import ModelConfig, TowerConfig
    from twotower.models.two_tower import TwoTowerModel

    _, _, seqs, _ = tiny_mean_model()
    model = TwoTowerModel(ModelConfig(user=TowerConfig(history="mean", history_len=4, out_dim=8, hidden=()),
                                      item=TowerConfig(out_dim=8, hidden=())), 8, 30, sparse=True)
    return seqs, model


@pytest.mark.parametrize("sparse, train, said", [
    (False, TrainConfig(), ", optimizer AdamW, weight average 0.99, "),
    (False, TrainConfig(ema_decay=0), ", optimizer AdamW, no weight average, "),
    # the tables train by the row-sparse Adam and stay out of the average
    (True, TrainConfig(optimizer="sparse_adam", ema_decay=0.999),
     ", optimizer AdamW + row-sparse Adam on 3 embedding tables, weight average 0.999 of the dense weights, "),
    # a model built without sparse tables (Python API): the setting has nothing to step, said rather than implied
    (False, TrainConfig(optimizer="sparse_adam"), ", optimizer AdamW (train.optimizer=sparse_adam, but the model "
                                                  "has no sparse embedding tables), weight average 0.99, "),
])
def test_the_start_line_says_the_optimizer_and_the_weight_average(caplog: pytest.LogCaptureFixture, sparse: bool,
                                                                   train: TrainConfig, said: str) -> None:
    # the line named the loss but not train.optimizer (nor whether the ID tables train row-sparse) nor train.ema_decay,
    # which decides the weights validated and saved
    from dataclasses import replace

    seqs, model = _sparse_mean_model() if sparse else tiny_mean_model()[2:]
    with caplog.at_level(logging.INFO, logger="twotower"):
        Trainer(model, seqs, loss=LossConfig(), eval=EvalConfig(baselines=()),
                train=replace(train, batch_size=8, progress=False, checkpoint=False))
    start = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("training: "))
    assert said in start, start


@pytest.mark.parametrize("kind, label", [("inbatch", " acc "), ("sampled", " sampled acc "),
                                         ("full", " catalogue acc "), ("bpr", " pairwise acc ")])
def test_the_epoch_line_names_which_accuracy_the_loss_measures(caplog: pytest.LogCaptureFixture, kind: str,
                                                               label: str) -> None:
    # ML-1M, one epoch: BPR's "acc 0.864" (its positive above one random negative) beside the in-batch softmax's
    # "acc 0.042" (its positive first of 512) read as the same measure
    _, _, seqs, model = tiny_mean_model()
    with caplog.at_level(logging.INFO, logger="twotower.training.trainer"):
        Trainer(model, seqs, loss=LossConfig(kind=kind, sampled_negatives=8), eval=EvalConfig(baselines=()),
                train=TrainConfig(epochs=1, batch_size=8, progress=False, checkpoint=False)).fit()
    line = _epoch_lines(caplog)[0]
    assert re.search(rf"loss [0-9.]+{label}[0-9.]+ ", line), line


def test_a_new_best_within_the_printed_digits_says_by_how_much(caplog):
    """The demo's epochs 7 and 8 read "0.2004 (new best)" twice (0.200358, then 0.200406): the lead was below the
    four printed digits, and the second line looked like no improvement called one."""
    from types import SimpleNamespace

    from twotower.training.epoch_line import log_epoch

    def line(values: list[float]) -> str:
        rows = [{"epoch": i + 1, "seconds": 1.0, "loss": 5.0, "inbatch_accuracy": 0.02, "examples_per_s": 1e4,
                 "valid_NDCG@10": v} for i, v in enumerate(values)]
        tr = SimpleNamespace(cfg=TrainConfig(epochs=10), history=rows, sequence=False, loss_cfg=LossConfig(),
                             valid_relevant=object(), eval_cfg=EvalConfig())
        stopper = SimpleNamespace(best_epoch=len(values), best=values[-1], stop=False)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="twotower.training.trainer"):
            log_epoch(tr, rows[-1], "NDCG@10", stopper, 10)  # type: ignore[arg-type]
        return _epoch_lines(caplog)[-1]

    said = line([0.19, 0.200358, 0.200406])
    assert "valid NDCG@10 0.2004 (new best, up 5e-05 on 0.200358)" in said, said
    assert "valid NDCG@10 0.2100 (new best) " in line([0.19, 0.200358, 0.21])
    # the run's first validation (train.eval_every=3: epoch 3) beats nothing: it said "(new best)"
    assert "(new best" not in line([None, None, 0.19])  # type: ignore[list-item]


@pytest.mark.parametrize(("kind", "accuracy"), [("inbatch", "inbatch"), ("sampled", "sampled"), ("full", "catalogue"),
                                                ("bpr", "pairwise")])
def test_each_rows_accuracy_names_its_kind_beside_the_kept_key(kind, accuracy):
    """log.jsonl called every loss's accuracy inbatch_accuracy, BPR's pairwise one (~0.9) and the full softmax's over
    the catalogue alike, while the epoch line told them apart: the key stays (scripts read it), and its kind is said."""
    _, _, seqs, model = tiny_mean_model()
    tr = Trainer(model, seqs, loss=LossConfig(kind=kind, sampled_negatives=16),
                 train=TrainConfig(epochs=1, batch_size=8, progress=False, checkpoint=False), eval=EvalConfig(baselines=()))
    row = tr.fit().history[0]
    assert row["accuracy_kind"] == accuracy and 0.0 <= row["inbatch_accuracy"] <= 1.0
