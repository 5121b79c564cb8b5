"""Helpers shared by the benchmark scripts (not part of the package)."""
from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager
from typing import Iterator

import psutil


class PeakRSS:
    """Samples this process's RSS in a thread; ``peak_mb`` after the block."""

    def __init__(self, interval: float = 0.05) -> None:
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._proc = psutil.Process(os.getpid())

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._proc.memory_info().rss)
            time.sleep(self.interval)

    def __enter__(self) -> "PeakRSS":
        self.peak = self._proc.memory_info().rss
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, self._proc.memory_info().rss)

    @property
    def peak_mb(self) -> float:
        return self.peak / 2**20


@contextmanager
def timed() -> Iterator[dict]:
    out: dict = {}
    t0 = time.perf_counter()
    yield out
    out["seconds"] = time.perf_counter() - t0
