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
    ({"n": "3"}, r"^n: expected int, got '3' \(str\)"),
    ({"depth": 2.5}, r"^depth: expected int"),
    ({"margin": float("nan")}, r"^margin: expected a finite number, got nan"),  # filtered nothing
])
def test_mining_config_refuses_a_bad_field(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        MiningConfig(**kwargs)


def test_good_values_are_kept_as_plain_numbers():
    import numpy as np

    cfg = BM25Config(k1=np.float32(0.9), b=1)
    assert type(cfg.k1) is float and cfg.b == 1.0 and type(cfg.b) is float
    assert MiningConfig(n=np.int64(2), margin=0.1).n == 2
