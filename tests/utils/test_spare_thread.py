"""utils/spare_thread.py: the half given to the lent thread runs there, both halves run here without one, and an
error on either side reaches the caller only after both halves are done."""
from __future__ import annotations

import threading
import time

import pytest

from twotower.training.side_worker import SideWorker
from twotower.utils.spare_thread import beside, lend, lent


def _name() -> str:
    return threading.current_thread().name


def test_the_first_half_runs_on_the_lent_thread_and_the_second_here() -> None:
    with SideWorker("side-x") as side, lend(side):
        assert lent() is side
        assert beside(_name, _name) == ("side-x", threading.current_thread().name)
    assert lent() is None  # the block gives the thread back


def test_without_a_lent_thread_both_halves_run_here_first_half_first() -> None:
    order: list[str] = []
    assert beside(lambda: order.append("there") or 1, lambda: order.append("here") or 2) == (1, 2)
    assert order == ["there", "here"]
    with lend(None):
        assert beside(_name, _name) == (_name(), _name())


def test_the_lending_is_per_thread_so_work_on_the_side_thread_cannot_wait_for_its_own_queue() -> None:
    with SideWorker("side-y") as side, lend(side):
        # a call of beside made on the side thread itself: both halves there, no deadlock
        assert side.submit(lambda: beside(_name, _name)).result(timeout=10) == ("side-y", "side-y")


def test_an_error_here_waits_for_the_other_half_and_wins() -> None:
    finished: list[str] = []

    def slow() -> None:
        time.sleep(0.2)
        finished.append("there")
        raise KeyError("there")

    def fails() -> None:
        raise ValueError("here")

    with SideWorker("side-z") as side, lend(side), pytest.raises(ValueError, match="here"):
        beside(slow, fails)
    assert finished == ["there"]


def test_an_error_there_reaches_the_caller() -> None:
    def fails() -> None:
        raise KeyError("there")

    with SideWorker("side-w") as side, lend(side), pytest.raises(KeyError, match="there"):
        beside(fails, lambda: None)
