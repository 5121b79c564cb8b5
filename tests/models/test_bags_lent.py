"""A dense table's gradient from the history bags in two row ranges, one on a lent thread (models/pooling.py):
the same gradient, bit for bit, as one thread computes and as PyTorch's embedding backward adds."""
from __future__ import annotations

from concurrent.futures import Future
from typing import Any, Callable

import pytest
import torch

from twotower.models.pooling import weighted_bags
from twotower.training.side_worker import SideWorker
from twotower.utils.spare_thread import lend


class Counting:
    def __init__(self, worker: SideWorker) -> None:
        self.worker, self.calls = worker, 0

    def submit(self, fn: Callable[[], Any]) -> Future[Any]:
        self.calls += 1
        return self.worker.submit(fn)


def _table_grad(table0: torch.Tensor, history: torch.Tensor, weights: list[torch.Tensor],
                worker: Counting | None) -> torch.Tensor:
    table = table0.clone().requires_grad_()
    with lend(worker):
        outs = weighted_bags(table, history, weights, padding_idx=0)
        sum((o * torch.arange(o.numel(), dtype=o.dtype).view_as(o).sin()).sum() for o in outs).backward()
    assert table.grad is not None
    return table.grad


@pytest.mark.parametrize("pools", [1, 2])
def test_the_lent_thread_gives_the_same_table_gradient(pools: int) -> None:
    g = torch.Generator().manual_seed(0)
    table0 = torch.randn(200, 8, generator=g)
    history = torch.randint(0, 200, (32, 12), generator=g)
    history[:, :3] = 0  # padding, left out of the gradient
    weights = [torch.rand(32, 12, generator=g) for _ in range(pools)]
    alone = _table_grad(table0, history, weights, None)
    with SideWorker("bags-side") as side:
        worker = Counting(side)
        lent = _table_grad(table0, history, weights, worker)
    assert worker.calls == pools  # each pool's gradient: its upper rows on the lent thread
    assert torch.equal(alone, lent)
    # and what the obvious form's backward (PyTorch's embedding backward) gives
    table = table0.clone().requires_grad_()
    emb = torch.nn.functional.embedding(history, table, padding_idx=0)
    outs = [(emb * w.unsqueeze(-1)).sum(1) for w in weights]
    sum((o * torch.arange(o.numel(), dtype=o.dtype).view_as(o).sin()).sum() for o in outs).backward()
    assert torch.allclose(table.grad, lent, atol=1e-5)
