"""The loss kernel's candidate-gradient product on a lent thread (losses/fused_xent.py, utils/spare_thread.py):
the same loss and gradients, bit for bit, in fp32 and bf16, with one block of rows or several."""
from __future__ import annotations

from concurrent.futures import Future
from typing import Any, Callable

import pytest
import torch

import twotower.losses.fused_xent as fx
from twotower.losses.fused_xent import fused_softmax_xent
from twotower.training.side_worker import SideWorker
from twotower.utils.spare_thread import lend


class Counting:
    def __init__(self, worker: SideWorker) -> None:
        self.worker, self.calls = worker, 0

    def submit(self, fn: Callable[[], Any]) -> Future[Any]:
        self.calls += 1
        return self.worker.submit(fn)


def _grads(q0: torch.Tensor, c0: torch.Tensor, y: torch.Tensor, worker: Counting | None,
           precision: str) -> tuple[torch.Tensor, ...]:
    q, c = q0.clone().requires_grad_(), c0.clone().requires_grad_()
    bias = torch.linspace(-1, 1, c.shape[0])
    with lend(worker):
        loss, _ = fused_softmax_xent(q, c, y, 20.0, precision=precision, bias=bias)
    loss.backward()
    return loss.detach(), q.grad, c.grad


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
# one block of rows; blocks of 64 (bf16: 128) rows; tiles of rows and columns (fused_xent_tiled.py)
@pytest.mark.parametrize("block_bytes", [1 << 21, 24576, 8192])
def test_the_lent_thread_gives_the_same_loss_and_gradients(precision: str, block_bytes: int,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fx, "_BLOCK_BYTES", block_bytes)
    g = torch.Generator().manual_seed(0)
    q0, c0 = torch.randn(256, 16, generator=g), torch.randn(96, 16, generator=g)
    y = torch.randint(0, 96, (256,), generator=g)
    alone = _grads(q0, c0, y, None, precision)
    with SideWorker("xent-side") as side:
        worker = Counting(side)
        lent = _grads(q0, c0, y, worker, precision)
    blocks = {1 << 21: 1, 24576: 4 if precision == "fp32" else 2}.get(block_bytes)
    if blocks is None:  # tiled: one hand-off a tile of the second pass
        assert worker.calls >= 1
    else:
        assert worker.calls == blocks  # one hand-off a block of rows
    for a, b in zip(alone, lent):
        assert torch.equal(a, b)
