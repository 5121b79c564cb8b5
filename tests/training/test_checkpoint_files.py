"""A checkpoint's files share one set of permissions (rng.safetensors was 0600 beside 0644 files)."""
from __future__ import annotations

import os
import stat
import sys

import numpy as np
import pytest
import torch

from twotower.training.checkpoint import load_checkpoint, save_checkpoint

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX file modes")


def test_every_checkpoint_file_gets_the_same_mode_and_loads(tmp_path) -> None:
    old = os.umask(0o022)
    try:
        model = torch.nn.Linear(3, 2)
        opt = torch.optim.AdamW(model.parameters())
        save_checkpoint(tmp_path / "ckpt", model, [opt], {"epoch": 1}, np.random.default_rng(0),
                        extra={"ema.safetensors": {"w": torch.ones(2)}})
    finally:
        os.umask(old)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "ckpt").iterdir()}
    assert {"rng.safetensors", "ema.safetensors", "model.safetensors"} <= set(modes)
    assert set(modes.values()) == {0o644}, modes
    torch.manual_seed(5)  # a different torch RNG state: loading must restore the saved one
    fresh = torch.nn.Linear(3, 2)
    state = load_checkpoint(tmp_path / "ckpt", fresh, [torch.optim.AdamW(fresh.parameters())], np.random.default_rng(1))
    assert state["epoch"] == 1 and torch.equal(fresh.weight, model.weight)
