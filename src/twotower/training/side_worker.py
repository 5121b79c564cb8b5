"""One background thread that runs the calls handed to it, in order: the weight average and the item tower's backward
beside the step.

:class:`concurrent.futures.ThreadPoolExecutor` started its thread inside the first ``submit``, and added it to the
set its shutdown waits for only after ``Thread.start()`` returned: a Ctrl-C or SIGTERM (the CLI's ``Terminated``)
landing in that start left a running thread, with the average's update in hand, that nobody waited for, so the
interrupted run went on (saving, exiting) beside it. Here the thread starts in ``__enter__``, and a start that
raises closes the worker (waits for the thread) before re-raising, as :class:`~twotower.training.prefetch.Prefetcher`
does::

    with SideWorker("twotower-side") as side:
        pending = side.submit(update)
        ...
        pending.result()  # raises what ``update`` raised
"""
from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

__all__ = ["SideWorker", "start_or_close"]

T = TypeVar("T")


def start_or_close(thread: threading.Thread, close: Callable[[], None]) -> None:
    """``thread.start()``, and where that raises (a Ctrl-C or SIGTERM landing in its wait for the new thread, which
    then runs), ``close()`` before re-raising: ``with`` calls no ``__exit__`` for a failed ``__enter__``."""
    try:
        thread.start()
    except BaseException:
        close()
        raise


class SideWorker:
    """``submit(fn)`` runs ``fn()`` on one background thread, after the calls submitted before it; leaving the
    ``with`` block waits for the calls submitted and then for the thread."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            fn, future = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn())
            except BaseException as e:  # noqa: BLE001 -- raised again by future.result(), in the caller
                future.set_exception(e)

    def __enter__(self) -> "SideWorker":
        start_or_close(self._thread, self.close)
        return self

    def submit(self, fn: Callable[[], T]) -> "Future[T]":
        future: Future[T] = Future()
        self._jobs.put((fn, future))
        return future

    def close(self) -> None:
        """Let the calls submitted finish, then stop the thread and wait for it (a thread not yet running when
        this is called finds the stop first and ends at once)."""
        self._jobs.put(None)
        if self._thread.is_alive():
            self._thread.join()

    def __exit__(self, *exc: object) -> None:
        self.close()
