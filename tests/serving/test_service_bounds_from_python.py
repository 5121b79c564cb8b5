"""A Python caller of RecommenderService meets the bounds POST /recommend's schema sets (max_history, max_exclude,
max_batch, max_k, a filter's fields and values; an id, a filter value over 256 characters, a filter field's name over
64), refused in the words of HTTP's 422 (less its ``body.``): only the HTTP schema held them, and the same over-long
request from Python was answered (a long id: "unknown item 'xxx...'", echoing it whole)."""
from __future__ import annotations

import pytest

from twotower.errors import ConfigError
from twotower.serving import RecommenderService, RecRequest, ServiceSettings

SMALL = {"max_history": 2, "max_exclude": 2, "max_batch": 2, "max_k": 5}
MANY_FIELDS = {f"f{i}": ["x"] for i in range(17)}
LONG = "x" * 257  # one character over MAX_ID_CHARS
LONG_FIELD = {"f" * 65: ["x"]}  # a field name one character over MAX_FIELD_NAME_CHARS


def _rec(**kw):
    return lambda svc: svc.recommend(RecRequest(**kw))


CASES = {  # name: (path, body, the Python call of the same request)
    "max_history": ("/recommend", {"history": ["i1", "i2", "i3"]}, _rec(history=("i1", "i2", "i3"))),
    "max_exclude": ("/recommend", {"user_id": "u1", "exclude_items": ["i1", "i2", "i3"]},
                    _rec(user_id="u1", exclude_items=("i1", "i2", "i3"))),
    "max_batch": ("/recommend/batch", {"requests": [{"user_id": "u1"}] * 3},
                  lambda svc: svc.recommend_batch([RecRequest(user_id="u1")] * 3)),
    "max_history_in_a_batch": ("/recommend/batch", {"requests": [{"user_id": "u1"}, {"history": ["i1", "i2", "i3"]}]},
                               lambda svc: svc.recommend_batch([RecRequest(user_id="u1"),
                                                                RecRequest(history=("i1", "i2", "i3"))])),
    "max_k": ("/recommend", {"user_id": "u1", "k": 6}, _rec(user_id="u1", k=6)),
    "filter_fields": ("/recommend", {"user_id": "u1", "filters": MANY_FIELDS}, _rec(user_id="u1", filters=MANY_FIELDS)),
    "filter_values": ("/recommend", {"user_id": "u1", "filters": {"genres": ["x"] * 1001}},
                      _rec(user_id="u1", filters={"genres": ["x"] * 1001})),
    "similar_filter_fields": ("/similar-items", {"item_id": "i1", "filters": MANY_FIELDS},
                              lambda svc: svc.similar_items("i1", 5, MANY_FIELDS)),
    "similar_max_exclude": ("/similar-items", {"item_id": "i1", "exclude_items": ["i2", "i3", "i4"]},
                            lambda svc: svc.similar_items("i1", 5, exclude_items=["i2", "i3", "i4"])),
    "long_user_id": ("/recommend", {"user_id": LONG}, _rec(user_id=LONG)),
    "long_history_item": ("/recommend", {"history": ["i1", LONG]}, _rec(history=("i1", LONG))),
    "long_exclude_item": ("/recommend", {"user_id": "u1", "exclude_items": [LONG]},
                          _rec(user_id="u1", exclude_items=(LONG,))),
    "long_filter_value": ("/recommend", {"user_id": "u1", "filters": {"genres": ["Comedy", LONG]}},
                          _rec(user_id="u1", filters={"genres": ["Comedy", LONG]})),
    "long_filter_field": ("/recommend", {"user_id": "u1", "filters": LONG_FIELD}, _rec(user_id="u1", filters=LONG_FIELD)),
    "long_history_item_in_a_batch": ("/recommend/batch", {"requests": [{"user_id": "u1"}, {"history": [LONG]}]},
                                     lambda svc: svc.recommend_batch([RecRequest(user_id="u1"),
                                                                      RecRequest(history=(LONG,))])),
    "similar_long_item_id": ("/similar-items", {"item_id": LONG}, lambda svc: svc.similar_items(LONG, 5)),
    "similar_long_exclude_item": ("/similar-items", {"item_id": "i1", "exclude_items": [LONG]},
                                  lambda svc: svc.similar_items("i1", 5, exclude_items=[LONG])),
    "similar_long_filter_field": ("/similar-items", {"item_id": "i1", "filters": LONG_FIELD},
                                  lambda svc: svc.similar_items("i1", 5, LONG_FIELD)),
    "explain_long_item_id": ("/explain", {"user_id": "u1", "item_id": LONG},
                             lambda svc: svc.explain(user_id="u1", item_id=LONG)),
    "explain_long_history_item": ("/explain", {"history": [LONG], "item_id": "i1"},
                                  lambda svc: svc.explain(history=[LONG], item_id="i1")),
}

#: what each over-long string's refusal says, after the location: the length sent and the bound, never the string
LONG_WORDS = {"long_filter_field": "filters: a field name must be at most 64 characters, got 65",
              "similar_long_filter_field": "filters: a field name must be at most 64 characters, got 65",
              "long_history_item_in_a_batch": "requests[1].history[0]: must be at most 256 characters, got 257",
              "long_filter_value": "filters.genres[1]: must be at most 256 characters, got 257",
              "long_history_item": "history[1]: must be at most 256 characters, got 257"}


@pytest.fixture(scope="module")
def small_service(run_dir):
    return RecommenderService.load(run_dir, settings=ServiceSettings(**SMALL))


@pytest.mark.parametrize("case", sorted(CASES))
def test_python_is_refused_as_http_is(small_service, case) -> None:
    from fastapi.testclient import TestClient

    from twotower.serving import create_app

    path, body, call = CASES[case]
    with TestClient(create_app(service=small_service, settings=ServiceSettings(**SMALL))) as c:
        r = c.post(path, json=body)
    assert r.status_code == 422, r.text
    said = r.json()["error"]["message"]
    assert said.startswith("body.")
    with pytest.raises(ConfigError) as e:
        call(small_service)
    # a batch's Python refusal also says, as its other refusals do, that no request of it was answered
    note = "; the other requests were not answered" if case.endswith("_in_a_batch") else ""
    assert str(e.value) == said[len("body."):] + note
    if case in LONG_WORDS:
        assert said == f"body.{LONG_WORDS[case]}"
