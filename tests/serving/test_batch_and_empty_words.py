"""A batch whose ``requests`` is no list, an empty one or holds a non-object, and an id sent empty, are refused in
the service's words naming the field (``body.requests[0]: must be a JSON object {...}, got null; ...``): they were
pydantic's "Input should be a valid list", "List should have at least 1 item after validation, not 0", "Input
should be a valid dictionary or object to extract fields from" and "String should have at least 1 character"."""
from __future__ import annotations

import pytest

BATCH = '[{"user_id": "42"}, {"history": ["50", "181"]}]'
ONE = 'send one, such as {"user_id": "42", "k": 10}'
USER = 'is empty ("" or only spaces); send a known user\'s id, or a new user\'s items as the history (item ids, oldest first) instead'
ITEM = 'is empty ("" or only spaces); send the id of an item of the run\'s catalogue'
IN_LIST = 'is empty ("" or only spaces), which is no item id; leave it out of the list'


def _refused(client, route: str, body: dict) -> dict:
    r = client.post(route, json=body)
    assert r.status_code == 422, r.text
    return r.json()["error"]


@pytest.mark.parametrize("requests, want", [
    ({}, f"body.requests: must be a list of requests, e.g. {BATCH}, got an object"),
    ("u1", f"body.requests: must be a list of requests, e.g. {BATCH}, got a string"),
    (None, f"body.requests: must be a list of requests, e.g. {BATCH}, got null"),
    ([], f"body.requests: must hold at least 1 request, got an empty list; send one per user, e.g. {BATCH}"),
    ([None], f"body.requests[0]: must be a JSON object {{...}}, got null; {ONE}"),
    ([{"user_id": "u1"}, 5], f"body.requests[1]: must be a JSON object {{...}}, got a number; {ONE}"),
    ([{"user_id": "u1"}, ["u2"]], f"body.requests[1]: must be a JSON object {{...}}, got an array; {ONE}"),
], ids=["object", "string", "null", "empty", "null-entry", "number-entry", "array-entry"])
def test_a_batch_of_the_wrong_shape_is_refused_naming_requests(client, requests, want) -> None:
    err = _refused(client, "/recommend/batch", {"requests": requests})
    assert err["message"] == want
    assert err["details"][0]["msg"] == want.split(": ", 1)[1]  # the details keep their shape: loc and msg
    assert err["details"][0]["loc"][:2] == ["body", "requests"]


@pytest.mark.parametrize("route, body, want", [
    ("/recommend", {"user_id": ""}, f"body.user_id: {USER}"),
    ("/recommend", {"user_id": "   "}, f"body.user_id: {USER}"),
    ("/recommend/batch", {"requests": [{"user_id": "u1"}, {"user_id": ""}]}, f"body.requests[1].user_id: {USER}"),
    ("/explain", {"user_id": "", "item_id": "i3"}, f"body.user_id: {USER}"),
    ("/similar-items", {"item_id": ""}, f"body.item_id: {ITEM}"),
    ("/explain", {"user_id": "u1", "item_id": " "}, f"body.item_id: {ITEM}"),
    ("/recommend", {"history": ["i1", ""]}, f"body.history[1]: {IN_LIST}"),
    ("/recommend", {"history": ["i1"], "exclude_items": [""]}, f"body.exclude_items[0]: {IN_LIST}"),
], ids=["user", "user-spaces", "batch-user", "explain-user", "similar-item", "explain-item", "history", "exclude"])
def test_an_empty_id_is_refused_as_empty_naming_its_field(client, route, body, want) -> None:
    err = _refused(client, route, body)
    assert err["message"] == want
    assert "at least 1 character" not in err["details"][0]["msg"]


@pytest.mark.parametrize("user", ["", "  "], ids=["empty", "spaces"])
def test_an_empty_user_id_is_refused_in_the_same_words_from_python_and_the_cli(run_dir, user, capsys) -> None:
    """`recommend --user ''`, tt.recommend and RecRequest said "unknown user ''", where HTTP said what to send."""
    import twotower as tt
    from twotower.cli.main import main
    from twotower.errors import ConfigError
    from twotower.serving.service import RecRequest

    with pytest.raises(ConfigError) as e:
        tt.recommend(tt.TrainedRun.load(run_dir), ["u1", user])
    assert str(e.value) == f"user_ids[1]: {USER}"
    with pytest.raises(ConfigError) as e:
        RecRequest(user_id=user)
    assert str(e.value) == f"user_id: {USER}"
    assert main(["recommend", "--run", str(run_dir), "--user", user]) == 2
    assert capsys.readouterr().err.strip() == f"error: --user: {USER.replace('as the history', 'as --history')}"


@pytest.mark.parametrize("user", ["", "  "], ids=["empty", "spaces"])
def test_an_empty_user_id_to_explain_is_refused_in_the_words_of_recommend(run_dir, service, user, capsys) -> None:
    """`explain --user ''`, tt.explain_by_id and RecommenderService.explain said "unknown user ''", where
    `recommend --user ''` and POST /explain said what to send."""
    import twotower as tt
    from twotower.cli.main import main
    from twotower.errors import ConfigError

    with pytest.raises(ConfigError) as e:
        tt.explain_by_id(tt.TrainedRun.load(run_dir), item_id="i3", user_id=user)
    assert str(e.value) == f"user_id: {USER}"
    with pytest.raises(ConfigError) as e:
        service.explain(item_id="i3", user_id=user)
    assert str(e.value) == f"user_id: {USER}"
    assert main(["explain", "--run", str(run_dir), "--user", user, "--item", "i3"]) == 2
    assert capsys.readouterr().err.strip() == f"error: --user: {USER.replace('as the history', 'as --history')}"
