"""loss.sampled_negatives set beside a loss kind that does not read it is warned of at start-up: with the default
loss.kind=inbatch, loss.sampled_negatives=1000 trained exactly as without it (mixed negatives are
loss.uniform_negatives)."""
from __future__ import annotations

import pytest

from tests.pipeline.test_far_off_temperature import FAST, _frames
from twotower.config import LossConfig, load_config
from twotower.pipeline.run import train_run


def test_sampled_negatives_beside_inbatch_warns_naming_uniform_negatives(tmp_path, caplog):
    cfg = load_config(overrides=[*FAST, "loss.sampled_negatives=1000"])
    with caplog.at_level("WARNING", logger="twotower.pipeline.run"):
        train_run(cfg, tmp_path / "r", frames=_frames())  # a warning, not a refusal: the run trains
    assert "loss.sampled_negatives=1000 has no effect" in caplog.text
    assert "loss.kind=inbatch" in caplog.text and "loss.uniform_negatives=1000" in caplog.text


@pytest.mark.parametrize("overrides, warned", [
    ([], False),  # the default, which no one set
    ([f"loss.sampled_negatives={LossConfig.sampled_negatives}"], False),
    (["loss.kind=sampled", "loss.sampled_negatives=1000"], False),  # read
    (["loss.kind=full", "loss.sampled_negatives=1000"], True),
    (["loss.kind=bpr", "loss.sampled_negatives=8"], True),
    (["loss.uniform_negatives=64", "loss.sampled_negatives=8"], True),
])
def test_only_a_set_and_unread_value_warns(overrides, warned, caplog):
    from twotower.pipeline.run import _warn_far_off_temperature

    with caplog.at_level("WARNING", logger="twotower.pipeline.run"):
        _warn_far_off_temperature(load_config(overrides=[*FAST, *overrides]))
    assert ("loss.sampled_negatives" in caplog.text) == warned, caplog.text
    if warned:
        assert "has no effect" in caplog.text and "loss.kind=sampled" in caplog.text
