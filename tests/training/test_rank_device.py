"""Under torchrun each process computes on the GPU of its LOCAL_RANK: a train.device naming another is refused.

`train.device=cuda:1` under torchrun was replaced by cuda:LOCAL_RANK without a word (trainer.py's device choice
after init_distributed). Needs no GPU: the resolution and the refusal come before anything touches CUDA.
"""
from __future__ import annotations

import pytest

from twotower.config import TrainConfig
from twotower.distributed import init_distributed, rank_device
from twotower.errors import ConfigError


def test_cuda_is_the_gpu_of_the_local_rank_and_one_process_keeps_its_device():
    assert rank_device("cuda", 4, 1) == "cuda:1"
    assert rank_device("cuda:0", 2, 0) == "cuda:0"  # the one torchrun assigns: a single-GPU config keeps working
    assert rank_device("cpu", 2, 1) == "cpu"
    assert rank_device("cuda:1", 1, 0) == "cuda:1"  # one process: as given


def test_another_gpu_under_torchrun_is_refused_naming_the_setting_and_the_assigned_one():
    with pytest.raises(ConfigError) as e:
        rank_device("cuda:1", 2, 0)
    msg = str(e.value)
    assert "train.device=cuda:1" in msg and "cuda:0 for this one, LOCAL_RANK=0" in msg
    assert "train.device=cuda" in msg and "CUDA_VISIBLE_DEVICES" in msg


def test_training_refuses_it_before_joining_the_process_group(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "0")
    for name in ("RANK", "MASTER_ADDR", "MASTER_PORT"):  # joining would fail on these: the device must come first
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigError, match=r"train\.device=cuda:1 under torchrun"):
        init_distributed(TrainConfig(device="cuda:1"))


@pytest.mark.parametrize("backend", [None, "nccl"])
def test_cuda_asked_for_without_a_cuda_device_is_refused_for_the_device_not_the_backend(monkeypatch, backend):
    """torchrun with train.device=cuda on a machine without CUDA said "backend 'nccl' needs CUDA; use 'gloo' on CPU",
    a backend its user never set, where one process says the device is missing: gloo would not have helped."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "0")
    for name in ("RANK", "MASTER_ADDR", "MASTER_PORT"):  # joining would fail on these: the device must come first
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigError) as e:
        init_distributed(TrainConfig(device="cuda", distributed_backend=backend))
    msg = str(e.value)
    assert "train.device='cuda' but this torch build sees no CUDA device; use train.device=cpu" in msg
    assert "gloo" not in msg
