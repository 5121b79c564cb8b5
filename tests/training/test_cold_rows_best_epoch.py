"""A resumed run whose best epoch was saved before the resume ends with that epoch's weights, read back from
``model.safetensors``; their cold items' ID rows must be zero, as the resumed checkpoint's are.

Found in review: a run trained by a version without the cold-row mask (BPR, its cold rows pushed as negatives),
best at epoch 1 and resumed past epoch 2, had its checkpoint's cold rows zeroed on resume
(``ColdRows.settle_resumed``), but the end of the fit reloaded epoch 1's file, trained rows and all, and the run
saved them.
"""
from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from tests.training.test_cold_id_rows import COLD, LOSSES, _rows, _trainer
from twotower.training import cold_rows
from twotower.training.loop import EarlyStopping

KEY = "item_tower.id_emb.weight"


@pytest.fixture
def best_is_epoch_1(monkeypatch):
    """Epoch 1 is the best and stays it (no validation data here: the stopper would follow the training loss)."""
    update = EarlyStopping.update
    monkeypatch.setattr(EarlyStopping, "update", lambda self, value, epoch: update(self, 1.0 if epoch == 1 else 0.0, epoch))


@pytest.mark.parametrize("sparse,ema", [(False, None), (True, None), (False, 0.9)], ids=["adamw", "sparse_adam", "ema"])
@pytest.mark.parametrize("old", [True, False], ids=["checkpoint-of-the-old-behaviour", "checkpoint-of-this-version"])
def test_a_resume_whose_best_epoch_came_before_it_saves_zero_cold_rows(tmp_path, monkeypatch, best_is_epoch_1, old, sparse, ema):
    with monkeypatch.context() as m:
        if old:  # the old behaviour: no mask, the cold rows trained as BPR's negatives
            m.setattr(cold_rows.ColdRows, "mask_grads", lambda self: None)
        first = _trainer(LOSSES["bpr"], sparse=sparse, epochs=2, out=tmp_path, ema=ema)
        first.fit(curves=False)
    saved = load_file(str(tmp_path / "model.safetensors"))[KEY]
    assert (torch.count_nonzero(saved[COLD]) > 0) == old  # the premise: epoch 1's file carries the trained rows
    resumed = _trainer(LOSSES["bpr"], sparse=sparse, epochs=3, out=tmp_path, ema=ema)
    result = resumed.fit(resume=True, curves=False)
    assert (result.best_epoch, result.epochs_run) == (1, 3)  # ended with the weights saved before the resume
    assert torch.count_nonzero(_rows(resumed)[COLD]) == 0  # the model the pipeline goes on with
    saved = load_file(str(tmp_path / "model.safetensors"))
    assert torch.count_nonzero(saved[KEY][COLD]) == 0  # and the file the run keeps
    assert torch.equal(saved[KEY][~COLD], _rows(resumed)[~COLD])  # epoch 1's warm rows, untouched
