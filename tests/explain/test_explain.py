"""explain_recommendation: model-based contributions, shared metadata, the sentence, bad input."""
from __future__ import annotations

import contextlib
import dataclasses
import json

import numpy as np
import pytest
import torch

from twotower.errors import ConfigError, NotFoundError
from twotower.explain import explain_by_id, explain_recommendation, user_window
from twotower.explain.metadata import MetadataColumns, shared_metadata
from twotower.explain.text import explanation_text
from twotower.models.history import pad_histories

KEYS = {"user_id", "item_id", "item", "score", "history", "shared_metadata", "already_seen", "basis", "text"}


def _unseen_top(run, user_row: int, k: int) -> list[int]:
    s = run.scores_for_users(np.array([user_row]))[0]
    s[run.history.of(user_row)] = -np.inf
    return [int(i) for i in np.argsort(-s, kind="stable")[:k]]


def test_loo_equals_the_score_drop_of_deleting_the_item_from_the_history(mean_run) -> None:
    # mean pooling: weight 0 at position j == the mean over the other items, i.e. the history list without it; a
    # history longer than the window lets its next older item in (the window alone was compared before, and was
    # what explain computed: not the deletion `recommend --history` without the item scores)
    run = mean_run
    L, pad = run.model.history_len, run.model.pad_item
    longer = 0
    for u in range(0, 40, 7):
        window = user_window(run, u, None)
        whole = [int(x) for x in run.history.of(u)]  # oldest first; the window is its last L
        longer += len(whole) > L
        items = [int(x) for x in window if x != pad]
        for item in _unseen_top(run, u, 2):
            e = explain_recommendation(run, user_row=u, item_row=item, top=L)
            assert len(e["history"]) == len(items)
            full = float(run.user_vectors(np.array([u]))[0] @ run.item_embeddings()[item])
            assert e["score"] == pytest.approx(full, abs=1e-5)
            for h in e["history"]:
                pos = L - 1 - h["age"]
                at = len(whole) - 1 - h["age"]  # its place in the whole history
                rest = whole[:at] + whole[at + 1:]
                assert run.item_vocab.ids[int(window[pos])] == h["item_id"] == run.item_vocab.ids[whole[at]]
                hist = pad_histories([np.array(rest)], L, pad)
                u_vec = run.model.user_embeddings(np.array([u]), hist).numpy()[0]
                brute = full - float(u_vec @ run.item_embeddings()[item])
                assert h["contribution"] == pytest.approx(brute, abs=1e-5)
    assert longer  # some of these users' histories are longer than the window


def test_gradxinput_is_the_first_order_view_of_loo(mean_run) -> None:
    agree = 0
    pairs = [(u, i) for u in range(0, 40, 4) for i in _unseen_top(mean_run, u, 2)]
    for u, i in pairs:
        loo = explain_recommendation(mean_run, user_row=u, item_row=i, top=1)["history"][0]["item_id"]
        gxi = explain_recommendation(mean_run, user_row=u, item_row=i, top=1, method="gradxinput")
        agree += gxi["history"][0]["item_id"] == loo
        assert gxi["method"] == "gradxinput"
    assert agree >= 0.7 * len(pairs)
    with pytest.raises(ConfigError, match="loo, gradxinput"):
        explain_recommendation(mean_run, user_row=0, item_row=0, method="shap")


def _score(run, window: list[int], item: int) -> float:
    from twotower.explain.attribution import item_vector, user_scores

    hist = pad_histories([np.array(window)], run.model.history_len, run.model.pad_item)
    with torch.no_grad():
        return float(user_scores(run.model, None, torch.as_tensor(hist), None, item_vector(run.model, item))[0])


def _embedding_slope(run, window: list[int], item: int, row: int, eps: float = 1e-3) -> float:
    """d score / d t with history item ``row``'s embedding scaled by t (at t = 1): gradient x input embedding."""
    table = run.model.user_tower.history_emb.weight
    keep = table[row].clone()
    out = []
    with torch.no_grad():
        for t in (1 + eps, 1 - eps):
            table[row] = keep * t
            out.append(_score(run, window, item))
        table[row] = keep
    return (out[0] - out[1]) / (2 * eps)


@contextlib.contextmanager
def _towers_alone(run):
    """The run's model without its item-item term, put back after (monkeypatch deletes a submodule it restores)."""
    user, item = run.model.user_tower, run.model.item_tower
    parts = user.item_item, item.item_item
    user.item_item = item.item_item = None
    try:
        yield
    finally:
        user.item_item, item.item_item = parts


def test_gradxinput_gives_each_history_item_its_first_order_share(mean_run) -> None:
    """A pooled tower's score does not change when every pooling weight is scaled alike, so w_j * ds/dw_j summed to
    exactly 0 and gave a one-item history 0 ("No item in your history raises the score ... but together they do",
    beside loo's "Because you watched item 1."). Each item's share is now gradient x input of its embedding, the
    meaning the sequence towers have, with the item-item term's share of the score beside it."""
    run = mean_run
    pairs = [(w, i) for w in ([0], [5], [3, 9, 14], [1, 2, 7, 20, 30]) for i in (4, 11, 26) if i not in w]

    def shares(window: list[int], item: int) -> dict[int, float]:
        e = explain_recommendation(run, history_rows=window, item_row=item, top=len(window), method="gradxinput")
        return {run.item_vocab.index(h["item_id"]): h["contribution"] for h in e["history"]}

    with_term = {(tuple(w), i): (shares(w, i), _score(run, w, i)) for w, i in pairs}
    assert all(len(w) > 1 or c[w[0]] != 0 for (w, _), (c, _) in with_term.items())
    assert all(abs(sum(c.values())) > 1e-4 for c, _ in with_term.values())
    assert run.model.user_tower.item_item is not None  # the term is part of what is attributed
    for w, i in pairs:
        if len(w) == 1:  # one item's share is exact, no estimate (test_a_history_of_one_item_gets_the_exact_total_...)
            continue
        with _towers_alone(run):
            towers, towers_score = shares(w, i), _score(run, w, i)
            for row in w:  # the towers' share: the first-order effect of the item's embedding
                assert towers[row] == pytest.approx(_embedding_slope(run, w, i, row), abs=2e-4)
        full, score = with_term[(tuple(w), i)]
        # the item-item term is linear in its normalised sum over the history: its shares add up to its score
        assert sum(full.values()) - sum(towers.values()) == pytest.approx(score - towers_score, abs=1e-5)


def test_shape_order_and_json(mean_run) -> None:
    item = _unseen_top(mean_run, 3, 1)[0]
    e = explain_recommendation(mean_run, user_row=3, item_row=item, top=3)
    assert KEYS <= set(e)
    assert "heads" not in e  # single-head item tower
    assert e["user_id"] == mean_run.user_vocab.ids[3] and e["item"]["item_id"] == e["item_id"]
    contribs = [h["contribution"] for h in e["history"]]
    assert len(contribs) == 3 and contribs == sorted(contribs, reverse=True)
    assert {"item_id", "title", "contribution", "genres", "year"} <= set(e["history"][0])
    assert e["basis"] == "history" and e["already_seen"] is False
    assert json.loads(json.dumps(e)) == e
    # the sentence does not depend on how many history items are listed
    short = explain_recommendation(mean_run, user_row=3, item_row=item, top=0)
    assert short["history"] == [] and short["text"] == e["text"]


def test_deterministic_for_a_fixed_run(mean_run) -> None:
    from twotower.pipeline.artifacts import TrainedRun

    item = _unseen_top(mean_run, 5, 1)[0]
    a = explain_recommendation(mean_run, user_row=5, item_row=item)
    b = explain_recommendation(TrainedRun.load(mean_run.dir), user_row=5, item_row=item)
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_text_names_top_contributors_and_shared_genre(mean_run) -> None:
    u = 2
    e = explain_recommendation(mean_run, user_row=u, item_row=_unseen_top(mean_run, u, 1)[0])
    pos = [h for h in e["history"] if h["contribution"] > 0]
    assert pos, "a trained tiny run has at least one positive contributor"
    assert e["text"].startswith(f"Because you watched {pos[0]['title']}")
    assert e["text"].endswith(".") and "\n" not in e["text"]


def test_ad_hoc_history_matches_the_stored_history(mean_run) -> None:
    u, item = 6, _unseen_top(mean_run, 6, 1)[0]
    stored = explain_recommendation(mean_run, user_row=u, item_row=item)
    ad_hoc = explain_by_id(mean_run, history_ids=[mean_run.item_vocab.ids[r] for r in mean_run.history.of(u)],
                           item_id=mean_run.item_vocab.ids[item])
    assert ad_hoc["user_id"] is None
    assert ad_hoc["score"] == pytest.approx(stored["score"], abs=1e-6)
    assert [h["item_id"] for h in ad_hoc["history"]] == [h["item_id"] for h in stored["history"]]


def test_unknown_ids_raise_not_found_naming_the_id(mean_run) -> None:
    with pytest.raises(NotFoundError, match="'nobody'"):
        explain_by_id(mean_run, user_id="nobody", item_id="i1")
    with pytest.raises(NotFoundError, match="'i999'"):
        explain_by_id(mean_run, user_id="u1", item_id="i999")
    with pytest.raises(NotFoundError, match="'i998'"):
        explain_by_id(mean_run, history_ids=["i1", "i998"], item_id="i2")
    with pytest.raises(NotFoundError, match="item row"):
        explain_recommendation(mean_run, user_row=0, item_row=10_000)
    with pytest.raises(ConfigError, match="user_row"):
        explain_recommendation(mean_run, item_row=0)


@pytest.mark.parametrize("bad", [5, "5"])
def test_explain_recommendations_refuses_one_row_where_a_list_goes(mean_run, bad) -> None:
    from twotower.explain import explain_recommendations

    # item_rows=5 failed with "TypeError: 'int' object is not iterable"
    with pytest.raises(ConfigError, match=r"item_rows: expected a sequence of item rows, e.g. \[5\]"):
        explain_recommendations(mean_run, user_row=0, item_rows=bad)
    assert len(explain_recommendations(mean_run, user_row=0, item_rows=np.array([0, 1]))) == 2


def test_already_seen_item_says_so(mean_run) -> None:
    seen = int(mean_run.history.of(4)[0])
    e = explain_recommendation(mean_run, user_row=4, item_row=seen)
    assert e["already_seen"] is True
    assert "already" in e["text"] and mean_run.title(seen) in e["text"]


def test_empty_history_without_features_rests_on_the_popularity_prior(mean_run) -> None:
    e = explain_recommendation(mean_run, history_rows=[], item_row=3)
    assert e["basis"] == "popularity" and e["history"] == [] and e["history_total"] == 0.0
    assert "no history" in e["text"] and "popularity prior" in e["text"]
    assert e["score"] == pytest.approx(e["empty_history_score"])


def test_empty_history_with_user_features_rests_on_them(feature_run) -> None:
    u = feature_run.user_row("u_new")
    assert len(feature_run.history.of(u)) == 0
    e = explain_recommendation(feature_run, user_row=u, item_row=0)
    assert e["basis"] == "features" and e["user_features"] == ["age"]
    assert "no history" in e["text"] and "user features: age" in e["text"]


def test_features_and_user_id_basis_names_both(tmp_path) -> None:
    """A classic ID + features user tower (no history): the sentence said the score rests 'only on your profile
    (user features: age)', leaving out the learned user-ID embedding the tower also reads."""
    from explain_tiny_run import train_tiny_run

    from twotower.pipeline.artifacts import TrainedRun

    run = TrainedRun.load(train_tiny_run(tmp_path / "idfeat", history="none", user_features=True, epochs=1,
                                         extra=("model.user.use_id=true",)))
    e = explain_recommendation(run, user_row=run.user_row("u3"), item_row=0)
    assert e["basis"] == "features" and e["profile"] == "features" and e["user_features"] == ["age"]
    assert "user features: age" in e["text"] and "user-ID embedding" in e["text"]


def test_dual_head_shares_sum_to_the_score(mean_run, monkeypatch) -> None:
    from dataclasses import replace

    from twotower.models.two_tower import TwoTowerModel

    cfg = mean_run.config.model
    torch.manual_seed(0)
    text = np.random.default_rng(0).normal(size=(mean_run.n_items, 8)).astype(np.float32)
    dual = TwoTowerModel(replace(cfg, item=replace(cfg.item, dual_head=True)), len(mean_run.user_vocab),
                         mean_run.n_items, item_text=text).eval()
    monkeypatch.setattr(mean_run, "model", dual)
    e = explain_recommendation(mean_run, user_row=1, item_row=2)
    h = e["heads"]
    assert h["alpha"] == pytest.approx(0.5)  # gate initialised at 0
    assert h["semantic"] + h["collaborative"] == pytest.approx(e["score"], abs=1e-5)


def test_shared_metadata_counts_by_hand() -> None:
    cols = MetadataColumns(multi=("genres",), categorical=("decade",), numeric=("year",))
    item = {"genres": "Action|Thriller|War", "decade": "1990s", "year": 1995.0}
    history = [
        {"genres": "Action|Thriller", "decade": "1990s", "year": 1996.0},
        {"genres": "Action", "decade": "1980s", "year": 1987.0},
        {"genres": "Comedy", "decade": "1990s", "year": 1999.0},  # shares no genre, but the decade
        {"genres": None, "decade": None, "year": float("nan")},
    ]
    out = shared_metadata(item, history, cols)
    # Action in 2 history items, Thriller in 1, War in none (left out)
    assert out["genres"] == [{"value": "Action", "count": 2}, {"value": "Thriller", "count": 1}]
    assert out["decade"] == {"value": "1990s", "count": 2}
    # over the shared categorical value first, as the sentence names it ("(both 1990s, Action)")
    assert out["year_range"] == {"min": 1996, "max": 1999, "count": 2, "item": 1995,
                                 "among": "history items with decade 1990s"}
    no_decade = shared_metadata({**item, "decade": "1970s"}, history, cols)  # no history item shares it
    assert no_decade["year_range"] == {"min": 1987, "max": 1996, "count": 2, "item": 1995,
                                       "among": "history items sharing a genres value"}
    assert out["history_items"] == 4


def test_sentence_template_uses_only_the_facts() -> None:
    cols = MetadataColumns(multi=("genres",))
    expl = {
        "item_id": "x", "item": {"title": "Point Break", "genres": "Action|Thriller"},
        "already_seen": False, "basis": "history", "reads_history": True, "profile": "popularity",
        "history": [
            {"item_id": "a", "title": "Heat", "genres": "Action|Crime|Thriller", "contribution": 0.3},
            {"item_id": "b", "title": "Ronin", "genres": "Action|Thriller", "contribution": 0.2},
            {"item_id": "c", "title": "Fargo", "genres": "Crime", "contribution": 0.1},
        ],
        "shared_metadata": {"genres": [{"value": "Action", "count": 14}, {"value": "Thriller", "count": 5}]},
    }
    # other positive contributors sharing a value with the item and both named items: none (Fargo is Crime only)
    assert explanation_text(expl, cols) == "Because you watched Heat and Ronin (both Action, Thriller)."
    expl["history"].append({"item_id": "d", "title": "Speed", "genres": "Action", "contribution": 0.05})
    expl["history"].append({"item_id": "e", "title": "Cobra", "genres": "Action", "contribution": -0.05})
    assert explanation_text(expl, cols) == (
        "Because you watched Heat and Ronin (both Action, Thriller) and 1 other Action title that also raises its score."
    )
    expl["history"] = [{**h, "contribution": -abs(h["contribution"])} for h in expl["history"]]
    assert explanation_text(expl, cols).startswith("No item in your history raises the score of Point Break")


def test_a_history_that_lowers_the_score_but_lifts_the_rank_is_said_to_lift_it() -> None:
    """A one-film history lowered its sequel's score and took it from 61st to 1st (it lowered the 60 films above it
    more): the sentence said the score "rests on" the empty history, as if the film played no part."""
    cols = MetadataColumns(multi=("genres",))
    lowered = [{"item_id": "a", "title": "Star Wars", "genres": "Action|Sci-Fi", "contribution": -0.07}]
    expl = {
        "item_id": "x", "item": {"title": "Return of the Jedi", "genres": "Action|Sci-Fi"}, "already_seen": False,
        "basis": "history", "reads_history": True, "profile": "popularity", "history": lowered,
        "history_window": 1, "history_total": -0.07, "rank": 1, "empty_history_rank": 61, "shared_metadata": {},
    }
    assert explanation_text(expl, cols) == (
        "No item in your history raises the score of Return of the Jedi (removing that one item would not lower it), "
        "yet it ranks 1 in your list (61 with no history): your history lowers the items that would outrank it more.")
    # a history that lowers the score and the rank: the empty history is what holds the item up, as before
    assert explanation_text({**expl, "rank": 70}, cols).endswith("; it rests on the model's empty-history "
                                                                 "representation, which is the same for every user "
                                                                 "and acts as a popularity prior.")
    # named items raise it, the history as a whole lowers it, and lifts it up the list: all three said
    two = [{"item_id": "b", "title": "Alien", "genres": "Sci-Fi", "contribution": 0.02}, *lowered]
    said = explanation_text({**expl, "history": two, "history_window": 2}, cols)
    assert said.startswith("The score of Return of the Jedi rests on the model's empty-history representation")
    assert said.endswith("though Alien raises it (Sci-Fi); yet it ranks 1 in your list (61 with no history): your "
                         "history lowers the items that would outrank it more.")
    # a history that raises the score: "Because you ..." as before, no ranks
    up = [{**h, "contribution": 0.05} for h in lowered]
    assert explanation_text({**expl, "history": up, "history_total": 0.05}, cols) == (
        "Because you watched Star Wars (Action, Sci-Fi).")
    # ... unless it raises other items more, so that the item would rank higher without any history
    assert explanation_text({**expl, "history": up, "history_total": 0.05, "rank": 5, "empty_history_rank": 3},
                            cols) == ("Because you watched Star Wars (Action, Sci-Fi); with no history it would rank "
                                      "higher still (3, against 5 in your list).")


def test_metadata_columns_from_spec_plus_undeclared_multi_valued_and_year() -> None:
    from twotower.data.features import FeatureSpec
    from twotower.explain.metadata import metadata_columns

    records = [{"item_id": "a", "title": "A", "genres": "Drama", "tags": "x", "year": 1990, "decade": "1990s"},
               {"item_id": "b", "title": "B", "genres": "Action|Drama", "tags": "y|z", "year": None, "decade": "1990s"}]
    spec = FeatureSpec(key="item_id", categorical=("decade",), multi=("tags",))
    # genres: undeclared but pipe-joined in record b; year: undeclared, numeric
    assert metadata_columns(spec, records) == MetadataColumns(multi=("tags", "genres"), categorical=("decade",),
                                                              numeric=("year",))
    assert metadata_columns(None, records) == MetadataColumns(multi=("genres", "tags"), numeric=("year",))


# --------------------------------------------------------------- a new user described by features + history
def test_a_new_users_features_are_read_by_every_attribution_variant(feature_run) -> None:
    """A new user with ``user_features`` and a history: the score is the one ``history_vectors`` gives with
    those features, and each leave-one-out contribution is exactly the score lost when the item is deleted from
    the history (recency pooling: the older items move up one step) and the tower re-run with the same features."""
    run = feature_run
    hist = [int(x) for x in run.history.of(3)]
    feats = run.encode_user_features([{"age": 61}])
    tower = run.model.user_tower
    window = torch.as_tensor(user_window(run, None, hist)).unsqueeze(0)  # [1, L]
    w = tower.history_weights(window)
    item = next(i for i in range(run.n_items) if i not in hist)
    v = run.item_embeddings()[item]
    for method in ("loo", "gradxinput"):
        e = explain_recommendation(run, history_rows=hist, item_row=item, user_features={"age": 61}, top=8,
                                   method=method)
        want = float(run.history_vectors([np.asarray(hist)], features=feats)[0] @ v)
        assert e["score"] == pytest.approx(want, abs=1e-5)
        assert e["profile"] == "features" and e["user_features"] == ["age"] and e["basis"] == "history"
    e = explain_recommendation(run, history_rows=hist, item_row=item, user_features={"age": 61}, top=8)
    with torch.no_grad():
        for h in e["history"]:
            at = len(hist) - 1 - h["age"]  # age 0: the newest, the history's last item
            s = float(run.history_vectors([np.asarray(hist[:at] + hist[at + 1:])], features=feats)[0] @ v)
            assert h["contribution"] == pytest.approx(e["score"] - s, abs=1e-5)
        empty = float(tower(None, window, history_weights=torch.zeros_like(w), features=feats)[0].numpy() @ v)
    assert e["empty_history_score"] == pytest.approx(empty, abs=1e-5)
    # other features, another user: the score moves; no (or only null) features read as a plain new user
    other = explain_recommendation(run, history_rows=hist, item_row=item, user_features={"age": 19})
    assert other["score"] != pytest.approx(e["score"], abs=1e-6)
    plain = explain_recommendation(run, history_rows=hist, item_row=item)
    for none in ({}, {"age": None}):
        same = explain_recommendation(run, history_rows=hist, item_row=item, user_features=none)
        assert same["score"] == pytest.approx(plain["score"], abs=1e-6)
        assert same["profile"] == "popularity" and same["user_features"] == [] and same["text"] == plain["text"]


def test_a_new_user_with_features_and_no_pooled_history_rests_on_them(feature_run) -> None:
    # through the row-level call: explain_by_id refuses an empty history as tt.recommend and POST /explain do
    e = explain_recommendation(feature_run, history_rows=[], item_row=feature_run.item_vocab.index("i0"),
                               user_features={"age": 44})
    assert e["basis"] == "features" and "user features: age" in e["text"]


def test_user_features_are_checked_as_recommend_checks_them(feature_run, mean_run) -> None:
    from twotower.errors import DataError

    with pytest.raises(ConfigError, match="go with a history, not with user_id"):
        explain_recommendation(feature_run, user_row=3, item_row=0, user_features={"age": 30})
    with pytest.raises(DataError, match="user_features.agee: not a user feature of this run"):
        explain_recommendation(feature_run, history_rows=[1, 2], item_row=0, user_features={"agee": 30})
    with pytest.raises(DataError, match="user_features.age: expected a JSON number, got the string 'old'"):
        explain_by_id(feature_run, history_ids=["i1"], item_id="i0", user_features={"age": "old"})
    # says how to get a tower that reads them (the README's quick start once trained without a user table)
    with pytest.raises(DataError, match=r"reads no user features \(.*train with --users FILE"):
        explain_recommendation(mean_run, history_rows=[1, 2], item_row=0, user_features={"age": 30})
    with pytest.raises(ConfigError, match="^user_features: must map user feature columns to values"):
        explain_recommendation(feature_run, history_rows=[1], item_row=0, user_features=[("age", 30)])


def test_a_categorical_value_no_history_item_has_is_not_reported_as_shared() -> None:
    """shared_metadata gave {"shelf": {"value": "shelf4", "count": 0}}: a 'shared' fact that no history item had."""
    from twotower.explain.metadata import MetadataColumns, shared_metadata

    cols = MetadataColumns(categorical=("shelf",))
    history = [{"shelf": "shelf1"}, {"shelf": "shelf2"}, {"shelf": "shelf1"}]
    assert "shelf" not in shared_metadata({"shelf": "shelf4"}, history, cols)
    assert shared_metadata({"shelf": "shelf1"}, history, cols)["shelf"] == {"value": "shelf1", "count": 2}


def test_numpy_integers_are_taken_for_top_as_for_the_rows(mean_run) -> None:
    # user_row=np.int64(3) was read, top=np.int64(2) refused: "explain top: expected an integer >= 0, got np.int64(2)"
    item = _unseen_top(mean_run, 3, 1)[0]
    got = explain_recommendation(mean_run, user_row=np.int64(3), item_row=np.int64(item), top=np.int64(2))
    assert got == explain_recommendation(mean_run, user_row=3, item_row=int(item), top=2)
    assert len(got["history"]) == 2
    # the words of `explain --top -1` and POST /explain's top=-1 now (pipeline/refusals.top_refusal), the value as a number
    with pytest.raises(ConfigError, match=r"explain top: must be at least 0 \(history items listed\), got -1$"):
        explain_recommendation(mean_run, user_row=3, item_row=item, top=np.int64(-1))


def test_a_list_of_items_is_explained_as_each_item_alone(mean_run) -> None:
    """/recommend's inline explanations (several items at once) and POST /explain (one item) told one user
    different things: the float32 product over M items rounded otherwise than over one, a history item whose
    share is pure rounding flipped sign, and "3 other Comedy titles" became "2" for the same pair."""
    from twotower.explain import explain_recommendations

    for u in range(0, 40, 3):
        items = _unseen_top(mean_run, u, 10)
        many = explain_recommendations(mean_run, user_row=u, item_rows=items, top=8)
        for item, a in zip(items, many):
            b = explain_recommendation(mean_run, user_row=u, item_row=item, top=8)
            assert a["text"] == b["text"]
            assert a["score"] == pytest.approx(b["score"], abs=1e-7)  # the item tower over M rows vs one: ulps
            assert [h["item_id"] for h in a["history"]] == [h["item_id"] for h in b["history"]]
            for x, y in zip(a["history"], b["history"]):
                assert x["contribution"] == pytest.approx(y["contribution"], abs=1e-8)


def test_float32_rounding_is_not_credited_as_a_contribution(mean_run) -> None:
    """A history of one item three times: dropping one copy leaves the mean as it was, so no copy raises the
    score. The float32 variants still scored a few ulps apart, and the sentence said "though Film 3 raises it"."""
    for r in range(mean_run.n_items):
        e = explain_recommendation(mean_run, history_rows=[r, r, r], item_row=(r + 1) % mean_run.n_items)
        assert [h["contribution"] for h in e["history"]] == [0.0, 0.0, 0.0], (r, e["history"])
        # the item as a whole raises the score where the history does (its share is the total): named then, and
        # never as raising a score its history lowers (this said "No item ..." of every such history, denying it)
        raises = e["history_total"] > 0
        assert e["text"].startswith("Because you" if raises else "No item in your history raises the score"), e["text"]
        assert "raises it" not in e["text"]


def test_gradxinput_splits_a_repeated_items_share_between_its_copies(mean_run) -> None:
    """gradxinput is no removal: three copies of an item pool as the item once, and each copy gets a third of
    what the item alone gets (this test pinned 0 for each copy while every gradxinput share of a pooled tower
    summed to 0, one item's included)."""
    for r in range(0, mean_run.n_items, 3):
        item = (r + 1) % mean_run.n_items
        copies = [h["contribution"] for h in explain_recommendation(
            mean_run, history_rows=[r, r, r], item_row=item, method="gradxinput")["history"]]
        (alone,) = [h["contribution"] for h in explain_recommendation(
            mean_run, history_rows=[r], item_row=item, method="gradxinput")["history"]]
        assert alone != 0 and copies == pytest.approx([alone / 3] * 3, abs=1e-6), (r, copies, alone)


@pytest.mark.parametrize("tower", ["mean", "gru"])
def test_a_history_of_one_item_gets_the_exact_total_from_either_method(tower, request, tmp_path) -> None:
    """Removing the only item of a history leaves the empty history, so its share is the history's total. gradxinput
    gave its first-order estimate instead (ML-100K: Star Wars +0.0138 of a total -0.0421, and on a GRU run -0.0633 of
    +0.6646), and the sentence said "your history lowers it overall (-0.0421), though Star Wars (1977) raises it"
    where leave-one-out said no item raises it."""
    from explain_tiny_run import train_tiny_run

    from twotower.pipeline.artifacts import TrainedRun

    run = request.getfixturevalue("mean_run") if tower == "mean" else TrainedRun.load(
        train_tiny_run(tmp_path / "run", history="gru", epochs=1, extra=("model.item_item.enabled=false",)))
    for r in range(0, run.n_items, 4):
        item = (r + 1) % run.n_items
        for copies in (1, 3):
            said = {}
            for method in ("loo", "gradxinput"):
                e = explain_recommendation(run, history_rows=[r] * copies, item_row=item, method=method, top=copies)
                total = e["history_total"]
                if method == "gradxinput" or copies == 1:  # loo of one copy among several is that copy's removal
                    shares = [h["contribution"] for h in e["history"]]
                    assert sum(shares) == pytest.approx(total, abs=1e-6), (r, copies, method, shares, total)
                # the one item raises the score exactly where the history does, and no sentence says otherwise
                assert e["text"].startswith("Because you" if total > 1e-6 else "No item in your history raises"), \
                    (r, copies, method, total, e["text"])
                assert "as a whole" not in e["text"] and "lowers it overall" not in e["text"]
                said[method] = e["text"]
            assert said["loo"] == said["gradxinput"], (r, copies)


def test_a_known_user_rests_only_on_the_features_their_row_holds(tmp_path) -> None:
    """A known user with no value in the user table (or no row in it) was told the score "rests only on your
    profile (user features: age)": every column of the run was cited, as if it described that user."""
    import pandas as pd
    from explain_tiny_run import train_tiny_run, write_tiny_data

    from twotower.pipeline.artifacts import TrainedRun

    data = tmp_path / "run_data"
    write_tiny_data(data)
    users = pd.read_csv(data / "users.csv")
    users.loc[users.user_id == "u_new", "age"] = np.nan  # in the table, without an age
    users[users.user_id != "u3"].to_csv(data / "users.csv", index=False)  # u3: no row at all
    run = TrainedRun.load(train_tiny_run(tmp_path / "run", history="recency", user_features=True, epochs=1,
                                         write_data=False))
    e = explain_recommendation(run, user_row=run.user_row("u_new"), item_row=0)
    assert (e["basis"], e["profile"], e["user_features"]) == ("popularity", "popularity", [])
    assert "no history" in e["text"] and "popularity prior" in e["text"] and "user features" not in e["text"]
    e = explain_recommendation(run, user_row=run.user_row("u3"), item_row=0)
    assert (e["profile"], e["user_features"]) == ("popularity", [])
    e = explain_recommendation(run, user_row=run.user_row("u5"), item_row=0)  # a full row still rests on it
    assert (e["profile"], e["user_features"]) == ("features", ["age"])


def test_a_runs_column_roles_are_read_column_by_column_not_item_by_item(mean_run, monkeypatch) -> None:
    """The roles were worked out from one metadata record per item: on a 1M-item run the first /explain spent
    1.7 s building a million dicts. The columns give the same roles without any record."""
    from twotower.explain import explainer
    from twotower.explain.metadata import metadata_columns

    run = mean_run
    spec = run.item_encoder.spec if run.item_encoder is not None else None
    by_records = metadata_columns(spec, [run.item_record(r) for r in range(run.n_items)])
    explainer._COLUMNS.pop(run, None)
    monkeypatch.setattr(type(run), "item_record", lambda self, row: pytest.fail("a per-item record was built"))
    cols = explainer.run_metadata_columns(run)
    assert dataclasses.replace(cols, verb=by_records.verb) == by_records and cols.multi  # genres found either way


def test_explain_by_id_takes_history_as_recommend_does(mean_run) -> None:
    # tt.recommend(history=...) and tt.explain_by_id(history_ids=...) named one thing two ways: history= was a
    # TypeError here; history_ids= stays an alias
    ids = ["i1", "i2", "i3"]
    by_history = explain_by_id(mean_run, history=ids, item_id="i4")
    assert by_history == explain_by_id(mean_run, history_ids=ids, item_id="i4")
    assert sorted(h["item_id"] for h in by_history["history"]) == ids
    with pytest.raises(ConfigError, match="not both"):
        explain_by_id(mean_run, history=ids, history_ids=ids, item_id="i4")
    with pytest.raises(ConfigError, match="^history: must be a list of item ids"):
        explain_by_id(mean_run, history="i1", item_id="i4")


@pytest.mark.parametrize("tower", [("model.user.history=gru",),
                                   ("model.user.history=transformer", "model.user.seq_positions=left")])
def test_loo_of_a_history_longer_than_the_window_is_the_deletion_from_the_whole_history(tmp_path, tower) -> None:
    """Deleting an item from a history longer than the window lets the next older item in; explain dropped the item
    from the window alone, so on ML-1M (transformer, left positions, 50 items) a user of 78 items was told that no
    item raised the score while 24 of the 50 deletions lowered it."""
    from explain_tiny_run import train_tiny_run

    from twotower.pipeline.artifacts import TrainedRun

    run = TrainedRun.load(train_tiny_run(tmp_path / "run", history=tower[0].split("=")[1], epochs=1,
                                         extra=(*tower[1:], "model.user.history_len=4", "model.user.seq_layers=1",
                                                "model.item_item.enabled=false")))
    L, pad = run.model.history_len, run.model.pad_item
    checked = 0
    for u in range(0, 40, 3):
        whole = [int(x) for x in run.history.of(u)]
        if len(whole) <= L:
            continue
        item = _unseen_top(run, u, 1)[0]
        e = explain_recommendation(run, user_row=u, item_row=item, top=L)
        v = run.item_embeddings()[item]
        full = float(run.user_vectors(np.array([u]))[0] @ v)
        for h in e["history"]:
            at = len(whole) - 1 - h["age"]
            rest = pad_histories([np.array(whole[:at] + whole[at + 1:])], L, pad)
            brute = full - float(run.model.user_embeddings(np.array([u]), rest).numpy()[0] @ v)
            assert h["contribution"] == pytest.approx(brute, abs=1e-5)
            checked += 1
    assert checked >= 8


def test_a_repeated_history_item_is_compared_once_in_the_shared_metadata(mean_run) -> None:
    """["i1", "i1", "i1", "i5"]: the shared metadata counted each position ("Action (4 items) ... with the 4 items of
    your history window" of 2 items), where the sentence names and counts each item once."""
    rows = [mean_run.item_vocab.index(i) for i in ("i1", "i1", "i1", "i5")]
    e = explain_recommendation(mean_run, history_rows=rows, item_row=mean_run.item_vocab.index("i9"))
    shared = e["shared_metadata"]
    assert shared["history_items"] == 2
    assert all(v["count"] <= 2 for v in shared.get("genres", []))
    once = explain_recommendation(mean_run, history_rows=[rows[0], rows[3]], item_row=mean_run.item_vocab.index("i9"))
    assert shared == once["shared_metadata"]
