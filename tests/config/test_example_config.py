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


def _listed_choices() -> list[tuple[str, str, list[str]]]:
    """(example file, dotted key, choices) of every ``key = value  # a | b | c`` line of examples/*.toml."""
    import re

    found = []
    for path in sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.toml")):
        section = ""
        for line in path.read_text().splitlines():
            head = re.match(r"^\[([\w.]+)\]", line)
            if head:
                section = head.group(1)
            m = re.match(r'^(\w+)\s*=\s*"[^"]*"\s*#\s*([\w-]+(?:\s*\|\s*[\w-]+)+)', line)
            if m:
                found.append((path.name, f"{section}.{m.group(1)}", [c.strip() for c in m.group(2).split("|")]))
    return found


def test_the_examples_list_every_choice_the_config_takes():
    """examples/movielens.toml listed `none | mean | recency` for model.user.history (no transformer, gru),
    `inbatch | full | bpr` for loss.kind (no sampled) and `causal | denoising | both` for train.examples (no
    sequence): the choices a user reads must be the ones the dataclasses accept, all of them."""
    import re

    import pytest

    from twotower.errors import ConfigError

    listed = _listed_choices()
    assert len(listed) >= 6
    for name, key, choices in listed:
        with pytest.raises(ConfigError) as e:
            load_config(None, [f"{key}=not-a-choice"])
        accepted = re.search(r"is not one of ([^;]+)", str(e.value)).group(1).split(", ")
        assert choices == accepted, (name, key)


def test_the_movielens_example_states_the_defaults():
    """The example repeats default values: it must say what the dataclasses hold, so a changed default cannot
    leave it stating another."""
    root = Path(__file__).resolve().parents[2]
    assert load_config(root / "examples" / "movielens.toml") == load_config(None, ["data.dataset=movielens-100k"])
