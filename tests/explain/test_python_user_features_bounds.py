"""``tt.recommend``, ``tt.explain_by_id`` and ``tt.explain_recommendation`` hold a new user's ``user_features`` to the
bounds of POST /recommend and RecommenderService (64 columns, names of 64 characters), in their words: the package's
Python API took any size, echoing a name of any length whole ("user_features.aaaa...: not a user feature")."""
from __future__ import annotations

import pytest

import twotower as tt
from twotower.errors import ConfigError
from twotower.serving.settings import MAX_FIELD_NAME_CHARS, MAX_USER_FEATURES

MANY = {"age": 30, **{f"c{i}": 1 for i in range(MAX_USER_FEATURES)}}
LONG = {"age": 25, "a" * (MAX_FIELD_NAME_CHARS + 1): 1}
WORDS = {"many": (MANY, f"user_features: must hold at most {MAX_USER_FEATURES} columns, got {MAX_USER_FEATURES + 1}"),
         "long": (LONG, f"user_features: a column name must be at most {MAX_FIELD_NAME_CHARS} characters, "
                        f"got {MAX_FIELD_NAME_CHARS + 1}")}


@pytest.mark.parametrize("case", sorted(WORDS))
def test_the_python_api_refuses_in_the_services_words(feature_run, case) -> None:
    features, said = WORDS[case]
    run = feature_run
    item = run.item_vocab.ids[0]
    hist = [run.item_vocab.ids[r] for r in run.history.of(2)]
    calls = []
    for history in (hist, []):  # with a history, and a user with no history yet (features alone)
        calls += [lambda h=history: tt.recommend(run, history=h, user_features=features, k=3),
                  lambda h=history: tt.explain_by_id(run, history=h, item_id=item, user_features=features)]
    calls.append(lambda: tt.explain_recommendation(run, history_rows=list(run.history.of(2)), item_row=0,
                                                   user_features=features))
    for call in calls:
        with pytest.raises(ConfigError) as e:
            call()
        assert str(e.value) == said and "a" * (MAX_FIELD_NAME_CHARS + 1) not in str(e.value)


def test_features_within_the_bounds_are_still_served(feature_run) -> None:
    hist = [feature_run.item_vocab.ids[r] for r in feature_run.history.of(2)]
    assert len(tt.recommend(feature_run, history=hist, user_features={"age": 30}, k=3)[0]) == 3
