"""The candidates' gradient computed on the training step's side thread (training/tower_overlap.py).

The item tower's backward pass already runs on the step's side thread; a loss
that can compute the candidates' gradient itself (the in-batch CPU kernel,
losses/fused_xent.py) queues that work there too, ahead of the item tower's
backward, so the step's own thread computes only the queries' gradient.
"""
from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from torch import Tensor

__all__ = ["SideGradient"]


@dataclass
class SideGradient:
    """The candidates' gradient, computed on the training step's side thread (training/tower_overlap.py).

    ``submit(fn)`` queues ``fn`` on that thread, after the jobs queued before it. A loss that computes the
    candidates' gradient there queues its jobs with :meth:`run`, sets ``grad`` (the tensor they complete) and gives
    the candidates no gradient through autograd; the step then queues the item tower's backward from ``grad``
    behind them. A loss that does not sets nothing, and the gradient comes through autograd as usual.
    """

    submit: Callable[[Callable[[], Any]], Future[Any]]
    grad: Tensor | None = None
    jobs: list[Future[Any]] = field(default_factory=list)

    def run(self, fn: Callable[[], Any]) -> None:
        self.jobs.append(self.submit(fn))

    def wait(self) -> Tensor:
        """``grad`` once its jobs are done; raises what one of them raised (call it on the side thread, behind them)."""
        for job in self.jobs:
            job.result()
        assert self.grad is not None
        return self.grad
