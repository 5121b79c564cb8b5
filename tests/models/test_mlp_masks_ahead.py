"""The MLP's dropout masks built ahead on a lent thread (models/mlp.py): the same masks, the same draws of torch's
generator, the same outputs and gradients, bit for bit; nothing handed off in eval mode or with torch's own masks."""
from __future__ import annotations

from concurrent.futures import Future
from typing import Any, Callable

import pytest
import torch

from twotower.models.mlp import MLP
from twotower.training.side_worker import SideWorker
from twotower.utils.spare_thread import lend


class Counting:
    def __init__(self, worker: SideWorker) -> None:
        self.worker, self.calls = worker, 0

    def submit(self, fn: Callable[[], Any]) -> Future[Any]:
        self.calls += 1
        return self.worker.submit(fn)


def _run(mlp: MLP, x0: torch.Tensor, worker: Counting | None) -> tuple[torch.Tensor, ...]:
    torch.manual_seed(3)
    x = x0.clone().requires_grad_()
    with lend(worker):
        y = mlp(x)
    y.sum().backward()
    after = torch.rand(4)  # the generator's state after the forward: the same number of draws
    return y.detach(), x.grad, after


@pytest.mark.parametrize("layernorm", [True, False])
def test_masks_built_ahead_are_the_masks_the_layers_draw(layernorm: bool) -> None:
    torch.manual_seed(0)
    mlp = MLP(12, (32, 16), 8, dropout=0.3, layernorm=layernorm, dropout_rng="pcg64").train()
    x0 = torch.randn(5, 7, 12)  # leading dims: the masks cover 5 * 7 rows
    alone = _run(mlp, x0, None)
    with SideWorker("mlp-side") as side:
        worker = Counting(side)
        ahead = _run(mlp, x0, worker)
    assert worker.calls == 2  # one mask a hidden layer
    for a, b in zip(alone, ahead):
        assert torch.equal(a, b)
    assert not torch.equal(alone[0], _run(mlp.eval(), x0, None)[0])  # dropout did act


@pytest.mark.parametrize("rng", ["torch", "pcg64"])
def test_nothing_is_handed_off_for_torchs_masks_or_in_eval_mode(rng: str) -> None:
    torch.manual_seed(0)
    mlp = MLP(6, (8,), 4, dropout=0.5, layernorm=True, dropout_rng=rng)
    x0 = torch.randn(9, 6)
    with SideWorker("mlp-side2") as side:
        worker = Counting(side)
        if rng == "torch":
            assert all(torch.equal(a, b) for a, b in zip(_run(mlp.train(), x0, worker), _run(mlp, x0, None)))
        _run(mlp.eval(), x0, worker)
    assert worker.calls == 0
