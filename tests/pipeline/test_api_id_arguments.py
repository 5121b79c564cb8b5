"""The id arguments of tt.recommend and tt.similar: anything but a list of ids is a ConfigError saying what to pass,
never a bare TypeError from inside."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

import twotower as tt

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serving"))
from tiny_run import build_tiny_run  # noqa: E402


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tt.TrainedRun:
    return tt.TrainedRun.load(build_tiny_run(tmp_path_factory.mktemp("api-id-arguments")))


def test_similar_without_item_ids_says_what_to_pass(run):
    # was "TypeError: 'NoneType' object is not iterable", where tt.recommend(run, None) is a ConfigError
    with pytest.raises(tt.ConfigError, match=r"give item_ids, the items to find similar ones for: a list of item "
                                             r"ids, e.g. \['50'\]"):
        tt.similar(run, None)


@pytest.mark.parametrize("value", [5, 5.0, np.int64(5), np.array([[1, 2]])])
def test_one_id_or_a_table_instead_of_a_list_is_refused_with_the_form_to_use(run, value):
    # "TypeError: 'int' object is not iterable" from both
    kind = type(value).__name__
    with pytest.raises(tt.ConfigError, match=rf"^item_ids: must be a list of item ids, e.g. \[.*\], got an? {kind}$"):
        tt.similar(run, value)
    with pytest.raises(tt.ConfigError, match=rf"^user_ids: must be a list of user ids, e.g. \[.*\], got an? {kind}$"):
        tt.recommend(run, value)


def test_one_id_as_a_string_is_refused_in_the_words_of_history_and_http(run):
    # "item_ids is a list of item ids, e.g. ['i1']; got a string": the words history=, exclude= and POST /recommend's
    # 422 had left ('history: must be a list of item ids, oldest first, e.g. ["i1"], got a string')
    with pytest.raises(tt.ConfigError) as e:
        tt.similar(run, item_ids="i1")
    assert str(e.value) == 'item_ids: must be a list of item ids, e.g. ["i1"], got a string'
    with pytest.raises(tt.ConfigError) as e:
        tt.recommend(run, user_ids="u1")
    assert str(e.value) == 'user_ids: must be a list of user ids, e.g. ["u1"], got a string'
    with pytest.raises(tt.ConfigError) as e:
        tt.recommend(run, user_ids=5)
    assert str(e.value) == "user_ids: must be a list of user ids, e.g. [5], got an int"


def test_lists_tuples_arrays_and_generators_are_still_taken(run):
    want = tt.similar(run, ["i1", "i2"])
    assert tt.similar(run, ("i1", "i2")) == want
    assert tt.similar(run, np.array(["i1", "i2"])) == want
    assert tt.similar(run, (i for i in ["i1", "i2"])) == want
    assert tt.recommend(run, (u for u in ["u1"])) == tt.recommend(run, ["u1"])


@pytest.mark.parametrize("history", [{"i1", "i2"}, frozenset({"i1", "i2"}), {"i1": 1, "i2": 2},
                                     {"i1": 1, "i2": 2}.keys(), {1: "i1", 2: "i2"}.values()])
def test_a_history_without_an_order_is_refused(run, history):
    # a history is oldest first: a set was pooled in whatever order it iterated, without a word
    kind = type(history).__name__
    with pytest.raises(tt.ConfigError, match=rf"^history: must be a list of item ids, oldest first, got an? {kind}, which has "
                                             r"no order: pass a list in time order"):
        tt.recommend(run, history=history)
    with pytest.raises(tt.ConfigError, match=rf"^history: must be a list of item ids, oldest first, got an? {kind}"):
        tt.explain_by_id(run, history=history, item_id="i3")
    from twotower.pipeline.recommend import open_run_index
    from twotower.serving import RecommenderService

    service = RecommenderService(run, open_run_index(run, exact=True)[0])
    with pytest.raises(tt.ConfigError, match=rf"^history: must be a list of item ids, oldest first, got an? {kind}"):
        service.explain(history=history, item_id="i3")  # RecommenderService called from Python


def test_one_id_as_a_history_says_what_to_pass(run):
    # "TypeError: 'int' object is not iterable"
    with pytest.raises(tt.ConfigError, match=r"^history: must be a list of item ids, oldest first, e.g. \[5\], got an int"):
        tt.recommend(run, history=5)


def test_ordered_histories_are_still_taken(run):
    import pandas as pd

    want = tt.recommend(run, history=["i1", "i2"])
    for given in (("i1", "i2"), np.array(["i1", "i2"]), pd.Series(["i1", "i2"]), (i for i in ["i1", "i2"])):
        assert tt.recommend(run, history=given) == want
    assert tt.explain_by_id(run, history=pd.Series(["i1", "i2"]), item_id="i3") == tt.explain_by_id(
        run, history=["i1", "i2"], item_id="i3")


def test_a_path_or_policy_of_the_wrong_type_is_one_line_naming_the_argument(run, tmp_path):
    """Three calls ended in tracebacks from deep inside (pathlib's "expected str, bytes or os.PathLike object, not
    int", dataclasses' "replace() should be called on dataclass instances") where every other misuse is one line."""
    with pytest.raises(tt.ConfigError, match=r"TrainedRun.load: expected a run folder's path .*got 5"):
        tt.TrainedRun.load(5)
    with pytest.raises(tt.ConfigError, match=r"^out: expected a folder's path .*got None"):
        tt.export_onnx(run, None)
    with pytest.raises(tt.ConfigError, match=r"policy: an IndexPolicy .*got 'fast'"):
        tt.build_index(run, "ivf", policy="fast", out=tmp_path / "idx")


def test_recommend_and_similar_take_an_index_folder_as_the_cli_does(run, tmp_path):
    """`recommend --index DIR` / `similar --index DIR` had no Python equivalent: only RUN/index or exact search."""
    tt.build_index(run, "flat", out=tmp_path / "idx")
    user, item = run.user_vocab.ids[0], run.item_vocab.ids[0]
    assert tt.recommend(run, [user], k=5, index=tmp_path / "idx") == tt.recommend(run, [user], k=5, exact=True)
    assert tt.similar(run, [item], k=5, index=str(tmp_path / "idx")) == tt.similar(run, [item], k=5, exact=True)
    with pytest.raises(tt.ConfigError, match="exact=True ranks the whole catalogue exactly; index= names an index"):
        tt.recommend(run, [user], index=tmp_path / "idx", exact=True)
    with pytest.raises(tt.ConfigError, match=r"index: the folder of an index built for the run .*got 5"):
        tt.similar(run, [item], index=5)
    with pytest.raises(tt.NotFoundError):
        tt.recommend(run, [user], index=tmp_path / "none")


def test_a_short_list_from_python_is_logged_as_the_cli_says_it(run, caplog):
    """`tt.recommend(run, ["42"], k=1540)` gave 1,535 items without a word where the CLI says which lists are short."""
    user = run.user_vocab.ids[0]
    with caplog.at_level("WARNING", logger="twotower.pipeline.recommend"):
        lists = tt.recommend(run, [user], k=run.n_items)
    assert len(lists[0]) < run.n_items
    assert (f"1 of 1 lists are shorter than k={run.n_items} because fewer items are left after exclusions (e.g. user "
            f"{user}: {len(lists[0])} of {run.n_items})") in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="twotower.pipeline.recommend"):
        tt.recommend(run, [user], k=3)
    assert "shorter than" not in caplog.text
    # tt.similar too: 62 of k=100 came back without a word
    item = run.item_vocab.ids[0]
    with caplog.at_level("WARNING", logger="twotower.pipeline.recommend"):
        similar = tt.similar(run, [item], k=run.n_items)
    assert (f"1 of 1 lists are shorter than k={run.n_items} because fewer items are left after exclusions (e.g. item "
            f"{item}: {len(similar[0])} of {run.n_items})") in caplog.text


def test_a_k_above_the_catalogue_is_said_as_the_cause_of_a_short_list(run, caplog, capsys):
    """k=2000 on a 1,677-item catalogue with exclude_seen=False logged "fewer items are left after exclusions (e.g.
    the history: 1677 of 2000)", though nothing was excluded: k was above the catalogue."""
    from twotower.cli.main import main

    history, k = list(run.item_vocab.ids[:2]), run.n_items + 5
    with caplog.at_level("WARNING", logger="twotower.pipeline.recommend"):
        lists = tt.recommend(run, history=history, k=k, exclude_seen=False)
    assert len(lists[0]) == run.n_items
    assert (f"1 of 1 lists are shorter than k={k} because k is more than the {run.n_items:,} items in the index (e.g. "
            f"the history: {run.n_items} of {k})") in caplog.text
    assert "exclusions" not in caplog.text
    caplog.clear()
    user = run.user_vocab.ids[0]  # its seen items are excluded too: both causes said
    with caplog.at_level("WARNING", logger="twotower.pipeline.recommend"):
        lists = tt.recommend(run, [user], k=k)
    assert (f"because k is more than the {run.n_items:,} items in the index, and fewer are left after exclusions (e.g. "
            f"user {user}: {len(lists[0])} of {k})") in caplog.text
    # the CLI's stderr line is the same note
    assert main(["recommend", "--run", str(run.dir), "--user", str(user), "--k", str(k), "--no-exclude-seen"]) == 0
    assert (f"1 of 1 lists are shorter than k={k} because k is more than the {run.n_items:,} items in the index (e.g. "
            f"user {user}: {run.n_items} of {k})") in capsys.readouterr().err


#: (call, where): a float where an id goes, in each id argument of the Python API
FLOAT_ID_CALLS = [
    (lambda run, v: tt.recommend(run, ["u1", v]), "user_ids[1]", "user"),
    (lambda run, v: tt.recommend(run, np.array([v])), "user_ids[0]", "user"),
    (lambda run, v: tt.recommend(run, history=["i1", v]), "history[1]", "item"),
    (lambda run, v: tt.recommend(run, ["u1"], exclude=[v]), "exclude[0]", "item"),
    (lambda run, v: tt.similar(run, [v]), "item_ids[0]", "item"),
    (lambda run, v: tt.similar(run, ["i1"], exclude=["i2", v]), "exclude[1]", "item"),
    (lambda run, v: tt.explain_by_id(run, user_id=v, item_id="i3"), "user_id", "user"),
    (lambda run, v: tt.explain_by_id(run, user_id="u1", item_id=v), "item_id", "item"),
    (lambda run, v: tt.explain_by_id(run, history=[v], item_id="i3"), "history[0]", "item"),
]


@pytest.mark.parametrize("call, where, what", FLOAT_ID_CALLS)
@pytest.mark.parametrize("value, fix", [
    (3.0, "pass '3'"),
    (np.float64(3.0), "pass '3'"),
    (3.5, "pass the id's text as the data writes it, e.g. '3.5'"),
    (float("nan"), "a missing id\\? pass the id's text"),
])
def test_a_float_id_is_refused_naming_the_argument_and_what_to_pass(run, call, where, what, value, fix):
    """Ids are the data's id strings: 3.0 was looked up as '3' without a word (yet exclude=[50.0] as '50.0', unknown),
    and 3.5 or NaN (a missing id in a float column) was "unknown user '3.5'", not saying that ids are text."""
    article = "an" if what == "item" else "a"
    with pytest.raises(tt.ConfigError, match=rf"^{re.escape(where)}: must be {article} {what} id as text \(or an "
                                             rf"integer\), got the float {re.escape(repr(float(value)))}: ids are the "
                                             rf"data's id strings; {fix}$") as e:
        call(run, value)
    assert isinstance(e.value, ValueError)


def test_integer_ids_are_still_taken(tmp_path_factory):
    """An integer is an id's digits (as POST /recommend takes one): `tt.recommend(run, [7])` is user '7'."""
    numeric = tt.TrainedRun.load(build_tiny_run(tmp_path_factory.mktemp("api-int-ids"), rename_users={"u7": "7"}))
    assert tt.recommend(numeric, [7], k=3) == tt.recommend(numeric, [np.int64(7)], k=3) == tt.recommend(
        numeric, ["7"], k=3)
    assert tt.explain_by_id(numeric, user_id=7, item_id="i3") == tt.explain_by_id(numeric, user_id="7", item_id="i3")


@pytest.mark.parametrize("call, where, what", FLOAT_ID_CALLS)
@pytest.mark.parametrize("value", [True, np.bool_(False)])
def test_a_boolean_id_is_refused_naming_the_argument(run, call, where, what, value):
    """`[True]` was looked up as "unknown user 'True'" (POST /recommend refuses a boolean id: serving/schemas)."""
    article = "an" if what == "item" else "a"
    with pytest.raises(tt.ConfigError, match=rf"^{re.escape(where)}: must be {article} {what} id as text \(or an "
                                             rf"integer\), got the boolean {bool(value)}$"):
        call(run, value)
