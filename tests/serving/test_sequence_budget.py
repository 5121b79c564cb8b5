"""A sequence tower's ad-hoc histories are encoded under the service's time budget.

On ML-1M (examples/sasrec.toml, one thread, a shared 2-core machine) `POST /recommend/batch` with 256
histories of 200 items answered 503 "needed more than 2 s of computation" after 7.9 s (12.4 s at 500 items):
the budget was checked only between filter values and explanation steps, so the transformer's passes over
every history ran to the end before the refusal, whatever the budget.
"""
from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient

from tests.synthetic import LOO_FAST, write_loo_split
from twotower.cli.main import main
from twotower.models.two_tower import CHECKED_ROWS
from twotower.pipeline.artifacts import TrainedRun


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    from twotower.serving import RecommenderService

    split = write_loo_split(tmp_path_factory.mktemp("loo"))
    out = tmp_path_factory.mktemp("run") / "run"
    assert main(["-q", "train", "--train", str(split / "train.csv"), "--valid", str(split / "valid.csv"),
                 "--out", str(out), "--epochs", "1", "--no-eval", "model.user.history=transformer",
                 "model.user.seq_layers=1", "model.user.seq_dropout=0.0", *LOO_FAST]) == 0
    return RecommenderService.load(TrainedRun.load(out), exact=True)


def _histories(service, n: int) -> list[list[str]]:
    ids = list(service.run.item_vocab.ids)
    return [[ids[(b + j) % len(ids)] for j in range(1 + b % 5)] for b in range(n)]


@pytest.fixture()
def encoded(service, monkeypatch) -> list[int]:
    """Rows the user tower has encoded, per pass."""
    tower = service.run.model.user_tower
    rows: list[int] = []
    forward = tower.forward

    def counting(user_rows, history=None, **kw):
        rows.append(int(history.shape[0]))
        return forward(user_rows, history, **kw)

    monkeypatch.setattr(tower, "forward", counting)
    return rows


def test_a_batch_of_histories_stops_at_the_budget(service, encoded, monkeypatch) -> None:
    from twotower.serving import create_app
    from twotower.serving.budget import BudgetExceeded, WorkBudget

    def over_budget_after_a_pass(budget: WorkBudget) -> None:
        if encoded:
            raise BudgetExceeded(f"{budget.what} needed more than the test's budget; {budget.hint}")

    monkeypatch.setattr(WorkBudget, "check", over_budget_after_a_pass)
    reqs = [{"history": h, "k": 3} for h in _histories(service, 4 * CHECKED_ROWS)]
    with TestClient(create_app(service=service)) as c:
        r = c.post("/recommend/batch", json={"requests": reqs})
    assert r.status_code == 503 and r.json()["error"]["type"] == "over_time_budget", r.text
    assert sum(encoded) <= CHECKED_ROWS, f"{sum(encoded)} of {len(reqs)} histories encoded past the budget"


def test_the_check_from_python_and_the_answers_it_leaves_alone(service, encoded) -> None:
    from twotower.serving import RecRequest

    reqs = [RecRequest(history=tuple(h), k=3) for h in _histories(service, 3 * CHECKED_ROWS)]
    calls: list[int] = []

    def check() -> None:
        calls.append(1)
        if len(calls) > 1:
            raise TimeoutError("budget")

    with pytest.raises(TimeoutError):
        service.recommend_batch(reqs, check=check)
    assert sum(encoded) <= CHECKED_ROWS
    # a check that never fires changes no list: the batch answers as each request alone does
    batch = service.recommend_batch(reqs, check=lambda: None)
    for req, got in zip(reqs, batch):
        alone = service.recommend(req)
        assert [i["item_id"] for i in got["items"]] == [i["item_id"] for i in alone["items"]]
        assert [i["score"] for i in got["items"]] == pytest.approx([i["score"] for i in alone["items"]], abs=1e-5)


def _long_histories(service, n: int) -> list[list[str]]:
    """``n`` histories that fill the tower's window (and more), each a different rotation of the catalogue."""
    ids = list(service.run.item_vocab.ids)
    return [[ids[(b + j) % len(ids)] for j in range(service.run.model.history_len + 4)] for b in range(n)]


def test_length_blocks_count_history_cells() -> None:
    from twotower.models.two_tower import length_blocks

    assert length_blocks(np.array([1, 2, 3, 4, 5]), 50, rows=2) == [(0, 2), (2, 4), (4, 5)]
    # 8-column windows (lengths rounded up to 8) fit 3 to a block of 24 cells; 200-column ones one each
    assert length_blocks(np.array([1, 3, 8, 8, 200, 200]), 200, rows=32, cells=24) == [(0, 3), (3, 4), (4, 5), (5, 6)]
    assert length_blocks(np.array([500, 500, 500]), 200, rows=32, cells=400) == [(0, 2), (2, 3)]  # the window caps


def test_a_block_of_long_histories_is_sized_by_its_cells(service, encoded, monkeypatch) -> None:
    """Checked every CHECKED_ROWS histories, 32 histories of 500 items were one block: 4.1 s under load against a
    2 s budget (examples/sasrec.toml, a 200-item window). A stubbed clock: each tower pass takes one second."""
    from twotower.models import two_tower
    from twotower.serving import ServiceSettings, create_app
    from twotower.serving import budget as budget_mod

    window = service.run.model.history_len
    monkeypatch.setattr(two_tower, "CHECKED_CELLS", 4 * window)  # four full windows a block
    clock = [0.0]
    monkeypatch.setattr(budget_mod, "monotonic", lambda: clock[0])
    tower = service.run.model.user_tower
    forward = tower.forward

    def one_second_a_pass(*a, **kw):
        clock[0] += 1.0
        return forward(*a, **kw)

    monkeypatch.setattr(tower, "forward", one_second_a_pass)
    reqs = [{"history": h, "k": 3} for h in _long_histories(service, 3 * CHECKED_ROWS)]
    with TestClient(create_app(service=service, settings=ServiceSettings(time_budget_s=1.5))) as c:
        r = c.post("/recommend/batch", json={"requests": reqs})
    assert r.status_code == 503 and r.json()["error"]["type"] == "over_time_budget", r.text
    assert "needed more than 1.5 s of computation" in r.json()["error"]["message"]
    assert "shorter histories" in r.json()["error"]["message"], r.json()["error"]["message"]
    assert sum(encoded) <= 2 * 4, f"{sum(encoded)} of {len(reqs)} long histories encoded past the budget"


def test_the_recommend_hint_names_histories_only_when_sent(service, monkeypatch) -> None:
    """The 503 said "ask for fewer items, ..., or no explain" when long histories were what ran over; it now says
    to send shorter ones (as POST /explain's does), and leaves them out for a known user's request."""
    from twotower.serving import ServiceSettings, create_app
    from twotower.serving import budget as budget_mod

    clock = [0.0]

    def ticking() -> float:  # every read of the clock is a second later: any request runs over
        clock[0] += 1.0
        return clock[0]

    monkeypatch.setattr(budget_mod, "monotonic", ticking)
    history = _long_histories(service, 1)[0]
    user = service.run.user_vocab.ids[0]
    with TestClient(create_app(service=service, settings=ServiceSettings(time_budget_s=0.5))) as c:
        for path, body in [("/recommend", {"history": history, "k": 3}),
                           ("/recommend/batch", {"requests": [{"user_id": user, "k": 3}, {"history": history}]})]:
            r = c.post(path, json=body)
            assert r.status_code == 503, r.text
            assert "send shorter histories" in r.json()["error"]["message"], (path, r.json()["error"]["message"])
        r = c.post("/recommend", json={"user_id": user, "k": 3})
        assert r.status_code == 503, r.text
        assert "histor" not in r.json()["error"]["message"], r.json()["error"]["message"]


def test_cell_sized_blocks_leave_the_answers_alone(service, monkeypatch) -> None:
    from twotower.models import two_tower
    from twotower.serving import RecRequest

    reqs = [RecRequest(history=tuple(h), k=5) for h in _long_histories(service, 12)]
    whole = service.recommend_batch(reqs)  # no check: blocks of up to 256 rows
    monkeypatch.setattr(two_tower, "CHECKED_CELLS", 3 * service.run.model.history_len)
    checked = service.recommend_batch(reqs, check=lambda: None)  # blocks of 3
    for got, want in zip(checked, whole):
        assert [i["item_id"] for i in got["items"]] == [i["item_id"] for i in want["items"]]
        assert [i["score"] for i in got["items"]] == pytest.approx([i["score"] for i in want["items"]], abs=1e-5)


def test_explain_stops_at_the_budget(service, monkeypatch) -> None:
    """POST /explain ran its one pass over the n + 2 history variants with no check inside: a 500-item history
    took 0.7 s idle, 3.0 s under load (examples/sasrec.toml), whatever the budget. A stubbed clock: each tower
    pass takes one second; the variants run in blocks (two a block here) with the budget checked between them."""
    from twotower.models import two_tower
    from twotower.serving import ServiceSettings, create_app
    from twotower.serving import budget as budget_mod

    monkeypatch.setattr(two_tower, "CHECKED_CELLS", 2 * service.run.model.history_len)
    clock = [0.0]
    monkeypatch.setattr(budget_mod, "monotonic", lambda: clock[0])
    tower = service.run.model.user_tower
    forward = tower.forward
    variants: list[int] = []

    def one_second_a_pass(user_rows, history=None, **kw):
        clock[0] += 1.0
        variants.append(int(history.shape[0]))
        return forward(user_rows, history, **kw)

    monkeypatch.setattr(tower, "forward", one_second_a_pass)
    history = _long_histories(service, 1)[0]
    item = service.run.item_vocab.ids[0]
    body = {"history": history, "item_id": item}
    with TestClient(create_app(service=service, settings=ServiceSettings(time_budget_s=1.5))) as c:
        r = c.post("/explain", json=body)
        assert r.status_code == 503, r.text
        err = r.json()["error"]
        assert err["type"] == "over_time_budget" and "POST /explain needed more than 1.5 s" in err["message"]
        assert "shorter history" in err["message"], err["message"]
        assert sum(variants) <= 2 * 2, variants
    # within budget: the blocks answer what one pass did (the same explanation as the CLI's, which has no check)
    monkeypatch.setattr(budget_mod, "monotonic", lambda: 0.0)
    with TestClient(create_app(service=service)) as c:
        got = c.post("/explain", json=body).json()["explanation"]
    from twotower.explain import explain_recommendation

    monkeypatch.setattr(two_tower, "CHECKED_CELLS", 10**6)  # one block
    rows = [service.catalog.row(i) for i in history]
    want = explain_recommendation(service.run, history_rows=rows, item_row=service.catalog.row(item))
    assert got["score"] == pytest.approx(want["score"], abs=1e-6)
    assert [h["item_id"] for h in got["history"]] == [h["item_id"] for h in want["history"]]
