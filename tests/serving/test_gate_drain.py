"""The 429 gate's wait estimate: the rate the queue really drains at, not the rate the slots promise."""
from __future__ import annotations

import pytest

from twotower.serving.middleware import Metrics


def _busy(m: Metrics, n: int, compute_s: float, every_s: float, start: float = 0.0, waiting: bool = True) -> float:
    t = start
    for _ in range(n):
        t += every_s
        m.observe_compute(compute_s, done_at=t, waiting=waiting)
    return t


def test_shared_cores_drain_slower_than_the_slots_promise() -> None:
    """2 slots, 4 ms of compute each, but one completion every 4 ms (the threads share one core's worth)."""
    m = Metrics()
    _busy(m, 40, 0.004, 0.004)
    assert m.compute_s == pytest.approx(0.004)
    assert m.drain_s == pytest.approx(0.004)
    assert m.seconds_per_slot(2) == pytest.approx(0.004)  # not 0.002: 8 requests ahead wait ~32 ms, not ~16


def test_idle_time_never_enters_the_drain_estimate() -> None:
    m = Metrics()
    t = _busy(m, 20, 0.004, 0.002)  # two real slots: a completion every 2 ms
    t = _busy(m, 5, 0.004, 1.0, start=t, waiting=False)  # a quiet spell: completions a second apart, no queue
    _busy(m, 1, 0.004, 0.002, start=t + 5.0)  # the first completion of the next burst follows idle time: not counted
    assert m.drain_s == pytest.approx(0.002)
    assert m.seconds_per_slot(2) == pytest.approx(0.002)


def test_the_estimate_is_trusted_only_after_warm_up_and_never_below_the_shared_compute_time() -> None:
    m = Metrics()
    _busy(m, 3, 0.010, 0.050)  # 2 intervals measured: fewer than WARM
    assert m.seconds_per_slot(2) == pytest.approx(m.compute_s / 2)
    m2 = Metrics()
    _busy(m2, 30, 0.010, 0.001)  # completions bunched by event-loop lag: faster than compute allows
    assert m2.seconds_per_slot(2) == pytest.approx(0.005)
    m3 = Metrics()
    m3.observe_compute(0.004)  # callers without a clock keep the old estimate
    assert m3.drain_s is None and m3.seconds_per_slot(4) == pytest.approx(0.001)
