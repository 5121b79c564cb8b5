"""seq_heads splits history_dim only in the transformer: other towers do not read it, and are not refused over it."""
from __future__ import annotations

import pytest

from twotower.config import ConfigError, load_config


@pytest.mark.parametrize("history", ["recency", "mean", "gru"])
def test_seq_heads_not_dividing_history_dim_is_free_where_no_transformer_reads_it(history):
    cfg = load_config(None, [f"model.user.history={history}", "model.user.seq_heads=3"])
    assert cfg.model.user.history == history and cfg.model.user.seq_heads == 3


def test_the_transformer_still_refuses_it():
    with pytest.raises(ConfigError, match=r"model\.user\.seq_heads: history_dim 64 must be divisible by seq_heads 3"):
        load_config(None, ["model.user.history=transformer", "model.user.seq_heads=3"])
    assert load_config(None, ["model.user.history=transformer", "model.user.seq_heads=4"]).model.user.seq_heads == 4


def test_seq_heads_beside_a_gru_is_warned_of_at_start_up_naming_the_setting(tmp_path, caplog):
    """examples/sasrec.toml with model.user.history=gru kept its `seq_heads = 2` and trained the same GRU as
    without it, without a word. Warned of (a size, as loss.sampled_negatives is beside a loss that draws none),
    not refused: the settings above stay free to load."""
    from tests.pipeline.test_far_off_temperature import FAST, _frames
    from twotower.pipeline.run import train_run

    cfg = load_config(None, [*FAST, "model.user.history=gru", "model.user.seq_heads=2", "model.user.seq_layers=3"])
    with caplog.at_level("WARNING", logger="twotower.pipeline.run"):
        train_run(cfg, tmp_path / "r", frames=_frames())
    assert ("model.user.seq_heads=2 has no effect: only the transformer history encoder reads it, and "
            "model.user.history=gru would ignore it; set model.user.history=transformer to use it, or drop "
            "model.user.seq_heads") in caplog.text
    assert "seq_layers" not in caplog.text  # the GRU reads its layers


@pytest.mark.parametrize("overrides, unread", [
    (["model.user.history=gru", "model.user.seq_heads=2"], ["seq_heads"]),
    (["model.user.history=transformer", "model.user.seq_heads=2", "model.user.seq_layers=3"], []),
    (["model.user.history=gru", "model.user.seq_layers=3", "model.user.seq_dropout=0.1"], []),
    (["model.user.seq_layers=3", "model.user.seq_dropout=0.1"], ["seq_layers", "seq_dropout"]),  # pooled: none read
    (["model.user.history=mean", "model.user.seq_heads=1", "model.user.seq_layers=2"], []),  # at their defaults
    (["model.item.seq_heads=4"], []),  # the item tower reads no history: one dict of sizes for both stays free
])
def test_only_a_set_and_unread_sequence_size_warns(overrides, unread):
    from twotower.models.unread import unread_sequence_sizes

    said = unread_sequence_sizes(load_config(None, overrides).model.user)
    assert [s.split("=", 1)[0].removeprefix("model.user.") for s in said] == unread, said
    if unread and "history" not in " ".join(overrides):
        assert "model.user.history=recency would ignore it; set model.user.history=transformer or gru" in said[0]
