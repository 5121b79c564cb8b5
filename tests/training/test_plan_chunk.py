"""Several batches planned in one call (training/plan_chunk.py): every tensor of every plan, and every random
stream after them, the same as planning the batches one by one in order."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from twotower.config import EvalConfig, LossConfig, ModelConfig, TowerConfig, TrainConfig
from twotower.models.two_tower import TwoTowerModel
from twotower.training.batch_plan import BatchPlan, plan_batch
from twotower.training.plan_chunk import PLAN_CHUNK, chunk_size, plan_chunk
from twotower.training.trainer import Trainer

from tests.training.tiny_trainer import tiny_mean_model


def _trainer(extra_pools: tuple[float, ...] = (1.0,), examples: str = "causal", dropout: float = 0.1) -> Trainer:
    """The default recommender's shape on 48 interactions of 30 items (batches hold accidental hits and padding)."""
    _, _, seqs, _ = tiny_mean_model()
    torch.manual_seed(0)
    model = TwoTowerModel(ModelConfig(
        user=TowerConfig(history="recency", extra_pools=extra_pools, history_len=4, out_dim=8, hidden=(16,),
                         dropout=dropout),
        item=TowerConfig(out_dim=8, hidden=(12,), dropout=dropout)), 8, 30)
    cfg = TrainConfig(epochs=1, batch_size=8, progress=False, checkpoint=False, history_dropout=0.3, examples=examples)
    tr = Trainer(model, seqs, loss=LossConfig(), train=cfg, eval=EvalConfig(baselines=()))
    tr.model.train()
    return tr


def _names(tr: Trainer) -> dict[int, str]:
    return {id(m): name for name, m in tr.model.named_modules()}


def _batches(tr: Trainer, sizes: list[int]) -> list[np.ndarray]:
    order = np.random.default_rng(1).permutation(len(tr.examples))
    ends = np.cumsum(sizes)
    return [order[e - s : e] for s, e in zip(sizes, ends)]


def _same(a: object, b: object, where: str) -> None:
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b), where
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b), where
    elif isinstance(a, (tuple, list)):
        assert isinstance(b, (tuple, list)) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
    else:
        assert a == b or a is b, where


def _compare(chunked: BatchPlan, alone: BatchPlan, names: dict[int, str], ref_names: dict[int, str]) -> None:
    """Every tensor of two plans equal; ``names``/``ref_names``: each plan's model's module names by id."""
    _same(chunked.users, alone.users, "users")
    _same(chunked.history, alone.history, "history")
    _same(chunked.targets, alone.targets, "targets")
    assert chunked.n_global == alone.n_global
    assert (chunked.pools is None) == (alone.pools is None)
    if alone.pools is not None:
        _same(chunked.pools.weights, alone.pools.weights, "pool weights")
        _same(chunked.pools.totals, alone.pools.totals, "pool totals")
        bags, ref = chunked.pools.bags, alone.pools.bags
        assert bags is not None and ref is not None
        _same((bags.indptr, bags.indices, bags.data), (ref.indptr, ref.indices, ref.data), "pooling backward's CSR")
        # the plan is for the tensors the step passes with it (the model checks them by identity)
        assert chunked.pools.history is chunked.history and bags.fits(chunked.history, chunked.pools.weights)
    assert chunked.loss_batch is not None and alone.loss_batch is not None
    _same(chunked.loss_batch.candidate_ids, alone.loss_batch.candidate_ids, "candidates")
    _same(chunked.loss_batch.log_q, alone.loss_batch.log_q, "logQ")
    _same(chunked.loss_batch.hits, alone.loss_batch.hits, "accidental hits")
    assert (chunked.masks is None) == (alone.masks is None)
    for (layer, mask), (ref_layer, ref_mask) in zip(chunked.masks or (), alone.masks or ()):
        assert names[id(layer)] == ref_names[id(ref_layer)]  # the same layer of each trainer's model
        _same(mask, ref_mask, "dropout mask")


@pytest.mark.parametrize("extra_pools", [(1.0,), ()], ids=["two pools", "one pool"])
@pytest.mark.parametrize("sizes", [[8, 8, 8, 5], [8, 8]], ids=["a short last batch", "equal batches"])
def test_a_chunk_of_batches_is_planned_as_each_batch_alone_in_order(extra_pools: tuple[float, ...],
                                                                   sizes: list[int]) -> None:
    one, many = _trainer(extra_pools), _trainer(extra_pools)
    idxs = _batches(one, sizes)
    torch.manual_seed(5)
    alone = [plan_batch(one.step_fn, *one._inputs(idx), ahead=True) for idx in idxs]
    after_alone = torch.get_rng_state()
    torch.manual_seed(5)
    calls: list[np.ndarray] = []
    many._inputs = lambda idx: calls.append(idx)  # type: ignore[method-assign,assignment,return-value]
    chunked = plan_chunk(many, idxs)
    assert not calls  # built together, not batch by batch
    assert [idx for idx, _ in chunked] == idxs
    for (_, got), ref in zip(chunked, alone):
        _compare(got, ref, _names(many), _names(one))
    assert sum(int(p.loss_batch.hits[0].numel()) for p in alone if p.loss_batch and p.loss_batch.hits) > 0
    assert any(bool((p.history == one.model.pad_item).any()) for p in alone)  # padding left out of the CSR
    # the streams the next batches draw from are where batch-by-batch planning leaves them
    assert torch.equal(torch.get_rng_state(), after_alone)
    assert many.rng.bit_generator.state == one.rng.bit_generator.state


def test_a_chunk_with_denoising_rows_is_planned_batch_by_batch() -> None:
    # denoising inputs draw their subsets row by row from the trainer's rng: no joined draw gives those numbers
    tr = _trainer(examples="both")
    idxs = _batches(tr, [8, 8, 8])
    assert any(tr.examples.denoise[idx].any() for idx in idxs)
    ref = _trainer(examples="both")
    torch.manual_seed(2)
    alone = [plan_batch(ref.step_fn, *ref._inputs(idx), ahead=True) for idx in idxs]
    torch.manual_seed(2)
    for (_, got), want in zip(plan_chunk(tr, idxs), alone):
        _compare(got, want, _names(tr), _names(ref))
    assert tr.rng.bit_generator.state == ref.rng.bit_generator.state


def test_without_dropout_a_chunk_draws_no_seeds() -> None:
    tr = _trainer(dropout=0.0)
    torch.manual_seed(3)
    before = torch.get_rng_state()
    planned = plan_chunk(tr, _batches(tr, [8, 8, 8]))
    assert all(plan.masks is None for _, plan in planned)
    assert torch.equal(torch.get_rng_state(), before)


def test_the_chunk_shrinks_for_large_catalogues() -> None:
    # the chunk's backward structure holds a row pointer per item and batch
    assert chunk_size(3_416) == PLAN_CHUNK
    assert chunk_size(1_000_000) == 4
    assert chunk_size(10_000_000) == 1
