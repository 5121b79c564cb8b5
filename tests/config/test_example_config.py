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


def test_sasrec_example_is_the_ml1m_benchmark_recipe():
    """The README points users to examples/sasrec.toml for the benchmark's figures: the two must not drift."""
    import sys

    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "bench"))
    try:
        import ml1m
    finally:
        sys.path.remove(str(root / "bench"))
    example = load_config(root / "examples" / "sasrec.toml")
    bench = load_config(overrides=list(ml1m.ROWS["transformer-full"]))
    assert example.model == bench.model
    assert example.loss == bench.loss
    assert example.train == bench.train
