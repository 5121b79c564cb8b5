"""Tower sizes the built model does not read are warned of at start-up (models/unread.py), in the wording of the
sequence sizes' warnings (tests/config/test_seq_heads_scope.py): `model.user.recency_decay` beside history=mean,
`model.user.extra_pools` beside a sequence history, `id_dim` beside use_id=false, and the item tower's history sizes
where a config file or an override set them. Each trained without a word."""
from __future__ import annotations

from pathlib import Path

import pytest

from twotower.config import ModelConfig, TowerConfig, load_config

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _warned(overrides: list[str], path: str | None = None) -> list[str]:
    from twotower.models.unread import unread_tower_sizes

    return [s.split("=", 1)[0] for s in unread_tower_sizes(load_config(path, overrides).model)]


@pytest.mark.parametrize("overrides, warned", [
    (["model.user.history=mean", "model.user.recency_decay=0.5"], ["model.user.recency_decay"]),
    (["model.user.history=transformer", "model.user.recency_decay=0.5"], ["model.user.recency_decay"]),
    (["model.user.recency_decay=0.5"], []),  # the default recency pool reads it
    (["model.user.history=transformer", "model.user.extra_pools=[0.5]"], ["model.user.extra_pools"]),
    (["model.user.history=gru", "model.user.extra_pools=[1.0, 0.5]"], ["model.user.extra_pools"]),
    # the user tower's default [1.0], inherited by every sequence config (--print-config shows it), and [] (none)
    (["model.user.history=transformer"], []),
    (["model.user.history=transformer", "model.user.extra_pools=[]"], []),
    (["model.user.history=mean", "model.user.extra_pools=[0.5]"], []),
    (["model.user.id_dim=32"], ["model.user.id_dim"]),  # the default user tower learns no ID embedding
    (["model.user.use_id=true", "model.user.id_dim=32"], []),
    (["model.item.use_id=false", "model.item.id_dim=32"], ["model.item.id_dim"]),
    (["model.item.history_len=100", "model.item.seq_heads=2"], ["model.item.history_len", "model.item.seq_heads"]),
    (["model.item.history_dim=64"], []),  # at its default
    (["model.user.history=gru", "model.user.seq_heads=2"], ["model.user.seq_heads"]),  # the sequence sizes' as before
])
def test_a_set_and_unread_tower_size_warns(overrides, warned):
    assert _warned(overrides) == warned


def test_the_wordings_name_the_setting_what_ignores_it_and_the_ways_out():
    from twotower.models.unread import unread_tower_sizes

    said = unread_tower_sizes(load_config(None, ["model.user.history=mean", "model.user.recency_decay=0.5",
                                                 "model.user.extra_pools=[0.5]", "model.item.history_len=100"]).model)
    assert said == [
        "model.user.recency_decay=0.5 has no effect: only the recency history pool reads it, and model.user.history=mean "
        "would ignore it; set model.user.history=recency to use it, or drop model.user.recency_decay (from a config file's settings: "
        "model.user.recency_decay=0.9, its default)",
        "model.item.history_len=100 has no effect: only the user tower reads a history, and the item tower would ignore "
        "it; set model.user.history_len=100 if the user tower's was meant, or drop model.item.history_len (from a config file's settings: "
        "model.item.history_len=50, its default)",
    ]
    said = unread_tower_sizes(load_config(None, ["model.user.history=transformer", "model.user.extra_pools=[0.5]"]).model)
    assert said == ["model.user.extra_pools=[0.5] has no effect: only the pooled histories (mean, recency) read it, and "
                    "model.user.history=transformer would ignore it; set model.user.history=mean or recency to use it, "
                    "or drop model.user.extra_pools (from a config file's settings: model.user.extra_pools=[1.0], its default)"]


def test_a_gru_from_the_sasrec_example_is_told_how_to_quiet_its_transformer_sizes():
    """README's GRU from examples/sasrec.toml: the file's seq_heads = 2 cannot be dropped on the command line, and the
    warning said only "drop model.user.seq_heads"; its default given as an override quiets it."""
    from twotower.models.unread import unread_tower_sizes

    gru = ["model.user.history=gru", "model.user.seq_positions=right"]
    said = unread_tower_sizes(load_config(str(EXAMPLES / "sasrec.toml"), gru).model)
    assert len(said) == 1 and said[0].endswith(
        "or drop model.user.seq_heads (from a config file's settings: model.user.seq_heads=1, its default)"), said
    assert unread_tower_sizes(load_config(str(EXAMPLES / "sasrec.toml"), [*gru, "model.user.seq_heads=1"]).model) == []


def test_the_item_tower_s_history_sizes_warn_from_a_config_file_but_not_from_one_python_dict(tmp_path):
    from twotower.models.unread import unread_tower_sizes

    path = tmp_path / "run.toml"
    path.write_text("[model.item]\nhistory_len = 20\nrecency_decay = 0.5\n")
    assert _warned([], str(path)) == ["model.item.history_len", "model.item.recency_decay"]
    # config.py keeps the history sizes free on both towers for a config built in Python from one dict of sizes
    sizes = dict(history_len=20, history_dim=32, recency_decay=0.5, out_dim=32)
    model = ModelConfig(user=TowerConfig(history="recency", **sizes), item=TowerConfig(**sizes))
    assert unread_tower_sizes(model) == []
    # nor do the shipped examples warn
    assert _warned([], str(EXAMPLES / "sasrec.toml")) == [] and _warned([], str(EXAMPLES / "movielens.toml")) == []


def test_training_warns_of_them_at_start_up(tmp_path, caplog):
    """`model.user.history=mean model.user.recency_decay=0.5` trained the mean pool as without it, without a word."""
    from tests.pipeline.test_far_off_temperature import FAST, _frames
    from twotower.pipeline.run import train_run

    cfg = load_config(None, [*FAST, "model.user.history=mean", "model.user.recency_decay=0.5",
                             "model.item.history_len=9"])
    with caplog.at_level("WARNING", logger="twotower.pipeline.run"):
        train_run(cfg, tmp_path / "r", frames=_frames())
    assert "model.user.recency_decay=0.5 has no effect: only the recency history pool reads it" in caplog.text
    assert "model.item.history_len=9 has no effect: only the user tower reads a history" in caplog.text
