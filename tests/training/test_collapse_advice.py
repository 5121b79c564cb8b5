"""The collapse alarm names what to change: the setting that collapsed the towers, and fires from the first epoch
when a tower gives every row one vector."""
from __future__ import annotations

import pytest
import torch

from twotower.training.diagnostics import COLLAPSE_STD, GENERIC_ADVICE, collapse_advice, embedding_diagnostics


def _tight(std: float, n: int = 200, d: int = 8, seed: int = 1) -> torch.Tensor:
    return 1.0 + std * torch.randn(n, d, generator=torch.Generator().manual_seed(seed))


def test_the_alarm_names_a_raised_weight_decay_not_the_learning_rate(caplog):
    # train.weight_decay=1000 on MovieLens-100K: item std 0.0001, and the alarm said "lower the learning rate (train.lr)
    # or the temperature (loss.temperature)", neither of which the user had touched
    advice = collapse_advice(lr=0.002, weight_decay=1000.0, temperature=0.02)
    assert advice == "lower train.weight_decay=1000 (default 0.0001)"
    first = embedding_diagnostics(_tight(0.004), _tight(0.02))
    with caplog.at_level("WARNING", logger="twotower.training.diagnostics"):
        row = embedding_diagnostics(_tight(0.004), _tight(0.02), earlier=[first], advice=advice)
    assert row["collapse_alarm"] is True
    assert caplog.records[-1].getMessage().endswith("; lower train.weight_decay=1000 (default 0.0001)")


def test_the_advice_lists_every_raised_setting_and_stays_generic_at_the_defaults():
    assert collapse_advice(0.002, 0.0001, 0.02) == GENERIC_ADVICE
    assert collapse_advice(0.0005, 0.0, 0.02) == GENERIC_ADVICE  # lowered settings shrink no spread
    # a temperature below its default is not told to go lower still (it keeps the spread small by itself)
    assert collapse_advice(0.0005, 0.0, 0.01).startswith("loss.temperature=0.01 is below its default (0.02)")
    assert collapse_advice(0.5, 0.0001, 100.0) == "lower loss.temperature=100 (default 0.02), train.lr=0.5 (default 0.002)"


def test_items_that_all_embed_alike_are_a_collapse_at_the_first_epoch_naming_the_inputs(caplog):
    # every item given one feature value and no ID embedding: the first epoch said "usual after a first epoch
    # (embeddings start close together)" and the second "lower the learning rate", which cannot tell items apart
    items = torch.ones(50, 8) / 8 ** 0.5
    with caplog.at_level("INFO", logger="twotower.training.diagnostics"):
        row = embedding_diagnostics(items, _tight(0.05), item_ids=False)
    assert row["collapse_alarm"] is True
    line = caplog.records[-1]
    assert line.levelname == "WARNING" and "every item gets the same vector" in line.getMessage()
    assert "set model.item.use_id=true or give it features that differ between items" in line.getMessage()
    # with an ID embedding the weights, not the inputs, made the items alike: the settings' advice stands
    with caplog.at_level("INFO", logger="twotower.training.diagnostics"):
        row = embedding_diagnostics(items, _tight(0.05), advice="lower train.weight_decay=1000 (default 0.0001)")
    assert row["collapse_alarm"] is True and caplog.records[-1].getMessage().endswith("lower train.weight_decay=1000 "
                                                                                     "(default 0.0001)")
    # a tight but not identical first epoch stays a point to watch
    assert embedding_diagnostics(_tight(0.005), _tight(0.05))["collapse_alarm"] is False


def test_the_alarm_line_follows_the_embedding_width(caplog):
    # out_dim=512 on MovieLens-100K trained well (valid NDCG@10 0.189) at item std 0.006-0.010, under the one 0.01
    # line of every width: "spread low" each epoch, one dip from a COLLAPSE. Unit vectors spread ~1/sqrt(D) a dimension
    wide, narrow = _tight(0.003, d=512), _tight(0.003, d=64)
    before = {"item_std": 0.0035, "user_std": 0.05}
    with caplog.at_level("INFO", logger="twotower.training.diagnostics"):
        row = embedding_diagnostics(wide, _tight(0.05, d=512), earlier=[before])
    assert row["collapse_alarm"] is False and not caplog.records
    assert row["collapse_std"] == pytest.approx(COLLAPSE_STD / 8 ** 0.5)
    row = embedding_diagnostics(narrow, _tight(0.05, d=64), earlier=[before])
    assert row["collapse_alarm"] is True and row["collapse_std"] == COLLAPSE_STD  # the default width's line


def test_the_curves_draw_the_line_the_alarm_used(tmp_path):
    from twotower.training.plots import training_curves_figure

    history = [{"epoch": e, "loss": 5.0, "inbatch_accuracy": 0.1, "item_std": 0.006, "collapse_std": 0.0035}
               for e in (1, 2)]
    fig = training_curves_figure(history, tmp_path)
    ax = next(a for a in fig.axes if a.get_title() == "item embedding std")
    assert any(list(line.get_ydata()) == [0.0035, 0.0035] for line in ax.get_lines())


def test_a_healthy_spread_that_levels_off_near_0_01_is_no_collapse(caplog):
    # the transformer user tower with sequence examples on MovieLens-100K: item std 0.024 -> 0.011 over 5 epochs, then
    # 0.0100-0.0101 while valid NDCG@10 held at its best (0.055-0.058); a 0.0001 dip at epoch 11 fired "COLLAPSE ...
    # lower the learning rate". ML-1M's default reads 0.008-0.009 after its first epoch
    earlier = [{"epoch": 10, "item_std": 0.0101, "user_std": 0.0145}]
    with caplog.at_level("INFO", logger="twotower.training.diagnostics"):
        row = embedding_diagnostics(_tight(0.0099, d=64), _tight(0.014, d=64), earlier=earlier)
        ml1m = embedding_diagnostics(_tight(0.0085, d=64), _tight(0.03, d=64), earlier=[{"item_std": 0.0091}])
    assert row["collapse_alarm"] is False and ml1m["collapse_alarm"] is False
    assert not [r for r in caplog.records if r.levelname == "WARNING"]
