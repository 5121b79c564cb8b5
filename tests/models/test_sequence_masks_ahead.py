"""The causal transformer's dropout masks built ahead on a lent thread (models/sequence.py, models/dropout.py): the
same states and gradients and the same draws of torch's generator, bit for bit, for both block kinds, with and
without ``at``; a layer order other than the one announced is an error, not other numbers."""
from __future__ import annotations

from concurrent.futures import Future
from typing import Any, Callable

import pytest
import torch

from twotower.models.dropout import dropout, masks_ahead
from twotower.models.sequence import CausalTransformer
from twotower.training.side_worker import SideWorker
from twotower.utils.spare_thread import lend


class Counting:
    def __init__(self, worker: SideWorker) -> None:
        self.worker, self.calls = worker, 0

    def submit(self, fn: Callable[[], Any]) -> Future[Any]:
        self.calls += 1
        return self.worker.submit(fn)


@pytest.mark.parametrize("block", ["pre_ln", "sasrec"])
@pytest.mark.parametrize("with_at", [False, True])
def test_masks_built_ahead_give_the_same_states_and_gradients(block: str, with_at: bool) -> None:
    torch.manual_seed(0)
    enc = CausalTransformer(16, 10, layers=2, heads=2, dropout=0.3, block=block).train()
    x0 = torch.randn(6, 10, 16)
    valid = torch.rand(6, 10) > 0.3
    valid[:, -1] = True
    at = torch.full((6,), 9) if with_at else None
    runs = []
    with SideWorker("seq-side") as side:
        worker = Counting(side)
        for lent in (None, worker):
            torch.manual_seed(5)
            x = x0.clone().requires_grad_()
            with lend(lent):
                y = enc(x, valid, at)
            y.sum().backward()
            runs.append((y.detach(), x.grad, torch.rand(3)))
    assert worker.calls == 1 + 3 * 2  # the input's mask and three a block
    for a, b in zip(*runs):
        assert torch.equal(a, b)


def test_a_mask_used_out_of_the_announced_order_is_an_error() -> None:
    with SideWorker("seq-side2") as side, lend(side), pytest.raises(RuntimeError, match="another order"):
        with masks_ahead([(0.5, 12), (0.5, 20)]):
            dropout(torch.ones(20), 0.5)


def test_masks_announced_but_not_used_are_an_error() -> None:
    with SideWorker("seq-side3") as side, lend(side), pytest.raises(RuntimeError, match="not used"):
        with masks_ahead([(0.5, 12)]):
            pass
