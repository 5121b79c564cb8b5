from pathlib import Path

from twotower.config import load_config


def test_example_config_is_valid():
    cfg = load_config(Path(__file__).resolve().parents[2] / "examples" / "movielens.toml")
    assert cfg.data.dataset == "movielens-100k"
    assert cfg.model.user.history == "recency"


def test_sasrec_example_config_is_valid():
    cfg = load_config(Path(__file__).resolve().parents[2] / "examples" / "sasrec.toml")
    assert cfg.model.user.history == "transformer" and cfg.train.examples == "sequence"
    assert cfg.model.item.id_dim == cfg.model.user.history_dim  # tied tables
    assert cfg.model.user.hidden == () and cfg.loss.kind == "full"
