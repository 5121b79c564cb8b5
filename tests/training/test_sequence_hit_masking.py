"""loss.mask_hits beside train.examples=sequence: the in-batch candidates are distinct items, so there is no hit."""
from __future__ import annotations

import logging

import pytest

from tests.training.test_sequence_training import _model, _seqs
from twotower.config import EvalConfig, LossConfig, TrainConfig
from twotower.training.trainer import Trainer


def _fit(mask_hits: bool, caplog: pytest.LogCaptureFixture) -> tuple[list[float], str]:
    caplog.clear()
    train = TrainConfig(examples="sequence", epochs=2, batch_size=3, lr=1e-2, progress=False, checkpoint=False,
                        diagnostics=False)
    with caplog.at_level(logging.INFO, logger="twotower"):
        tr = Trainer(_model(), _seqs(), loss=LossConfig(temperature=0.1, mask_hits=mask_hits, uniform_negatives=8),
                     train=train, eval=EvalConfig(baselines=()))
        losses = [row["loss"] for row in tr.fit().history]
    start = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("training: "))
    return losses, start


def test_mask_hits_false_with_sequence_examples_is_said_not_to_apply(caplog: pytest.LogCaptureFixture) -> None:
    # the sequence objective de-duplicates its candidates, so loss.mask_hits=false trained exactly as true did
    # while the start line said "no hit masking", as if the duplicates were kept as negatives
    masked, start_masked = _fit(True, caplog)
    unmasked, start = _fit(False, caplog)
    assert masked == unmasked
    assert "no hit masking" not in start
    assert "loss.mask_hits=false does not apply" in start
    assert "hit masking)" in start_masked
