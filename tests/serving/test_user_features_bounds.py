"""A new user's ``user_features`` over the HTTP schema's bounds (more than 64 columns, a column name over 64
characters) is refused by `twotower recommend/explain --user-features` and by RecommenderService from Python in the
words of HTTP's 422: only HTTP held them, and the others answered "user_features.aaaa...: not a user feature of this
run", echoing a name of any length whole (or, on a run reading that many columns, served it)."""
from __future__ import annotations

import json

import pytest

from twotower.cli.main import main
from twotower.errors import ConfigError
from twotower.serving import RecRequest
from twotower.serving.settings import MAX_FIELD_NAME_CHARS, MAX_USER_FEATURES

MANY = {f"c{i}": 1 for i in range(MAX_USER_FEATURES + 1)}
LONG = {"age": 25, "a" * (MAX_FIELD_NAME_CHARS + 1): 1}
WORDS = {"many": (MANY, f"must hold at most {MAX_USER_FEATURES} columns, got {MAX_USER_FEATURES + 1}"),
         "long": (LONG, f"a column name must be at most {MAX_FIELD_NAME_CHARS} characters, got {MAX_FIELD_NAME_CHARS + 1}")}


@pytest.mark.parametrize("case", sorted(WORDS))
def test_every_surface_refuses_in_one_wording(run_dir, service, client, capsys, case) -> None:
    features, said = WORDS[case]
    for path, body in (("/recommend", {"history": ["i1"], "user_features": features}),
                       ("/explain", {"history": ["i1"], "user_features": features, "item_id": "i2"})):
        r = client.post(path, json=body)
        assert r.status_code == 422 and r.json()["error"]["message"] == f"body.user_features: {said}", r.text
    r = client.post("/recommend/batch", json={"requests": [{"history": ["i1"], "user_features": features}]})
    assert r.json()["error"]["message"] == f"body.requests[0].user_features: {said}"

    for call in (lambda: service.recommend(RecRequest(history=("i1",), user_features=features)),
                 lambda: service.explain(history=["i1"], item_id="i2", user_features=features)):
        with pytest.raises(ConfigError) as e:
            call()
        assert str(e.value) == f"user_features: {said}"
    with pytest.raises(ConfigError) as e:
        service.recommend_batch([RecRequest(user_id="u1"), RecRequest(history=("i1",), user_features=features)])
    assert str(e.value).startswith(f"requests[1].user_features: {said}")

    for cmd in (["recommend"], ["explain", "--item", "i2"]):
        capsys.readouterr()
        assert main([cmd[0], "--run", str(run_dir), *cmd[1:], "--history", "i1", "--user-features",
                     json.dumps(features)]) != 0
        err = capsys.readouterr().err
        assert f"error: --user-features: {said}" in err and "a" * 65 not in err


def test_features_at_the_bounds_pass_the_size_check(service) -> None:
    """64 columns with 64-character names are within the bounds: what is refused then is the run's own check (this
    run reads no user features), not the size."""
    features = {f"{i:02d}" + "c" * (MAX_FIELD_NAME_CHARS - 2): 1 for i in range(MAX_USER_FEATURES)}
    service.check_sizes(user_features=features)  # no error
