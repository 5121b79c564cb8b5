"""A request does not walk the served model to set its modes: it is in eval mode already.

Every /recommend with a history called ``model.eval()`` and then ``model.train(False)``, each a walk that sets
``training`` on every module: 0.19 ms a request on the MovieLens-100K demo run and 0.6 ms on a 2-layer transformer
(a busy 2-core machine), of 1.2-1.9 ms in all. A model left in training mode is still put in eval mode for the
pass and given its modes back after it.
"""
from __future__ import annotations

import pytest
from torch import nn


def test_a_request_sets_no_module_modes(service, monkeypatch) -> None:
    from twotower.serving import RecRequest

    req = RecRequest(history=("i1", "i2"), k=5)
    want = service.recommend(req)
    calls: list[bool] = []
    train = nn.Module.train

    def counting(self, mode: bool = True):
        calls.append(mode)
        return train(self, mode)

    monkeypatch.setattr(nn.Module, "train", counting)
    got = service.recommend(req)
    assert calls == [], f"{len(calls)} Module.train calls for one request"
    assert got == want


def test_a_model_in_training_mode_is_read_in_eval_mode_and_restored(service) -> None:
    from twotower.serving import RecRequest

    req = RecRequest(history=("i1", "i2"), k=5)
    want = service.recommend(req)
    model = service.run.model
    model.user_tower.train()  # a part of the model left in training mode
    try:
        got = service.recommend(req)
        assert not any(m.training for m in model.modules())  # eval for the pass, as the model's mode was
    finally:
        model.eval()
    assert [i["item_id"] for i in got["items"]] == [i["item_id"] for i in want["items"]]
    assert [i["score"] for i in got["items"]] == pytest.approx([i["score"] for i in want["items"]], abs=1e-6)
