"""Settings too large to mean anything are refused when the config is built, naming what the user typed."""
from __future__ import annotations

import pytest

from twotower.config import FinetuneConfig, LossConfig, RerankTrainConfig, load_config
from twotower.errors import ConfigError


def test_a_temperature_that_flattens_every_score_is_refused_naming_the_key():
    # 1e30 was accepted: every score / temperature was ~0 and the run trained nothing, without a word
    # said where it was given ("overrides: 'loss.temperature=1e30': "), as a config file's value names the file
    with pytest.raises(ConfigError, match=r"^overrides: 'loss\.temperature=1e30': loss\.temperature: must be at most "
                                          r"10,000 .*got 1e\+30"):
        load_config(overrides=["loss.temperature=1e30"])
    with pytest.raises(ConfigError, match=r"^loss\.temperature: must be at most"):
        LossConfig(temperature=1e6)
    assert LossConfig(temperature=10_000).temperature == 10_000  # still trains (measured at 1e4)


@pytest.mark.parametrize("cls", [FinetuneConfig, RerankTrainConfig])
def test_the_search_trainers_bound_their_temperature_too(cls):
    with pytest.raises(ConfigError, match=rf"^{cls.__name__}\.temperature: must be > 0 and at most 10,000 .*got 1e\+30"):
        cls(temperature=1e30)
    with pytest.raises(ConfigError, match=rf"^{cls.__name__}\.temperature: must be > 0"):
        cls(temperature=0.0)
    assert cls(temperature=100.0).temperature == 100.0


def test_search_config_bounds_k_as_the_search_flags_do():
    from twotower.config import SearchConfig

    # `search query --k 1e30` is refused at 10,000; SearchConfig(k=10**30) was taken
    with pytest.raises(ConfigError, match=r"^search\.k: must be at most 10,000, got 1,000,000,000,000,000,000,000,000,000,000$"):
        SearchConfig(k=10**30)
    with pytest.raises(ConfigError, match=r"^search\.rerank_top: must be at most 10,000"):
        SearchConfig(rerank_top=10_001)
    assert SearchConfig(k=10_000, rerank_top=10_000).k == 10_000


@pytest.mark.parametrize("over", ["loss.kind=sampled loss.sampled_negatives=1000000000000",
                                  "loss.uniform_negatives=1000000000000"])
def test_a_negative_count_no_batch_can_hold_is_refused_when_the_config_is_built(over):
    # 10**12 was accepted here and refused only once the data had loaded, by the memory check (17.5 PiB)
    key = over.split()[-1].split("=")[0]
    with pytest.raises(ConfigError, match=rf"^overrides: .*'{key}=1000000000000': {key}: must be at most 10,000,000 "
                                          r".*got 1,000,000,000,000$"):
        load_config(overrides=over.split())
    with pytest.raises(ConfigError, match=r"^loss\.sampled_negatives: must be at most 10,000,000"):
        LossConfig(kind="sampled", sampled_negatives=10**12)
    # a million-item sampled softmax stays the user's to ask for (the memory check sizes it against the machine)
    assert LossConfig(kind="sampled", sampled_negatives=1_000_000).sampled_negatives == 1_000_000
    assert LossConfig(uniform_negatives=10_000_000).uniform_negatives == 10_000_000


def test_an_item_item_weight_past_any_use_is_refused_before_training():
    """model.item_item.weights=[1e39] trained the whole run and then failed with a traceback ("RuntimeError: value
    cannot be converted to type float without overflow": the weight is a float32 parameter)."""
    from twotower.config import ItemItemConfig

    with pytest.raises(ConfigError, match=r"^overrides: 'model\.item_item\.weights=\[0, 1e39\]': model\.item_item\.weights: "
                                          r"each must be at most 1,000,000 .*got 1e\+39"):
        load_config(overrides=["model.item_item.weights=[0, 1e39]"])
    with pytest.raises(ConfigError, match=r"^model\.item_item\.weights: each must be at most 1,000,000"):
        ItemItemConfig(weights=(0.0, 1e30))
    assert ItemItemConfig(weights=(0.0, 1e6)).weights[-1] == 1e6
