"""keeps_caller_state: what a Python API function sets for its call (thread counts, seeded global generators) is
the caller's again when it returns or raises."""
from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from twotower.errors import DataError
from twotower.utils.runtime import keeps_caller_state, seed_everything, set_threads


@keeps_caller_state(rng=True)
def trains(data: str, *, seed: int = 0, threads: int | None = None, fail: bool = False) -> float:
    seed_everything(seed)
    set_threads(threads)
    if fail:
        raise DataError("bad data")
    return float(torch.rand(1))


def draws() -> tuple:
    return random.random(), float(np.random.rand()), float(torch.rand(1))


@pytest.mark.parametrize("fail", [False, True])
def test_threads_and_generators_are_the_callers_again_after_the_call(fail):
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        random.seed(3), np.random.seed(3), torch.manual_seed(3)
        want = draws()
        random.seed(3), np.random.seed(3), torch.manual_seed(3)
        if fail:
            with pytest.raises(DataError):
                trains("x", threads=1, fail=True)
        else:
            assert trains("x", threads=1) == trains("x", seed=0)  # the call's own stream is seeded as before
        assert torch.get_num_threads() == 2
        assert draws() == want
    finally:
        torch.set_num_threads(before)


def test_the_wrapped_function_keeps_its_name_signature_and_errors():
    import inspect

    assert trains.__name__ == "trains" and "threads" in inspect.signature(trains).parameters
    with pytest.raises(TypeError):
        trains()  # its own TypeError for a missing argument, not the decorator's
