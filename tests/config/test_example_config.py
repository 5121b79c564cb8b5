from pathlib import Path

from twotower.config import load_config


def test_example_config_is_valid():
    cfg = load_config(Path(__file__).resolve().parents[2] / "examples" / "movielens.toml")
    assert cfg.data.dataset == "movielens-100k"
    assert cfg.model.user.history == "recency"
