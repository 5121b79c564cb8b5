"""A request that breaks several rules at once is refused for the same one by every surface.

The order: the request schema's shape and size checks first (HTTP's 422 comes before any lookup), then the
lookups in the run. Each surface gets the same first refusal, in the words of pipeline/refusals.py, after its
own location (``--item``, ``body.exclude_items``, ``item_id``).
"""
from __future__ import annotations

import pytest

from twotower.pipeline.refusals import UNKNOWN_USER_HINT, unknown_user_hint
import twotower as tt
from tests.serving.refusal_words import cli_refusal as _cli
from tests.serving.refusal_words import py_refusal as _py
from twotower.cli.main import main


@pytest.fixture(scope="module")
def run(run_dir):
    return tt.TrainedRun.load(run_dir)


def _http(client, path: str, body: dict, status: int) -> str:
    r = client.post(path, json=body)
    assert r.status_code == status, r.text
    return r.json()["error"]["message"]


def test_too_many_exclude_items_is_said_before_an_unknown_item(client, service) -> None:
    """POST /similar-items answered the 422 on exclude_items; RecommenderService.similar_items looked the item up
    first and raised its 404 ("item_id: unknown item 'nope'")."""
    upper = service.settings.max_exclude
    excl = [f"x{n}" for n in range(upper + 1)]
    said = (f"must hold at most {upper} item ids (this server's max_exclude: `twotower serve --max-exclude` sets it), "
            f"got {upper + 1}")
    assert _http(client, "/similar-items", {"item_id": "nope", "exclude_items": excl}, 422) == \
        f"body.exclude_items: {said}"
    assert _py(lambda: service.similar_items("nope", 5, exclude_items=excl)) == f"exclude_items: {said}"


@pytest.mark.parametrize("cli_who, cli_at, who, at", [
    (["--user", "ghost"], "--user", {"user_id": "ghost"}, "user_id"),
    (["--history", "i1,nope"], "--history: item 2 of 2", {"history": ["i1", "nope"]}, "history[1]"),
])
def test_who_asks_is_looked_up_before_the_item_explained(run_dir, run, client, service, capsys,
                                                         cli_who, cli_at, who, at) -> None:
    """An unknown user (or history id) with an unknown item_id: `twotower explain` named the user, POST /explain and
    RecommenderService.explain the item, tt.explain_by_id the user but the item before a history id."""
    cli = _cli(capsys, "explain", "--run", str(run_dir), *cli_who, "--item", "nope2")
    assert cli.startswith(cli_at + ": ")
    core = cli.removeprefix(cli_at + ": ")
    assert core.startswith("unknown user 'ghost'" if "user_id" in who else "unknown item 'nope'")
    # an unknown user's hint names the flag where HTTP and Python say "the history": the rest is one wording
    core = core.replace(unknown_user_hint("--history"), UNKNOWN_USER_HINT)
    assert _http(client, "/explain", {**who, "item_id": "nope2"}, 404) == f"{at}: {core}"
    history = tuple(who["history"]) if "history" in who else None
    assert _py(lambda: service.explain(user_id=who.get("user_id"), history=history, item_id="nope2")) == f"{at}: {core}"
    assert _py(lambda: tt.explain_by_id(run, **who, item_id="nope2")) == f"{at}: {core}"


@pytest.mark.parametrize("cli_extra, extra, tt_extra, cli_at, http_at, py_at, status", [
    (["--filter", "colour=red"], {"filters": {"colour": ["red"]}}, {"filters": {"colour": ["red"]}},
     "--filter colour", "filters.colour", "filters.colour", 422),
    (["--exclude-items", "nope2"], {"exclude_items": ["nope2"]}, {"exclude": ["nope2"]},
     "--exclude-items: item 1 of 1", "exclude_items[0]", "exclude[0]", 404),
])
def test_a_new_users_history_ids_are_looked_up_after_filters_and_exclusions(
        run_dir, run, client, service, capsys, cli_extra, extra, tt_extra, cli_at, http_at, py_at, status) -> None:
    """An unknown history id with an unknown filter field (or exclude id): POST /recommend and the service named the
    filter (the exclude id), `recommend --history` and tt.recommend the history id."""
    from twotower.serving import RecRequest

    cli = _cli(capsys, "recommend", "--run", str(run_dir), "--history", "i1,nope", *cli_extra)
    assert cli.startswith(cli_at), cli
    core = cli.removeprefix(cli_at)  # ": " and the words
    assert _http(client, "/recommend", {"history": ["i1", "nope"], **extra}, status) == f"{http_at}{core}"
    req = RecRequest(history=("i1", "nope"), **{k: tuple(v) if isinstance(v, list) else v for k, v in extra.items()})
    assert _py(lambda: service.recommend(req)) == f"{http_at}{core}"
    assert _py(lambda: tt.recommend(run, history=["i1", "nope"], **tt_extra)) == f"{py_at}{core}"


def test_k_zero_is_said_before_an_unknown_user_in_one_wording(run_dir, run, client, service, capsys) -> None:
    """k=0 with an unknown user: the CLI, HTTP and tt.recommend said "k: must be at least 1, got 0"; a RecRequest for
    RecommenderService said "k must be a positive integer or None (the service's default_k), got 0"."""
    from twotower.serving import RecRequest

    said = "must be at least 1, got 0"
    assert _cli(capsys, "recommend", "--run", str(run_dir), "--user", "ghost", "--k", "0") == f"--k: {said}"
    assert _http(client, "/recommend", {"user_id": "ghost", "k": 0}, 422) == f"body.k: {said}"
    assert _py(lambda: service.recommend(RecRequest(user_id="ghost", k=0))) == f"k: {said}"
    assert _py(lambda: tt.recommend(run, ["ghost"], k=0)) == f"k: {said}"


@pytest.mark.parametrize("k", ["5", 5.5, True])
def test_a_k_that_is_no_integer_is_refused_by_the_service_in_ks_words(service, k) -> None:
    """RecRequest(k="5") was refused as it was made ("k must be a positive integer or None ..."), before the fields
    HTTP's schema reads first; the service refuses it where it checks k, in the words tt.recommend uses."""
    from twotower.serving import RecRequest

    req = RecRequest(history=("i1",), k=k)  # made: its k is checked with the request's other fields
    upper = service.settings.max_k
    note = " (only ids accept text as well as integers)" if isinstance(k, str) else ""
    assert _py(lambda: service.recommend(req)) == f"k: must be an integer from 1 to {upper}, got {k!r}{note}"
    assert _py(lambda: tt.recommend(service.run, history=["i1"], k=k)) == \
        f"k: must be an integer from 1 to 10000, got {k!r}{note}"


@pytest.mark.parametrize("k, py_sent, http_sent", [
    ("5", "'5'", "a string"),
    (5.5, "5.5", "a number with a fraction"),
    (True, "True", "a boolean"),
    (None, "None", "null"),
], ids=["string", "fraction", "boolean", "null"])
def test_a_k_that_is_no_integer_is_said_in_one_wording_over_http_and_from_python(client, service, k, py_sent,
                                                                                  http_sent) -> None:
    """HTTP said "body.k: must be a JSON integer such as 5 (not a string such as "5"; ...)", Python "k: must be an
    integer from 1 to 1000, got '5'": one message (k_refusal), what was sent said in each surface's terms."""
    from twotower.serving import RecRequest

    note = " (only ids accept text as well as integers)" if isinstance(k, str) else ""
    said = f"must be an integer from 1 to {service.settings.max_k}, got {{}}{note}"
    assert _http(client, "/recommend", {"history": ["i1"], "k": k}, 422) == "body.k: " + said.format(http_sent)
    assert _http(client, "/recommend/batch", {"requests": [{"history": ["i1"], "k": k}]}, 422) == \
        "body.requests[0].k: " + said.format(http_sent)
    if k is not None:  # None is RecRequest's "the service's default_k"
        assert _py(lambda: service.recommend(RecRequest(history=("i1",), k=k))) == "k: " + said.format(py_sent)


@pytest.mark.parametrize("command, who, route, body, py", [
    ("recommend", ["--user", "u1"], "/recommend", {"user_id": "u1"}, lambda run, k: tt.recommend(run, ["u1"], k=k)),
    ("recommend", ["--history", "i1,i5"], "/recommend", {"history": ["i1", "i5"]},
     lambda run, k: tt.recommend(run, history=["i1", "i5"], k=k)),
    ("similar", ["--item", "i1"], "/similar-items", {"item_id": "i1"}, lambda run, k: tt.similar(run, ["i1"], k=k)),
], ids=["recommend-user", "recommend-history", "similar"])
@pytest.mark.parametrize("typed, py_k, py_sent, http_k, http_sent", [
    ("5.5", 5.5, "5.5", 5.5, "a number with a fraction"),
    ("five", "five", "'five' (only ids accept text as well as integers)", "five", "a string (only ids accept text "
     "as well as integers)"),
], ids=["fraction", "word"])
def test_a_k_flag_that_is_no_integer_is_said_in_the_words_of_http_and_python(
        run_dir, run, client, service, capsys, command, who, route, body, py, typed, py_k, py_sent, http_k,
        http_sent) -> None:
    """`recommend --k 5.5` got argparse's "argument --k: invalid int value: '5.5'" (after the usage lines) where
    HTTP said "body.k: must be an integer from 1 to 1000, got a number with a fraction" and Python "k: must be an
    integer from 1 to 10000, got 5.5": one message, what was typed quoted, the CLI's bound Python's (MAX_K)."""
    from twotower.config import MAX_K

    cli = _cli(capsys, command, "--run", str(run_dir), *who, "--k", typed)
    assert cli == f"--k: must be an integer from 1 to {MAX_K}, got {typed!r}"
    assert _py(lambda: py(run, py_k)) == f"k: must be an integer from 1 to {MAX_K}, got {py_sent}"
    upper = service.settings.max_k
    assert _http(client, route, {**body, "k": http_k}, 422) == f"body.k: must be an integer from 1 to {upper}, got {http_sent}"


def test_a_k_flag_that_is_no_integer_exits_as_other_bad_flags(run_dir, capsys) -> None:
    """Status 2, as `--k 0` and argparse's own refusals, with one error line and no usage lines."""
    capsys.readouterr()
    assert main(["recommend", "--run", str(run_dir), "--user", "u1", "--k", "5.5"]) == 2
    err = capsys.readouterr().err
    assert "usage:" not in err and err.strip() == "error: --k: must be an integer from 1 to 10000, got '5.5'"
    assert main(["recommend", "--run", str(run_dir), "--user", "u1", "--k", "x" * 30]) == 2
    assert capsys.readouterr().err.strip().endswith("got a value of 30 characters")


@pytest.mark.parametrize("explain_k, py_sent, http_sent", [
    (0, "0", "0"),
    (-1, "-1", "-1"),
    ("cap+1", None, None),
    (5.5, "5.5", "a number with a fraction"),
    ("5", "'5' (only ids accept text as well as integers)", "a string (only ids accept text as well as integers)"),
    (True, "True", "a boolean"),
], ids=["zero", "negative", "over-cap", "fraction", "string", "boolean"])
def test_explain_k_is_refused_in_one_wording_over_http_and_from_python(client, service, explain_k, py_sent,
                                                                        http_sent) -> None:
    """POST /recommend said "body.explain_k: must be at least 1, got 0" (or "must be a JSON integer such as 5, got
    ...", "must be at most 10 (this server's explain_k: ...)"), RecommenderService "explain_k must be a positive
    integer or None, got 0" (or "explain_k 11 is above this service's explain_k 10 (ServiceSettings.explain_k)"):
    one message (k_refusal, the bound this server's explain_k), what was sent said in each surface's terms."""
    from twotower.serving import RecRequest

    cap = service.settings.explain_k
    if explain_k == "cap+1":
        explain_k = py_sent = http_sent = cap + 1
    if isinstance(explain_k, int) and not isinstance(explain_k, bool):
        said = ("must be at least 1, got {}" if explain_k < 1 else
                f"must be at most {cap} (this server's explain_k: `twotower serve --explain-k` sets it), got {{}}")
    else:
        said = f"must be an integer from 1 to {cap}, got {{}}"
    body = {"user_id": "u1", "explain": True, "explain_k": explain_k}
    assert _http(client, "/recommend", body, 422) == "body.explain_k: " + said.format(http_sent)
    assert _http(client, "/recommend/batch", {"requests": [body]}, 422) == \
        "body.requests[0].explain_k: " + said.format(http_sent)
    req = RecRequest(user_id="u1", explain=True, explain_k=explain_k)
    assert _py(lambda: service.recommend(req)) == "explain_k: " + said.format(py_sent)
    assert _py(lambda: service.recommend_batch([req])) == "requests[0].explain_k: " + said.format(py_sent)


def test_explain_k_over_the_cap_without_explain_is_said_for_its_value_first(client, service) -> None:
    """The schema checks explain_k's value, then that explain is sent: the service said "needs explain=True" first."""
    from twotower.serving import RecRequest

    over = service.settings.explain_k + 1
    http = _http(client, "/recommend", {"user_id": "u1", "explain_k": over}, 422)
    assert http.startswith("body.explain_k: must be at most ")
    assert _py(lambda: service.recommend(RecRequest(user_id="u1", explain_k=over))) == http.removeprefix("body.")


def _too_long_history(service) -> tuple[list[str], str]:
    upper = service.settings.max_history
    return [f"i{n % 5}" for n in range(upper + 1)], (
        f"history: must hold at most {upper} item ids (this server's max_history: `twotower serve --max-history` "
        f"sets it), got {upper + 1}")


@pytest.mark.parametrize("extra", [
    {"k": 0},
    {"k": "max_k+1"},
    {"k": "5"},
    {"k": 5.5},
    {"user_features": {f"c{n}": 1 for n in range(65)}},
    {"filters": {"genres": "Comedy"}},
    {"filters": ["genres"]},
], ids=["k-zero", "k-over-max-k", "k-string", "k-fraction", "65-user-features", "filter-values-a-string",
        "filters-a-list"])
def test_a_too_long_history_is_said_before_k_and_user_features(client, service, extra) -> None:
    """POST /recommend checks its fields in the schema's order (user_id, history, user_features, k, ...), so a
    501-id history with k=0 (or 65 user_features columns) was refused for the history over HTTP; RecommenderService
    named k (RecRequest itself, or check_k, before check_sizes) or the user features (checked first). Filters of
    the wrong shape ({"genres": "Comedy"}) were refused by RecRequest as it was made, before the history."""
    from twotower.serving import RecRequest

    if extra.get("k") == "max_k+1":
        extra = {"k": service.settings.max_k + 1}
    history, said = _too_long_history(service)
    assert _http(client, "/recommend", {"history": history, **extra}, 422) == f"body.{said}"
    assert _py(lambda: service.recommend(RecRequest(history=tuple(history), **extra))) == said
    batch = _http(client, "/recommend/batch", {"requests": [{"history": history, **extra}]}, 422)
    assert batch == f"body.requests[0].{said}"
    assert _py(lambda: service.recommend_batch([RecRequest(history=tuple(history), **extra)])) == \
        f"requests[0].{said}"


@pytest.mark.parametrize("extra", [
    {"user_features": {f"c{n}": 1 for n in range(65)}},
    {"item_id": "x" * 300},
], ids=["65-user-features", "300-character-item-id"])
def test_a_too_long_history_is_said_first_by_explain_too(client, service, extra) -> None:
    """POST /explain's schema reads user_id, history, user_features, item_id: the service checked the features and
    the item id before the history."""
    history, said = _too_long_history(service)
    body = {"history": history, "item_id": "i1", **extra}
    assert _http(client, "/explain", body, 422) == f"body.{said}"
    assert _py(lambda: service.explain(**{**body, "history": tuple(history)})) == said


def test_a_too_long_item_id_is_said_before_k_by_similar_items(client, service) -> None:
    """POST /similar-items reads item_id before k: the service checked k first."""
    item = "x" * 300
    http = _http(client, "/similar-items", {"item_id": item, "k": 0}, 422)
    assert http.startswith("body.item_id: "), http
    assert _py(lambda: service.similar_items(item, 0)) == http.removeprefix("body.")


@pytest.mark.parametrize("extra", [
    {"k": 0},
    {"k": "max_k+1"},
    {"exclude_items": "max_exclude+1"},
], ids=["k-zero", "k-over-max-k", "too-many-exclude-items"])
def test_an_empty_history_is_said_after_the_schemas_checks(client, service, extra) -> None:
    """POST /recommend refuses an empty history after its schema's checks (the route decides, with the run, whether
    user_features alone describe the user), so "history": [] with k=0 (or 501 exclude_items) was refused for k; a
    RecRequest refused the empty history as it was made, before the service saw k."""
    from twotower.serving import RecRequest

    if extra.get("k") == "max_k+1":
        extra = {"k": service.settings.max_k + 1}
    if "exclude_items" in extra:
        extra = {"exclude_items": [f"i{n % 5}" for n in range(service.settings.max_exclude + 1)]}
    http = _http(client, "/recommend", {"history": [], **extra}, 422)
    field = next(iter(extra))
    assert http.startswith(f"body.{field}: "), http
    said = http.removeprefix("body.")
    req = {k: tuple(v) if isinstance(v, list) else v for k, v in extra.items()}
    assert _py(lambda: service.recommend(RecRequest(history=(), **req))) == said
    assert _http(client, "/recommend/batch", {"requests": [{"history": [], **extra}]}, 422) == \
        f"body.requests[0].{said}"
    assert _py(lambda: service.recommend_batch([RecRequest(history=(), **req)])) == f"requests[0].{said}"


@pytest.mark.parametrize("body, field", [
    ({"user_id": "u1", "k": 0, "explain_k": 3}, "k"),
    ({"user_id": "u1", "explain": True, "explain_k": "cap+1", "filters": {"colour": ["red"]}}, "explain_k"),
    ({"user_id": "u1", "explain_k": 3, "filters": {"colour": ["red"]}}, "explain_k"),
], ids=["k-zero-and-explain-k-without-explain", "explain-k-over-cap-and-unknown-filter",
        "explain-k-without-explain-and-unknown-filter"])
def test_explain_k_is_checked_where_the_schema_checks_it(client, service, body, field) -> None:
    """POST /recommend's schema checks explain_k after k and before any lookup: a RecRequest refused a stray
    explain_k as it was made (before the service saw k=0), and the service an explain_k over its cap only after the
    filters were looked up and the index searched."""
    from twotower.serving import RecRequest

    if body.get("explain_k") == "cap+1":
        body = {**body, "explain_k": service.settings.explain_k + 1}
    assert _http(client, "/recommend", body, 422).startswith(f"body.{field}: ")
    said = _py(lambda: service.recommend(RecRequest(**body)))
    assert said.startswith((f"{field}: ", "explain_k needs explain=True")), said
