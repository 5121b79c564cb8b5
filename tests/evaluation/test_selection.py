"""Choosing a model on validation: the mean over seeds decides, ties keep the listed order, noise is flagged."""
from __future__ import annotations

import math

import pytest

import twotower
from twotower.evaluation import choose_on_validation


def test_highest_mean_over_seeds_wins_not_the_best_single_seed():
    # b has the single best seed (0.30) but the lower mean (0.20 vs 0.22)
    c = choose_on_validation({"a": [0.22, 0.22, 0.22], "b": [0.30, 0.15, 0.15]})
    assert c.name == "a" and c.runner_up == "b"
    assert c.value == pytest.approx(0.22) and c.runner_up_value == pytest.approx(0.20)
    assert c.seeds == 3 and c.lead == pytest.approx(0.1)
    assert c.within_noise  # b's seeds spread by 0.087, more than the 0.02 lead
    assert "within seed noise" in c.text()


def test_a_clear_lead_is_not_flagged_as_noise():
    c = choose_on_validation({"pooled": [0.140, 0.141], "transformer": [0.190, 0.192]})
    assert c.name == "transformer" and not c.within_noise
    assert c.text().startswith("chosen on validation NDCG@10: transformer (0.1910, mean of 2 seeds) ahead of pooled")


def test_ties_go_to_the_first_listed_candidate():
    assert choose_on_validation({"default": 0.2, "heavy": 0.2}).name == "default"
    assert choose_on_validation({"heavy": 0.2, "default": 0.2}).name == "heavy"


def test_missing_and_nan_figures_are_ignored():
    c = choose_on_validation({"broken": [math.nan, None], "ok": [0.1], "none": None})
    assert c.name == "ok" and c.runner_up is None
    assert c.text().endswith("the only candidate")


def test_no_finite_figure_is_an_error_naming_the_candidates():
    with pytest.raises(ValueError, match="no candidate has a finite validation HR@10: x, y"):
        choose_on_validation({"x": [math.nan], "y": None}, metric="HR@10")


def test_exported_from_the_package():
    assert twotower.choose_on_validation is choose_on_validation


def test_per_seed_arrays_are_figures_and_other_inputs_are_named():
    import numpy as np

    from twotower.errors import ConfigError

    # an array of per-seed figures failed in float(): "only 0-dimensional arrays can be converted to Python scalars"
    c = choose_on_validation({"a": np.float32(0.1), "b": np.array([0.2, 0.3])})
    assert (c.name, c.seeds, c.runner_up) == ("b", 2, "a") and c.value == pytest.approx(0.25)
    # a string was read character by character: "could not convert string to float: '.'"
    with pytest.raises(ConfigError, match=r"^candidates\['a'\]: a validation figure or one per seed \(numbers\), "
                                          r"got '0.3'$"):
        choose_on_validation({"a": "0.3"})
    # evaluate_run's rows: "'list' object has no attribute 'items'"
    with pytest.raises(ConfigError, match=r"^candidates maps each model name to its validation figure\(s\), e.g. "
                                          r"\{row\['model'\]: row\['NDCG@10'\] for row in rows\}; got a list$"):
        choose_on_validation([{"model": "a", "NDCG@10": 0.1}])
