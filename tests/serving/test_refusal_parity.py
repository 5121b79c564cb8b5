"""One refusal, one core text: the CLI, HTTP and the Python API say the same words, each after its own location.

The CLI names the flag (``--k: ...``; an id of a list flag also by its place, 1-based as an empty item is named:
``--history: item 2 of 4: ...``, ``--users: user 2 of 2: ...``), HTTP the JSON field path (``body.k: ...``, ``history[1]: ...``), Python the
argument (``k: ...``); what follows is the one function of pipeline/refusals.py (or NotFoundError's text). They
were three wordings of one refusal (``--k must be between 1 and 10000``, pydantic's ``Input should be greater than
or equal to 1``, ``k must be an integer between 1 and 10000 (...)``), so a client reading one could not match
another's.
"""
from __future__ import annotations

import pytest

import twotower as tt
from tests.serving.refusal_words import cli_refusal as _cli
from tests.serving.refusal_words import py_refusal as _py


@pytest.fixture(scope="module")
def run(run_dir):
    return tt.TrainedRun.load(run_dir)


def _http(client, path: str, body: dict, status: int = 422) -> str:
    r = client.post(path, json=body)
    assert r.status_code == status, r.text
    return r.json()["error"]["message"]


def _core(said: str, where: str) -> str:
    assert said.startswith(where + ": "), (said, where)
    return said[len(where) + 2:]


@pytest.mark.parametrize("route, cmd, body, fn", [
    ("/recommend", ["recommend", "--user", "u1"], {"user_id": "u1"}, lambda run, k: tt.recommend(run, ["u1"], k=k)),
    ("/similar-items", ["similar", "--item", "i1"], {"item_id": "i1"}, lambda run, k: tt.similar(run, ["i1"], k=k)),
])
def test_a_k_out_of_range_is_refused_in_one_wording(run_dir, run, client, capsys, route, cmd, body, fn) -> None:
    cli = _core(_cli(capsys, cmd[0], "--run", str(run_dir), *cmd[1:], "--k", "0"), "--k")
    http = _http(client, route, {**body, "k": 0})
    py = _core(_py(lambda: fn(run, 0)), "k")
    assert cli == _core(http, "body.k") == py == "must be at least 1, got 0"
    # the details keep their shape: loc and msg, the message's words
    assert client.post(route, json={**body, "k": 0}).json()["error"]["details"] == [
        {"loc": ["body", "k"], "msg": "must be at least 1, got 0"}]


def test_the_servers_lower_k_bound_is_named_as_the_servers(run_dir, run, client, capsys) -> None:
    """The CLI and Python allow up to config.MAX_K; the service caps k at its max_k (1000): the same words, with
    the bound said to be this server's and how to raise it."""
    from twotower.config import MAX_K

    cli = _core(_cli(capsys, "recommend", "--run", str(run_dir), "--user", "u1", "--k", str(MAX_K + 1)), "--k")
    py = _core(_py(lambda: tt.recommend(run, ["u1"], k=MAX_K + 1)), "k")
    assert cli == py == f"must be at most {MAX_K} (twotower.config.MAX_K), got {MAX_K + 1}"
    http = _core(_http(client, "/recommend", {"user_id": "u1", "k": 1001}), "body.k")
    assert http == "must be at most 1000 (this server's max_k: `twotower serve --max-k` sets it, up to 10000), got 1001"


def test_an_empty_history_is_refused_in_one_wording(run_dir, run, client, capsys) -> None:
    """HTTP said pydantic's "List should have at least 1 item after validation, not 0"; tt.explain_by_id explained
    from the empty-history state where `explain --history` and POST /explain refuse it."""
    from twotower.explain import explain_by_id

    said = "no item ids given; a new user's history needs at least one item id, oldest first"
    assert _core(_cli(capsys, "recommend", "--run", str(run_dir), "--history", ","), "--history") == said
    assert _core(_cli(capsys, "explain", "--run", str(run_dir), "--history", ",", "--item", "i1"), "--history") == said
    assert _core(_http(client, "/recommend", {"history": []}), "body.history") == said
    assert _core(_http(client, "/explain", {"history": [], "item_id": "i1"}), "body.history") == said
    assert _core(_py(lambda: tt.recommend(run, history=[])), "history") == said
    assert _core(_py(lambda: explain_by_id(run, history=[], item_id="i1")), "history") == said


def test_the_servers_history_bound_is_named_as_the_servers(make_client) -> None:
    r = make_client(max_history=3).post("/recommend", json={"history": ["i1", "i2", "i3", "i4"]})
    assert r.status_code == 422
    assert r.json()["error"]["details"] == [{"loc": ["body", "history"], "msg": (
        "must hold at most 3 item ids (this server's max_history: `twotower serve --max-history` sets it), got 4")}]


def test_the_servers_batch_bound_is_named_as_the_servers(make_client) -> None:
    """A batch over max_batch read "List should have at most 2 items after validation, not 3": pydantic's words,
    with no word of the server's setting, where an over-long history or k names theirs and the flag."""
    one = {"user_id": "u1", "k": 1}
    r = make_client(max_batch=2).post("/recommend/batch", json={"requests": [one, one, one]})
    assert r.status_code == 422
    assert r.json()["error"]["details"] == [{"loc": ["body", "requests"], "msg": (
        "must hold at most 2 requests (this server's max_batch: `twotower serve --max-batch` sets it), got 3")}]
    assert r.json()["error"]["message"].startswith("body.requests: must hold at most 2 requests (this server's")


@pytest.mark.parametrize("cli_argv, cli_at, route, body, http_at, fn, py_at", [
    (["recommend", "--history", "i1,nope"], "--history: item 2 of 2", "/recommend", {"history": ["i1", "nope"]}, "history[1]",
     lambda run: tt.recommend(run, history=["i1", "nope"]), "history[1]"),
    (["recommend", "--users", "u1,nope"], "--users: user 2 of 2", "/recommend/batch",
     {"requests": [{"user_id": "u1"}, {"user_id": "nope"}]}, "requests[1].user_id",
     lambda run: tt.recommend(run, ["u1", "nope"]), "user_ids[1]"),
    # its place as typed, a repeated id counted: one list per user is made, but the user counts what they wrote
    (["recommend", "--users", "u1,u1,nope"], "--users: user 3 of 3", "/recommend/batch",
     {"requests": [{"user_id": "u1"}, {"user_id": "u1"}, {"user_id": "nope"}]}, "requests[2].user_id",
     lambda run: tt.recommend(run, ["u1", "u1", "nope"]), "user_ids[2]"),
    (["similar", "--items", "i1,nope,i2"], "--items: item 2 of 3", "/similar-items", {"item_id": "nope"}, "item_id",
     lambda run: tt.similar(run, ["i1", "nope", "i2"]), "item_ids[1]"),
    (["similar", "--item", "nope"], "--item", "/similar-items", {"item_id": "nope"}, "item_id",
     lambda run: tt.similar(run, ["nope"]), "item_ids[0]"),
    (["explain", "--user", "u1", "--item", "nope"], "--item", "/explain", {"user_id": "u1", "item_id": "nope"},
     "item_id", lambda run: tt.explain_by_id(run, user_id="u1", item_id="nope"), "item_id"),
    (["explain", "--history", "i1,nope", "--item", "i2"], "--history: item 2 of 2", "/explain",
     {"history": ["i1", "nope"], "item_id": "i2"}, "history[1]",
     lambda run: tt.explain_by_id(run, history=["i1", "nope"], item_id="i2"), "history[1]"),
])
def test_an_unknown_id_is_named_where_it_was_sent_then_in_one_wording(
        run_dir, run, client, capsys, cli_argv, cli_at, route, body, http_at, fn, py_at) -> None:
    """/similar-items alone named no field (its 404 had no "field"), and Python named no argument at all."""
    from twotower.pipeline.refusals import UNKNOWN_USER_HINT, unknown_user_hint

    cli = _core(_cli(capsys, cli_argv[0], "--run", str(run_dir), *cli_argv[1:]), cli_at)
    # an unknown user's hint names the flag where HTTP and Python say "the history": the rest is one wording
    cli = cli.replace(unknown_user_hint("--history"), UNKNOWN_USER_HINT)
    r = client.post(route, json=body)
    assert r.status_code == 404 and r.json()["error"]["field"] == http_at
    http = _core(r.json()["error"]["message"], http_at)
    py = _core(_py(lambda: fn(run)), py_at)
    assert cli == py and http.startswith(cli)  # a batch of several adds its own note after the words
    assert cli.startswith("unknown ") and "known" in cli.split("(", 1)[1]


def test_an_unknown_user_is_pointed_to_a_history_by_every_interface(run_dir, run, client, capsys) -> None:
    """The tiny run's user tower reads a history and no user ID, so a user unseen in training is served from their
    items: only `recommend --user` said so; POST /recommend, POST /explain, `explain --user` and Python did not."""
    from twotower.pipeline.refusals import UNKNOWN_USER_HINT, unknown_user_hint

    said = f"unknown user 'ghost' (not among the 40 known users); {UNKNOWN_USER_HINT}"
    # the command line names its flag where HTTP and Python say "the history"
    flag_said = f"unknown user 'ghost' (not among the 40 known users); {unknown_user_hint('--history')}"
    rec = ["recommend", "--run", str(run_dir), "--user", "ghost"]
    assert _core(_cli(capsys, *rec), "--user") == flag_said
    assert _core(_cli(capsys, "explain", "--run", str(run_dir), "--user", "ghost", "--item", "i1"), "--user") == flag_said
    assert _core(_http(client, "/recommend", {"user_id": "ghost"}, 404), "user_id") == said
    assert _core(_http(client, "/explain", {"user_id": "ghost", "item_id": "i1"}, 404), "user_id") == said
    assert _core(_py(lambda: tt.recommend(run, ["ghost"])), "user_ids[0]") == said
    assert _core(_py(lambda: tt.explain_by_id(run, user_id="ghost", item_id="i1")), "user_id") == said


@pytest.mark.parametrize("history, named", [
    (["i1", "nope", "i2", "nope2"], "; the history holds 2 unknown ids: 'nope', 'nope2'"),
    (["nope", "i1", "nope"], ""),  # one unknown id, twice: said once, as before
    (["i1"] + [f"x{n}" for n in range(12)],  # bounded: the first ten, then a count
     "; the history holds 12 unknown ids: " + ", ".join(f"'x{n}'" for n in range(10)) + " and 2 more"),
])
def test_every_unknown_history_id_is_named_in_one_wording(run_dir, run, client, capsys, history, named) -> None:
    """A history with several unknown ids named only the first (``{"history": ["1", "nope", "nope2"]}``: `nope`)."""
    first = history.index(next(i for i in history if i.startswith(("nope", "x"))))
    cli = _core(_cli(capsys, "recommend", "--run", str(run_dir), "--history", ",".join(history)),
                f"--history: item {first + 1} of {len(history)}")  # its place, 1-based as the CLI counts
    http = _core(_http(client, "/recommend", {"history": history}, 404), f"history[{first}]")
    py = _core(_py(lambda: tt.recommend(run, history=history)), f"history[{first}]")
    assert cli == http == py == f"unknown item {history[first]!r} (not among the 60 known items){named}"


def test_every_unknown_history_id_of_an_explanation_is_named_in_one_wording(run_dir, run, client, capsys) -> None:
    """`explain --history 1,nope,nope2` and tt.explain_by_id named only `nope` while POST /explain named both."""
    history = ["i1", "nope", "i2", "nope2"]
    cli = _core(_cli(capsys, "explain", "--run", str(run_dir), "--history", ",".join(history), "--item", "i3"),
                "--history: item 2 of 4")
    http = _core(_http(client, "/explain", {"history": history, "item_id": "i3"}, 404), "history[1]")
    py = _core(_py(lambda: tt.explain_by_id(run, history=history, item_id="i3")), "history[1]")
    assert cli == http == py == ("unknown item 'nope' (not among the 60 known items); "
                                 "the history holds 2 unknown ids: 'nope', 'nope2'")


def test_explains_top_has_one_bound_and_one_wording(run_dir, run, client, capsys) -> None:
    """POST /explain refused top=501 ("Input should be less than or equal to 500": the server's max_history, the
    longest history a request may send) where `explain --top 501` and tt.explain_by_id(top=501) listed the whole
    window, and said top=-1 in pydantic's words. The answer lists at most the user tower's window whatever top is,
    so no surface bounds it above; below, one wording."""
    import json

    from twotower.cli.main import main

    cli = _core(_cli(capsys, "explain", "--run", str(run_dir), "--user", "u1", "--item", "i3", "--top", "-1"), "--top")
    http = _core(_http(client, "/explain", {"user_id": "u1", "item_id": "i3", "top": -1}), "body.top")
    py = _core(_py(lambda: tt.explain_by_id(run, user_id="u1", item_id="i3", top=-1)), "explain top")
    assert cli == http == py == "must be at least 0 (history items listed), got -1"
    capsys.readouterr()
    assert main(["explain", "--run", str(run_dir), "--user", "u1", "--item", "i3", "--top", "501", "--json"]) == 0
    cli_listed = json.loads(capsys.readouterr().out)["history"]
    r = client.post("/explain", json={"user_id": "u1", "item_id": "i3", "top": 501})
    assert r.status_code == 200, r.text
    http_listed = r.json()["explanation"]["history"]
    py_listed = tt.explain_by_id(run, user_id="u1", item_id="i3", top=501)["history"]
    assert len(cli_listed) == len(http_listed) == len(py_listed) == r.json()["explanation"]["history_window"] > 0
