"""Batches built on a background thread (training/prefetch.py): the same batches and random draws as building
each in the step, a failure in the producer raised in the trainer, and no producer left after a stop."""
from __future__ import annotations

import itertools
import threading

import numpy as np
import pytest
import torch

import twotower.training.epoch as epoch_mod
from twotower.config import EvalConfig, LossConfig, TrainConfig
from twotower.training.prefetch import Prefetcher
from twotower.training.trainer import Trainer

from tests.training.tiny_trainer import tiny_mean_model


def _producers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "twotower-prefetch"]


@pytest.fixture(autouse=True)
def _a_spare_core(monkeypatch: pytest.MonkeyPatch) -> None:
    # the helper threads run only beside a free core (utils/runtime.spare_core): these tests are about them
    monkeypatch.setattr(epoch_mod, "spare_core", lambda threads: True)


def _trainer(**train: object) -> Trainer:
    _, _, seqs, model = tiny_mean_model()
    # "both": denoising subsets (denoise_keep) and history dropout both draw from the trainer's rng every batch
    cfg = TrainConfig(**{"epochs": 2, "batch_size": 8, "progress": False, "checkpoint": False, "examples": "both",
                         "denoise_keep": 0.5, "history_dropout": 0.3, "ema_decay": 0.9, **train})
    return Trainer(model, seqs, loss=LossConfig(), train=cfg, eval=EvalConfig(baselines=()))


class _InTheStep:
    """A stand-in for Prefetcher that hands over no inputs, so each step builds its own (the loop before)."""

    def __init__(self, make, items, **_: object) -> None:
        self.items = items

    def __enter__(self):
        return ([(idx, None) for idx in chunk] for chunk in self.items)  # the epoch hands over chunks of batches

    def __exit__(self, *exc: object) -> None:
        pass


def test_prefetched_batches_train_exactly_as_batches_built_in_the_step(monkeypatch: pytest.MonkeyPatch) -> None:
    ahead = _trainer()
    res_ahead = ahead.fit()
    monkeypatch.setattr(epoch_mod, "Prefetcher", _InTheStep)
    inline = _trainer()
    res_inline = inline.fit()
    assert [r["loss"] for r in res_ahead.history] == [r["loss"] for r in res_inline.history]
    for (name, a), b in zip(ahead.model.state_dict().items(), inline.model.state_dict().values()):
        assert torch.equal(a, b), name
    # the rng the batches drew from (checkpointed for resume) is where building them in the step leaves it
    assert ahead.rng.bit_generator.state == inline.rng.bit_generator.state


def _pooled_trainer() -> Trainer:
    """The default recommender's shape: recency pool and a plain-mean extra pool, in-batch loss with logQ and hit
    masking; 30 items in batches of 16, so batches hold accidental hits."""
    from twotower.config import ModelConfig, TowerConfig
    from twotower.models.two_tower import TwoTowerModel

    _, _, seqs, _ = tiny_mean_model()
    torch.manual_seed(0)
    model = TwoTowerModel(ModelConfig(user=TowerConfig(history="recency", extra_pools=(1.0,), history_len=4, out_dim=8,
                                                       hidden=(16,)), item=TowerConfig(out_dim=8, hidden=(12,))), 8, 30)
    cfg = TrainConfig(epochs=2, batch_size=16, progress=False, checkpoint=False, history_dropout=0.3)
    return Trainer(model, seqs, loss=LossConfig(), train=cfg, eval=EvalConfig(baselines=()))


def test_the_steps_id_only_work_built_ahead_trains_exactly_as_in_the_step(monkeypatch: pytest.MonkeyPatch) -> None:
    # the pools' weights and sums, the pooling backward's CSR structure, the accidental hits, the logQ lookup and
    # both towers' dropout masks come from the prefetch thread's plans (training/plan_chunk.py) or are computed in
    # the step: the same numbers
    plans = []
    real_plan = epoch_mod.plan_chunk

    def spy(*args, **kwargs):
        planned = real_plan(*args, **kwargs)
        plans.extend(plan for _, plan in planned)
        return planned

    monkeypatch.setattr(epoch_mod, "plan_chunk", spy)
    ahead = _pooled_trainer()
    res_ahead = ahead.fit()
    assert plans and all(p.pools is not None and p.pools.bags is not None and p.loss_batch is not None
                         and p.loss_batch.hits is not None and p.loss_batch.log_q is not None for p in plans)
    assert sum(p.loss_batch.hits[0].numel() for p in plans) > 0  # batches with accidental hits were planned
    assert all(p.masks is not None and [m.shape[1] for _, m in p.masks] == [16, 12] for p in plans)
    monkeypatch.setattr(epoch_mod, "Prefetcher", _InTheStep)
    inline = _pooled_trainer()
    res_inline = inline.fit()
    assert [r["loss"] for r in res_ahead.history] == [r["loss"] for r in res_inline.history]
    for (name, a), b in zip(ahead.model.state_dict().items(), inline.model.state_dict().values()):
        assert torch.equal(a, b), name


def test_the_prefetcher_hands_over_every_item_in_order_from_one_stream() -> None:
    rng = np.random.default_rng(0)
    with Prefetcher(lambda i: (i, rng.random()), range(50), depth=2) as ready:
        got = list(ready)
    ref = np.random.default_rng(0)
    assert got == [(i, ref.random()) for i in range(50)]
    assert not _producers()


def test_a_failure_building_a_batch_is_raised_in_the_trainer_with_its_message() -> None:
    tr = _trainer(epochs=1)
    build, calls = tr._inputs, []

    def failing(idx: np.ndarray):
        calls.append(idx)
        if len(calls) == 3:
            raise ValueError("history window out of range for user 7")
        return build(idx)

    tr._inputs = failing  # type: ignore[method-assign]
    with pytest.raises(ValueError, match="history window out of range for user 7"):
        tr.fit()
    assert not _producers()


@pytest.mark.parametrize("stop", [KeyboardInterrupt, RuntimeError])
def test_a_stop_in_the_step_stops_the_producer(stop: type[BaseException]) -> None:
    tr = _trainer(epochs=1, max_examples_per_epoch=96)  # 12 batches: the producer is blocked on a full queue
    step = tr._step

    def stopping(idx: np.ndarray, *inputs):
        if tr.loop.global_step == 2:
            raise stop("stopped")  # Ctrl-C; SIGTERM is the CLI's Terminated, a KeyboardInterrupt
        return step(idx, *inputs)

    tr._step = stopping  # type: ignore[method-assign]
    with pytest.raises(stop):
        tr.fit()
    assert not _producers()


def test_leaving_the_block_stops_a_producer_with_items_left() -> None:
    made: list[int] = []
    with pytest.raises(KeyboardInterrupt):
        with Prefetcher(lambda i: made.append(i) or i, itertools.count(), depth=2) as ready:
            for i in ready:
                if i == 3:
                    raise KeyboardInterrupt
    assert not _producers()
    assert len(made) <= 4 + 3  # the item in the consumer's hands, the queue's two and the one being made


class _Synchronous:
    """A stand-in for the weight average's side thread that runs each update at once (the loop before)."""

    def __init__(self, *_: object, **__: object) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def submit(self, fn):
        from concurrent.futures import Future

        done: Future[None] = Future()
        done.set_result(fn())
        return done


def test_the_weight_average_beside_the_next_step_is_the_one_after_each_step(monkeypatch: pytest.MonkeyPatch) -> None:
    beside = _trainer(max_examples_per_epoch=96)
    beside.fit()
    monkeypatch.setattr(epoch_mod, "SideWorker", _Synchronous)
    after = _trainer(max_examples_per_epoch=96)
    after.fit()
    assert beside.average is not None and after.average is not None
    assert beside.average.updates == after.average.updates == 24
    for a, b in zip(beside.average.shadow, after.average.shadow):
        assert torch.equal(a, b)
    assert not [t for t in threading.enumerate() if t.name.startswith("twotower-side")]


def test_a_failure_in_the_weight_average_is_raised_in_the_trainer() -> None:
    tr = _trainer(epochs=1)
    assert tr.average is not None

    def failing() -> None:
        raise RuntimeError("shadow weights on another device")

    tr.average.update = failing  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="shadow weights on another device"):
        tr.fit()


def test_no_helper_thread_starts_where_torch_threads_take_every_core(monkeypatch: pytest.MonkeyPatch) -> None:
    # 2 torch threads on 2 cores with the prefetch and average threads beside them: an ML-1M epoch took 30 s against
    # 19 s without them (OpenMP threads waiting for each other at every op), so they start only beside a spare core
    started: list[str] = []
    real_start = threading.Thread.start

    def spy(self: threading.Thread) -> None:
        started.append(self.name)
        real_start(self)

    with_helpers = _trainer().fit()
    monkeypatch.setattr(threading.Thread, "start", spy)
    monkeypatch.setattr(epoch_mod, "spare_core", lambda threads: False)
    without = _trainer().fit()
    assert not [n for n in started if n.startswith(("twotower-prefetch", "twotower-side"))]
    assert [r["loss"] for r in with_helpers.history] == [r["loss"] for r in without.history]


def test_a_spare_core_is_one_left_beside_every_local_rank_s_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    from twotower.utils import runtime

    monkeypatch.setattr(runtime.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert runtime.spare_core(1) and not runtime.spare_core(2)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")  # torchrun's two ranks on this machine, a thread each
    assert not runtime.spare_core(1)


def test_a_stop_while_the_producer_starts_stops_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # SIGTERM (the CLI's Terminated) or Ctrl-C landing in Thread.start()'s wait for the new thread: the producer was
    # running, and as ``with`` calls no __exit__ after a failed __enter__, it stayed, drawing batches from the
    # trainer's rng and polling a full queue for good
    real_start = threading.Thread.start

    def interrupted(self: threading.Thread) -> None:
        real_start(self)
        if self.name == "twotower-prefetch":
            raise KeyboardInterrupt

    monkeypatch.setattr(threading.Thread, "start", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _trainer(epochs=1).fit()
    assert not _producers()


def test_a_stop_while_the_average_thread_starts_waits_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # Ctrl-C or SIGTERM landing in the first pool.submit's Thread.start(): ThreadPoolExecutor adds the thread to the
    # set its shutdown joins only after start() returns, so the interrupted run went on (saving, exiting) beside a
    # thread still updating the weight average. The update here blocks until the test lets it go.
    real_start = threading.Thread.start
    release = threading.Event()

    def interrupted(self: threading.Thread) -> None:
        real_start(self)
        if self.name.startswith("twotower-side"):
            raise KeyboardInterrupt

    tr = _trainer(epochs=1)
    assert tr.average is not None
    real_update = tr.average.update

    def held_update() -> None:
        release.wait(timeout=30)
        real_update()

    tr.average.update = held_update  # type: ignore[method-assign]
    monkeypatch.setattr(threading.Thread, "start", interrupted)
    try:
        with pytest.raises(KeyboardInterrupt):
            tr.fit()
        left = [t for t in threading.enumerate() if t.name.startswith("twotower-side")]
        assert not left, f"{[t.name for t in left]} outlived the interrupted epoch"
    finally:
        release.set()
