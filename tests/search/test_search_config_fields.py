"""BM25Config and MiningConfig built by hand: each field's type and range checked at construction, naming the field."""
from __future__ import annotations

import pytest

from twotower.errors import ConfigError
from twotower.search import BM25Config, MiningConfig


@pytest.mark.parametrize("kwargs, match", [
    ({"k1": "a"}, r"^k1: expected float, got 'a' \(str\)"),  # was a TypeError from "<"
    ({"b": None}, r"^b: expected float"),
    ({"method": 3}, r"^method: expected str"),
    ({"stemmer": 1}, r"^stemmer: expected"),
    ({"k1": float("nan")}, r"^k1: expected a finite number, got nan"),  # every query answered an empty list
    ({"k1": float("inf")}, r"^k1: expected a finite number, got inf"),
])
def test_bm25_config_refuses_a_bad_field(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        BM25Config(**kwargs)


@pytest.mark.parametrize("kwargs, match", [
    ({"n": "3"}, r"^MiningConfig\.n: expected int, got '3' \(str\)"),
    ({"depth": 2.5}, r"^MiningConfig\.depth: expected int"),
    ({"margin": float("nan")}, r"^MiningConfig\.margin: expected a finite number, got nan"),  # filtered nothing
])
def test_mining_config_refuses_a_bad_field(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        MiningConfig(**kwargs)


# named as the other configs name their settings (``train.lr: must be > 0``): "n must be >= 1, got 0" and
# "need 0 <= skip_top < depth, got skip_top=3, depth=3" read unlike every other refusal
@pytest.mark.parametrize("kwargs, message", [
    ({"n": 0}, "MiningConfig.n: must be >= 1, got 0"),
    ({"depth": 0}, "MiningConfig.depth: must be >= 1, got 0"),
    ({"skip_top": -1}, "MiningConfig.skip_top: must be >= 0, got -1"),
    ({"depth": 3, "skip_top": 3},
     "MiningConfig.skip_top: must be below MiningConfig.depth (3) to leave a candidate to mine, got 3"),
    ({"relative_margin": 1.5}, "MiningConfig.relative_margin: must be in [0, 1) or None, got 1.5"),
    ({"margin": -0.5}, "MiningConfig.margin: must be >= 0 or None, got -0.5"),
])
def test_mining_config_names_the_field_and_the_rule(kwargs, message):
    with pytest.raises(ConfigError) as e:
        MiningConfig(**kwargs)
    assert str(e.value) == message


def test_the_commands_still_name_their_flag_for_a_mining_field():
    """`search train` / `rerank train` build their MiningConfig with ``n`` from their own flags: the field's name,
    now said with its class, is still replaced by the flag the user typed."""
    import argparse

    from twotower.cli.search_cmd import _mining_config

    args = argparse.Namespace(mining_depth=30, mining_margin=0.05)
    with pytest.raises(ConfigError) as e:
        _mining_config(args, 0, "--negatives x --epochs")
    assert str(e.value) == "--negatives x --epochs: must be >= 1, got 0"


def test_good_values_are_kept_as_plain_numbers():
    import numpy as np

    cfg = BM25Config(k1=np.float32(0.9), b=1)
    assert type(cfg.k1) is float and cfg.b == 1.0 and type(cfg.b) is float
    assert MiningConfig(n=np.int64(2), margin=0.1).n == 2
