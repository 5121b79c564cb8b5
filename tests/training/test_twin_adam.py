"""training/twin_adam.py: the fused AdamW/Adam update in two halves, one on a lent thread, is PyTorch's, bit for bit."""
from __future__ import annotations

from concurrent.futures import Future
from typing import Any, Callable

import pytest
import torch

from twotower.training.loop import make_optimizers
from twotower.training.side_worker import SideWorker
from twotower.training.twin_adam import TwinAdam, TwinAdamW
from twotower.utils.spare_thread import halves, lend


class Counting:
    """A lent worker that counts the halves handed to it."""

    def __init__(self, worker: SideWorker) -> None:
        self.worker, self.calls = worker, 0

    def submit(self, fn: Callable[[], Any]) -> Future[Any]:
        self.calls += 1
        return self.worker.submit(fn)


def _params(seed: int) -> list[torch.nn.Parameter]:
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(*shape, generator=g)) for shape in [(300, 16), (16,), (64, 8), (8,), (5,)]]


def _train(cls: type, lent: bool, **kw: Any) -> tuple[list[torch.Tensor], int]:
    params = _params(0)
    groups = [{"params": params[:3]}, {"params": params[3:], "weight_decay": 0.0}]
    opt = cls(groups, lr=1e-2, weight_decay=0.1, fused=True, **kw)
    g = torch.Generator().manual_seed(1)
    with SideWorker("twin") as side:
        worker = Counting(side)
        with lend(worker if lent else None):
            for step in range(4):
                for i, p in enumerate(params):
                    # one parameter without a gradient at one step: skipped, as PyTorch skips it
                    p.grad = None if (step == 2 and i == 1) else torch.randn(p.shape, generator=g)
                opt.step()
    return [p.detach().clone() for p in params], worker.calls


@pytest.mark.parametrize(("twin", "plain"), [(TwinAdamW, torch.optim.AdamW), (TwinAdam, torch.optim.Adam)])
def test_the_split_update_equals_pytorchs_fused_one_bit_for_bit(twin: type, plain: type) -> None:
    split, calls = _train(twin, lent=True)
    whole, _ = _train(plain, lent=True)
    assert calls == 8  # two groups, four steps: each update's second half went to the lent thread
    for a, b in zip(split, whole):
        assert torch.equal(a, b)


def test_without_a_lent_thread_or_with_amsgrad_the_step_is_pytorchs_own() -> None:
    _, calls = _train(TwinAdamW, lent=False)
    assert calls == 0
    split, calls = _train(TwinAdamW, lent=True, amsgrad=True)
    whole, _ = _train(torch.optim.AdamW, lent=False, amsgrad=True)
    assert calls == 0
    assert all(torch.equal(a, b) for a, b in zip(split, whole))


def test_the_halves_balance_the_element_counts() -> None:
    first, second = halves([4800, 16, 512, 8, 5, 4000])
    sizes = [4800, 16, 512, 8, 5, 4000]
    assert sorted(first + second) == list(range(6))
    assert abs(sum(sizes[i] for i in first) - sum(sizes[i] for i in second)) <= 512
    assert halves([]) == ([], [])


def test_the_training_loop_builds_the_split_optimizers() -> None:
    p = torch.nn.Parameter(torch.zeros(3))
    assert type(make_optimizers([p], lr=1e-3)[0]) is TwinAdamW
    assert type(make_optimizers([p], lr=1e-3, optimizer="adam")[0]) is TwinAdam
