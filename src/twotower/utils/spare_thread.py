"""Two halves of one piece of work, one on the spare core's thread and one here, where a training step lends it.

A training step on the CPU keeps one core busy with torch's single intra-op
thread (``train.threads = 1``, the default) while a second core is mostly idle
(the item tower's backward pass runs there, training/tower_overlap.py). Some of
the step's work splits into halves that touch disjoint memory: the loss
kernel's two gradient products (``d/dq`` and ``d/dc`` read the same block of
probabilities and write different tensors), a dense table's gradient (table
rows ``[0, h)`` and ``[h, I)``), the optimizer's update (two sets of tensors).
PyTorch, SciPy's sparse kernels and the fused optimizer let go of the GIL while
they compute, so the halves run in parallel; each half does the same
arithmetic, in the same order, as the whole would, so the numbers are the same
bit for bit with or without a lent thread.

The epoch lends its side thread to the step's own thread for the duration of its
steps (:func:`lend`); code deep in the step asks for it with :func:`beside`.
The lending is per thread: work already running on the side thread that calls
:func:`beside` runs both halves itself (it cannot wait for its own queue).
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Protocol, TypeVar

__all__ = ["Worker", "lend", "lent", "beside", "halves"]

A = TypeVar("A")
B = TypeVar("B")


class Worker(Protocol):
    """What :func:`lend` takes: a thread that runs submitted calls in order (training/side_worker.py)."""

    def submit(self, fn: Callable[[], A]) -> Future[A]: ...


_lent = threading.local()


@contextmanager
def lend(worker: Worker | None) -> Iterator[None]:
    """Within the block, :func:`beside` on this thread hands its first half to ``worker`` (None: lends nothing)."""
    before = getattr(_lent, "worker", None)
    _lent.worker = worker
    try:
        yield
    finally:
        _lent.worker = before


def lent() -> Worker | None:
    """The worker lent to this thread (None: none)."""
    return getattr(_lent, "worker", None)


def beside(there: Callable[[], A], here: Callable[[], B]) -> tuple[A, B]:
    """``(there(), here())``: ``there`` on the thread lent to this one while ``here`` runs here; both here, in
    that order, where none is lent. Waits for ``there`` even when ``here`` raises, then raises what either raised
    (``here``'s first)."""
    worker = lent()
    if worker is None:
        return there(), here()
    pending = worker.submit(there)
    try:
        mine = here()
    except BaseException:
        # wait, so that nothing of ``there`` still runs when the caller handles ``here``'s error; that error wins
        pending.exception()
        raise
    return pending.result(), mine


def halves(sizes: list[int]) -> tuple[list[int], list[int]]:
    """Indices of ``sizes`` in two sets of about equal total (largest first, each to the lighter set)."""
    sets: tuple[list[int], list[int]] = ([], [])
    totals = [0, 0]
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        lighter = 0 if totals[0] <= totals[1] else 1
        sets[lighter].append(i)
        totals[lighter] += sizes[i]
    return sets[0], sets[1]
