"""The next batches built on a background thread while the current step runs.

Training uses one torch thread on a 2-core machine (``train.threads``), so the second core idles while a step
runs; a batch's inputs (the causal histories' gathers, padding and dropout masks of
:func:`~twotower.training.examples.make_histories`) do not depend on the step before, and numpy releases the GIL
for most of that work. :class:`Prefetcher` runs ``make(item)`` for each item in order on one thread, at most
``depth`` results ahead of the consumer, so the batches, and every random number drawn for them, are the ones
the loop would have built itself, in the same order::

    with Prefetcher(build, batches, depth=2) as ready:
        for batch in ready:
            step(batch)

An exception in ``make`` is raised in the consumer, at the item it failed on, as itself (type and message;
its traceback runs through the producer). Leaving the ``with`` block early -- an error in the step, Ctrl-C,
SIGTERM (the CLI's ``Terminated``) -- stops the producer and waits for it, so no thread outlives the epoch.
"""
from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

from twotower.training.side_worker import start_or_close

__all__ = ["Prefetcher"]

T = TypeVar("T")
_DONE, _OK, _FAILED = "done", "ok", "failed"


class Prefetcher(Generic[T]):
    """``make(item)`` for each of ``items``, in order, built on a background thread ``depth`` ahead (module
    docstring). Iterate it once, inside ``with``."""

    def __init__(self, make: Callable[[Any], T], items: Iterable[Any], *, depth: int = 2,
                 name: str = "twotower-prefetch") -> None:
        if depth < 1:
            raise ValueError(f"prefetch depth must be at least 1, got {depth}")
        self._make, self._items = make, items
        self._queue: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._produce, name=name, daemon=True)

    def _put(self, entry: tuple[str, Any]) -> bool:
        """Queue ``entry`` once there is room; False when the consumer stopped first."""
        while not self._stop.is_set():
            try:
                self._queue.put(entry, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _produce(self) -> None:
        try:
            for item in self._items:
                if self._stop.is_set() or not self._put((_OK, self._make(item))):
                    return
        except BaseException as e:  # noqa: BLE001 -- raised again in the consumer, which decides
            self._put((_FAILED, e))
            return
        self._put((_DONE, None))

    def __enter__(self) -> "Prefetcher[T]":
        # a signal in start() (the epoch's first moments) had left the producer looping, drawing from tr.rng
        start_or_close(self._thread, self.close)
        return self

    def __iter__(self) -> Iterator[T]:
        while True:
            kind, value = self._queue.get()
            if kind == _DONE:
                return
            if kind == _FAILED:
                raise value
            yield value

    def close(self) -> None:
        """Stop the producer (it finishes the item in hand, at most) and wait for it."""
        self._stop.set()
        while self._thread.is_alive():
            try:  # room for a producer blocked on a full queue, which then sees the stop
                self._queue.get_nowait()
            except queue.Empty:
                pass
            self._thread.join(timeout=0.05)

    def __exit__(self, *exc: object) -> None:
        self.close()
