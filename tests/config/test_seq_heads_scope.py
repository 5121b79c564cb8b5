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
