"""An empty new-user history is refused by every entry point, as `explain --history ""` and POST /explain refuse it:
``tt.explain_by_id(history=[])`` answered with the empty-history state's explanation (a popularity prior), and
``RecRequest(history=())`` / ``RecommenderService.explain(history=[])`` from Python with that list and explanation."""
from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

import twotower as tt
from twotower.cli.main import main
from twotower.errors import ConfigError

MESSAGE = r"^history: no item ids given; a new user.s history needs at least one item id"


def test_empty_history_is_refused_everywhere(mean_run, capsys) -> None:
    from twotower.serving import RecommenderService, create_app
    from twotower.serving.service import RecRequest

    run = mean_run
    item = run.item_vocab.ids[0]
    assert main(["explain", "--run", str(run.dir), "--history", "", "--item", item]) != 0
    assert "--history: no item ids given" in capsys.readouterr().err
    service = RecommenderService.load(run.dir)
    with TestClient(create_app(service=service)) as client:
        assert client.post("/explain", json={"history": [], "item_id": item}).status_code == 422
        assert client.post("/recommend", json={"history": []}).status_code == 422
    with pytest.raises(ConfigError, match=MESSAGE):
        tt.explain_by_id(run, history=[], item_id=item)
    with pytest.raises(ConfigError, match=r"^history_ids: no item ids given"):
        tt.explain_by_id(run, history_ids=[], item_id=item)
    with pytest.raises(ConfigError, match=MESSAGE):
        tt.recommend(run, history=[])
    with pytest.raises(ConfigError, match=MESSAGE):
        service.explain(history=[], item_id=item)
    with pytest.raises(ConfigError, match=MESSAGE):
        service.recommend(RecRequest(history=()))
    # a one-item history is still answered by each
    one = [run.item_vocab.ids[1]]
    assert tt.explain_by_id(run, history=one, item_id=item)["item_id"] == item
    assert service.recommend(RecRequest(history=tuple(one)))["items"]
