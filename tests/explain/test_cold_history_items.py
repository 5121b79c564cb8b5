"""History items without training interactions: the user tower has not learned them (a pooled tower's own table
keeps their initial random rows, a sequence tower's tied ID table their zeroed ones), yet explanations named them
as reasons ("Because you watched Time Tracers (1995) and Great Day in Harlem, A (1994)", both such items) and
`recommend --history` used them without a word.

Then the warning said they "carry no learned signal into the list or the score" while their untrained rows were
pooled in and changed the list (MovieLens-100K: `--history 181` and `--history 2001,2002,181` shared none of their
top 4). Now every surface leaves them out of what the user tower reads: the list of [cold + trained] is the list of
[trained] (less the cold items, still excluded as seen), and a history of cold items alone reads as an empty one."""
from __future__ import annotations

import json
import logging
import re

import pandas as pd
import pytest
from fastapi.testclient import TestClient

import twotower as tt
from tests.explain.explain_tiny_run import N_ITEMS, train_tiny_run, write_tiny_data
from twotower.errors import ConfigError
from twotower.explain import explain_by_id, explain_recommendation
from twotower.pipeline.artifacts import TrainedRun

COLD = ("i30", "i31")
K = 5


NOTE = "history: 2 of its items had no training interactions ('i30', 'i31'): the user tower has not learned them"
LEFT_OUT = "so it leaves them out of the history it reads; the list and the score rest on the other items"
ALL_COLD = ("every item had no training interactions ('i30', 'i31'): the user tower has not learned them and leaves "
            "them out, so the history it reads is empty")


def _cold_run(tmp_path_factory, history: str, **kw) -> TrainedRun:
    tmp_path = tmp_path_factory.mktemp(f"cold_history_{history}")
    data = tmp_path / "run_data"
    write_tiny_data(data)
    for name in ("train.csv", "valid.csv"):  # the items stay in the item table, with no interactions
        rows = pd.read_csv(data / name)
        rows[~rows.item_id.isin(COLD)].to_csv(data / name, index=False)
    return TrainedRun.load(train_tiny_run(tmp_path / "run", history=history, epochs=1, write_data=False, **kw))


@pytest.fixture(scope="module")
def cold_run(tmp_path_factory) -> TrainedRun:
    """Recency pooling over the tower's own history table, with a user feature (age)."""
    return _cold_run(tmp_path_factory, "recency", user_features=True)


def _listed(items: list[dict]) -> list[tuple[str, float]]:
    return [(h["item_id"], h["score"]) for h in items]


def _warm_list(run: TrainedRun, history: list[str], **kw) -> list[tuple[str, float]]:
    """The list of ``history`` (no cold item) with the cold items left out as seen, as a history holding them gives."""
    whole = tt.recommend(run, history=history, k=N_ITEMS, exact=True, **kw)[0]
    return _listed([h for h in whole if h["item_id"] not in COLD][:K])


def test_cold_history_items_leave_the_list_as_it_is_on_every_surface(cold_run, capsys) -> None:
    from twotower.cli.main import main
    from twotower.serving import RecommenderService, create_app

    run = cold_run
    want = _warm_list(run, ["i1", "i2"])
    given = ["i30", "i1", "i31", "i2"]
    assert _listed(tt.recommend(run, history=given, k=K, exact=True)[0]) == want
    with TestClient(create_app(service=RecommenderService.load(run.dir, exact=True))) as client:
        answer = client.post("/recommend", json={"history": given, "k": K}).json()
        batch = client.post("/recommend/batch", json={"requests": [{"history": given, "k": K},
                                                                    {"history": ["i1", "i2"], "k": K}]}).json()
    assert _listed(answer["items"]) == want
    assert _listed(batch["results"][0]["items"]) == want
    assert any(w.startswith(NOTE) and LEFT_OUT in w for w in answer["warnings"])
    capsys.readouterr()
    assert main(["recommend", "--run", str(run.dir), "--history", ",".join(given), "--k", str(K), "--json",
                 "--exact"]) == 0
    out = capsys.readouterr()
    assert _listed(json.loads(out.out)["items"]) == want
    assert LEFT_OUT in out.err
    # the features go with the history read without the cold items too
    features = {"age": 33}
    assert _listed(tt.recommend(run, history=given, user_features=features, k=K, exact=True)[0]) == \
        _warm_list(run, ["i1", "i2"], user_features=features)


def test_cold_history_items_are_still_left_out_of_the_list_as_seen(cold_run) -> None:
    listed = {h["item_id"] for h in tt.recommend(cold_run, history=["i30", "i31", "i1"], k=N_ITEMS, exact=True)[0]}
    assert not listed & {*COLD, "i1"}
    shown = {h["item_id"] for h in tt.recommend(cold_run, history=["i30", "i31", "i1"], k=N_ITEMS, exact=True,
                                                exclude_seen=False)[0]}
    assert set(COLD) <= shown


def test_a_history_of_cold_items_alone_reads_as_an_empty_one(cold_run, capsys) -> None:
    """Refused without user features, in the empty history's words with why; served from the features alone with
    them, as `history=[]` with them is."""
    from twotower.cli.main import main
    from twotower.serving import RecommenderService, create_app

    run = cold_run
    with pytest.raises(ConfigError, match=re.escape(f"history: {ALL_COLD}; a new user's history needs at least one "
                                                    "item with training interactions")):
        tt.recommend(run, history=list(COLD), k=K, exact=True)
    with pytest.raises(ConfigError, match=re.escape(ALL_COLD)):
        explain_by_id(run, history=list(COLD), item_id="i5")
    features = {"age": 33}
    want = _listed(tt.recommend(run, history=[], user_features=features, k=N_ITEMS, exact=True)[0])
    want = [x for x in want if x[0] not in COLD][:K]
    assert _listed(tt.recommend(run, history=list(COLD), user_features=features, k=K, exact=True)[0]) == want
    with TestClient(create_app(service=RecommenderService.load(run.dir, exact=True))) as client:
        refused = client.post("/recommend", json={"history": list(COLD), "k": K})
        served = client.post("/recommend", json={"history": list(COLD), "user_features": features, "k": K}).json()
        explained = client.post("/explain", json={"history": list(COLD), "item_id": "i5"})
    assert refused.status_code == 422 and ALL_COLD in refused.text
    assert explained.status_code == 422 and ALL_COLD in explained.text
    assert _listed(served["items"]) == want
    assert any("none is left, so the list and the score rest on the user's features alone" in w for w in served["warnings"])
    capsys.readouterr()
    assert main(["recommend", "--run", str(run.dir), "--history", "i30,i31", "--k", str(K)]) == 2
    assert f"--history: {ALL_COLD}" in capsys.readouterr().err
    e = explain_by_id(run, history=list(COLD), item_id="i5", user_features=features)
    assert [h["item_id"] for h in e["history_left_out"]] == list(COLD) and e["history"] == []
    assert e["basis"] == "features" and e["text"].startswith("The model has learned no item of your history")


def test_explanations_list_cold_history_items_as_left_out_never_as_reasons(cold_run, capsys, caplog) -> None:
    """Python, POST /explain and `explain` alike: the score is the one of the history without them, they have no
    contribution, and they are listed in history_left_out."""
    from twotower.cli.main import main
    from twotower.serving import RecommenderService, create_app

    run = cold_run
    item = run.item_vocab.index("i5")
    warm = explain_recommendation(run, history_rows=[run.item_vocab.index("i1")], item_row=item, top=10)
    e = explain_recommendation(run, history_rows=[run.item_vocab.index(i) for i in (*COLD, "i1")], item_row=item,
                               top=10)
    assert e["score"] == warm["score"] and e["rank"] == warm["rank"]
    assert [h["item_id"] for h in e["history"]] == ["i1"]
    assert [h["item_id"] for h in e["history_left_out"]] == list(COLD) and warm["history_left_out"] == []
    for i in COLD:
        assert f"Film {i[1:]}" not in e["text"], e["text"]
    with TestClient(create_app(service=RecommenderService.load(run.dir))) as client:
        answer = client.post("/explain", json={"history": [*COLD, "i1"], "item_id": "i5"}).json()
        inline = client.post("/recommend", json={"history": [*COLD, "i1"], "k": 1, "explain": True}).json()
    assert answer["explanation"]["score"] == warm["score"]
    assert [h["item_id"] for h in answer["explanation"]["history_left_out"]] == list(COLD)
    assert any(w.startswith(NOTE) for w in answer["warnings"])
    assert [h["item_id"] for h in inline["items"][0]["explanation"]["history_left_out"]] == list(COLD)
    args = ["explain", "--run", str(run.dir), "--history", "i30,i31,i1", "--item", "i5", "--top", "3"]
    capsys.readouterr()
    assert main([*args, "--json"]) == 0
    out = capsys.readouterr()
    printed = json.loads(out.out)
    assert printed["score"] == warm["score"] and [h["item_id"] for h in printed["history_left_out"]] == list(COLD)
    assert [w for w in printed["warnings"] if w.startswith(NOTE)]
    assert f"warning: --{NOTE}" in out.err
    assert main(args) == 0
    out = capsys.readouterr()
    assert f"warning: --{NOTE}" in out.err
    assert ("left out of the history (no training interactions: the user tower has not learned them): "
            "i30 Film 30 (2010), i31 Film 31 (2011)") in out.out
    with caplog.at_level(logging.WARNING, logger="twotower"):
        explain_by_id(run, history=["i30", "i31", "i1"], item_id="i5")
    assert [r for r in caplog.records if r.getMessage().startswith(NOTE)]


def _inputs(tmp_path, name: str, items: list[str]):
    path = tmp_path / name  # u1's input history, and u2's (which holds no cold item)
    rows = [("u1", i, t) for t, i in enumerate(items, start=1)] + [("u2", "i3", 1)]
    pd.DataFrame(rows, columns=["user_id", "item_id", "timestamp"]).assign(rating=4).to_csv(path, index=False)
    return path


def test_a_known_users_input_history_leaves_cold_items_out_as_a_new_users(cold_run, tmp_path, capsys,
                                                                          caplog) -> None:
    """One rule for a history whoever sends it (the decision on the walker's report): `--history-from` read a known
    user's cold items through rows training never updated (a different list than the same history sent as a new
    user's, no warning), and `evaluate --history-from` measured that. Now recommend (Python, CLI, serve), explain
    and evaluate read the input history without them, the list and the score are those of the other items, the
    items still count as seen, and each surface warns. This pinned the old reading (cold items kept, marked)."""
    from twotower.cli.main import main
    from twotower.pipeline.histories import HistoryScorer, read_input_histories
    from twotower.serving import RecommenderService, create_app

    run = cold_run
    given, warm = _inputs(tmp_path, "given.csv", ["i30", "i1", "i31", "i2"]), _inputs(tmp_path, "warm.csv", ["i1", "i2"])
    whole = tt.recommend(run, ["u1"], history_from=str(warm), k=N_ITEMS, exact=True)[0]
    want = _listed([h for h in whole if h["item_id"] not in COLD][:K])
    with caplog.at_level(logging.WARNING, logger="twotower"):
        assert _listed(tt.recommend(run, ["u1"], history_from=str(given), k=K, exact=True)[0]) == want
    assert any("2 rows of 1 user are of 2 items with no training interactions" in r.getMessage()
               for r in caplog.records)
    # evaluate --history-from reads the users' vectors through the same scorer
    users = [run.user_vocab.index("u1"), run.user_vocab.index("u2")]
    scorer = HistoryScorer(run, read_input_histories(run, str(given)))
    assert (scorer.user_vectors(users) == HistoryScorer(run, read_input_histories(run, str(warm))).user_vectors(users)).all()
    with TestClient(create_app(service=RecommenderService.load(run.dir, exact=True, history_from=str(given)))) as client:
        answer = client.post("/recommend", json={"user_id": "u1", "k": K}).json()
        explained = client.post("/explain", json={"user_id": "u1", "item_id": "i5"}).json()
    assert _listed(answer["items"]) == want
    said = "user_id: 'u1', history in the serve --history-from files: 2 of its items had no training interactions"
    assert any(w.startswith(said) for w in answer["warnings"]) and any(w.startswith(said) for w in explained["warnings"])
    assert [h["item_id"] for h in explained["explanation"]["history_left_out"]] == list(COLD)
    py = explain_by_id(run, user_id="u1", item_id="i5", history_from=str(given))
    assert py["score"] == explain_by_id(run, user_id="u1", item_id="i5", history_from=str(warm))["score"]
    assert py["score"] == explained["explanation"]["score"]
    capsys.readouterr()
    assert main(["recommend", "--run", str(run.dir), "--user", "u1", "--history-from", str(given), "--k", str(K),
                 "--json", "--exact"]) == 0
    out = capsys.readouterr()
    assert _listed(json.loads(out.out)["items"]) == want
    assert "warning: user u1's history in the --history-from files: 2 of its items had no training" in out.err
    assert main(["explain", "--run", str(run.dir), "--user", "u1", "--history-from", str(given), "--item",
                 "i5", "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert ("left out of the history (no training interactions: the user tower has not learned them): "
            "i30 Film 30 (2010), i31 Film 31 (2011)") in out


def test_a_known_users_input_history_of_cold_items_alone_is_said_to_read_as_empty(cold_run, tmp_path) -> None:
    """It was told "the list and the score rest on the user's features alone", a new user's words, by a run without
    user features: a known user whose input rows are all untrained is ranked from an empty input history."""
    from twotower.serving import RecommenderService
    from twotower.serving.service import RecRequest

    service = RecommenderService.load(cold_run.dir, exact=True, history_from=str(_inputs(tmp_path, "c.csv",
                                                                                        ["i30", "i31"])))
    warnings = service.recommend_batch([RecRequest(user_id="u1", k=K)])[0]["warnings"]
    said = [w for w in warnings if "no training interactions" in w]
    assert len(said) == 1 and said[0].endswith("none is left, so the user is ranked from an empty input history (as "
                                               "a user with no rows there), not from their training history"), said


def test_input_histories_of_cold_items_alone_are_counted_and_warned_of_on_every_surface(cold_run, tmp_path, capsys,
                                                                                         caplog) -> None:
    """A known user whose --history-from rows are all of items without training interactions is read as an empty
    history, yet `evaluate --history-from` counted 0 in users_empty_input_history with no warning, and `recommend
    --users` (and tt.recommend) said nothing, while `recommend --user` warned: each counts and warns of them now."""
    from twotower.cli.main import main
    from twotower.pipeline.evaluate_run import evaluate_run

    given = _inputs(tmp_path, "c.csv", ["i30", "i31"])  # u1: untrained items alone; u2: i3
    said = ("1 of 2 users have no rows of known items in the {} files (e.g. user u1; 1 of them holds only items "
            "without training interactions, which the user tower leaves out): each is ranked from an empty input "
            "history, not from their training history")
    assert main(["recommend", "--run", str(cold_run.dir), "--users", "u1,u2", "--history-from", str(given),
                 "--k", str(K), "--exact"]) == 0
    assert said.format("--history-from") in capsys.readouterr().err
    with caplog.at_level(logging.WARNING, logger="twotower"):
        tt.recommend(cold_run, ["u1", "u2"], history_from=str(given), k=K, exact=True)
    assert said.format("history_from") in caplog.text
    test = tmp_path / "test.csv"
    pd.DataFrame({"user_id": ["u1", "u2"], "item_id": ["i4", "i5"], "timestamp": [90, 90]}).to_csv(test, index=False)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="twotower"):
        rows = evaluate_run(cold_run, baselines=("popularity",), ks=(5,), history_from=[given], test_file=test)
    assert {r["users_empty_input_history"] for r in rows} == {1}
    assert ("1 of 2 evaluated users have no rows of known items in the history files" in caplog.text
            and "(e.g. user 'u1'; 1 of them holds only items without training interactions" in caplog.text)


def test_the_served_examples_history_holds_trained_items_only(cold_run, tmp_path) -> None:
    """`serve --history-from` took GET /examples' and the docs' ad-hoc history from the longest input history, whose
    last items may have no training interactions: a body of only such items was refused (422)."""
    from twotower.pipeline.histories import read_input_histories
    from twotower.serving.examples import example_ids

    seqs = read_input_histories(cold_run, str(_inputs(tmp_path, "in.csv", ["i1", "i2", "i3", "i30", "i31"]))).sequences
    found = example_ids(cold_run, histories=seqs)
    assert found["users"][0] == {"user_id": "u1", "n_history": 5}
    assert found["history"] == ["i1", "i2", "i3"]
    only_cold = read_input_histories(cold_run, str(_inputs(tmp_path, "c.csv", ["i30", "i31"]))).sequences
    assert example_ids(cold_run, histories=only_cold)["history"] == ["i3"]  # u1's all untrained: the next user's


def test_input_histories_are_freed_once_the_caller_drops_them(cold_run, tmp_path) -> None:
    """The cache of histories as the tower reads them held, for the usual histories (no cold item), the histories
    themselves as its value: a weak key its own value keeps alive, so a host calling tt.recommend(history_from=...)
    kept every file's histories (and the user vectors cached on them), ~7.6 MiB a call at 500,000 rows."""
    import gc
    import weakref

    from twotower.pipeline.histories import read_input_histories, sequences_as_read

    refs = []
    for items in (["i1", "i2"], ["i30", "i1"]):  # without cold items, and with them
        seqs = read_input_histories(cold_run, str(_inputs(tmp_path, "in.csv", items))).sequences
        sequences_as_read(cold_run, seqs)
        refs.append(weakref.ref(seqs))
        del seqs
    gc.collect()
    assert [r() for r in refs] == [None, None]


def test_a_sequence_tower_leaves_them_out_too(tmp_path_factory) -> None:
    """A GRU reading its history through the item tower's ID table (tied): a cold item's row is zero there, yet as
    a step of the sequence it moved the state, and the list."""
    run = _cold_run(tmp_path_factory, "gru")
    assert run.model.user_tower.tied_tables
    assert _listed(tt.recommend(run, history=["i30", "i1", "i31", "i2"], k=K, exact=True)[0]) == \
        _warm_list(run, ["i1", "i2"])
