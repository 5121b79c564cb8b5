"""Item filters are one feature on every surface: `recommend/similar --filter FIELD=V1,V2` (repeatable),
``tt.recommend/tt.similar(filters=...)`` and POST /recommend / /similar-items' ``"filters"`` give the same lists
and refuse a mistake in the same words after their own location (``--filter genres`` / ``filters.genres``).
Filters were HTTP's alone: the CLI had no flag for them, and Python no argument."""
from __future__ import annotations

import json

import pytest

import twotower as tt
from twotower.cli.main import main
from twotower.errors import TwoTowerError


@pytest.fixture(scope="module")
def run(run_dir):
    return tt.TrainedRun.load(run_dir)


def _cli_json(run_dir, capsys, *argv: str):
    capsys.readouterr()
    assert main([argv[0], "--run", str(run_dir), "--threads", "1", "--json", *argv[1:]]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def _ids(items: list[dict]) -> list[str]:
    return [i["item_id"] for i in items]


FLAGS = ["--filter", "genres=Comedy,Drama", "--filter", "year=1992,1993"]
FILTERS = {"genres": ["Comedy", "Drama"], "year": ["1992", "1993"]}  # i2, i22, i42


@pytest.mark.parametrize("cli, body, py", [
    (["recommend", "--user", "u3", "--k", "5"], {"user_id": "u3", "k": 5}, lambda run, f: tt.recommend(run, ["u3"], k=5, filters=f)),
    (["recommend", "--history", "i1,i5", "--k", "5"], {"history": ["i1", "i5"], "k": 5},
     lambda run, f: tt.recommend(run, history=["i1", "i5"], k=5, filters=f)),
])
def test_a_filtered_list_is_the_same_from_the_cli_http_and_python(run_dir, run, client, capsys, cli, body, py) -> None:
    http = client.post("/recommend", json={**body, "filters": FILTERS}).json()
    assert http["items"] and len(http["items"]) < 5  # the filter leaves fewer items than k: a shortfall, said alike
    assert _cli_json(run_dir, capsys, *cli, *FLAGS) == http
    assert py(run, FILTERS)[0] == http["items"]
    unfiltered = client.post("/recommend", json=body).json()
    assert _ids(http["items"]) != _ids(unfiltered["items"])  # the filter did something


def test_a_filtered_similar_list_is_the_same_from_the_cli_http_and_python(run_dir, run, client, capsys) -> None:
    http = client.post("/similar-items", json={"item_id": "i3", "k": 4, "filters": {"genres": ["Horror"]}}).json()
    assert _cli_json(run_dir, capsys, "similar", "--item", "i3", "--k", "4", "--filter", "genres=Horror") == http
    assert tt.similar(run, ["i3"], k=4, filters={"genres": ["Horror"]})[0] == http["items"]
    assert all("Horror" in i["genres"] for i in http["items"])


def test_users_csv_is_filtered_as_the_http_batch(run_dir, client, capsys) -> None:
    capsys.readouterr()
    assert main(["recommend", "--run", str(run_dir), "--threads", "1", "--users", "u1,u2", "--k", "3",
                 "--filter", "genres=Horror"]) == 0
    rows = [ln.split(",") for ln in capsys.readouterr().out.splitlines()[1:]]
    batch = client.post("/recommend/batch", json={"requests": [
        {"user_id": u, "k": 3, "filters": {"genres": ["Horror"]}} for u in ("u1", "u2")]}).json()["results"]
    assert [r[1] for r in rows] == _ids(batch[0]["items"]) + _ids(batch[1]["items"])


@pytest.mark.parametrize("flag, filters, status, http_at, cli_at, core", [
    ("genre=Comedy", {"genre": ["Comedy"]}, 422, "filters.genre", "--filter genre",
     "not an item metadata field; filterable fields: ['genres', 'title', 'year', 'item_id']; did you mean 'genres'?"),
    ("colour=red", {"colour": ["red"]}, 422, "filters.colour", "--filter colour",
     "not an item metadata field; filterable fields: ['genres', 'title', 'year', 'item_id']"),
    ("genres=Comdy", {"genres": ["Comdy"]}, 422, "filters.genres", "--filter genres",
     "no item has the value 'Comdy'; did you mean 'Comedy'?"),
    # the command line counts an id's place from 1, as --history's and --users' (it said item_id[1], HTTP's index)
    ("item_id=i1,nope,i2", {"item_id": ["i1", "nope", "i2"]}, 404, "filters.item_id[1]",
     "--filter item_id: item 2 of 3", "unknown item 'nope' (not among the 60 known items)"),
])
def test_a_bad_filter_is_refused_in_one_wording(run_dir, run, client, capsys, flag, filters, status, http_at, cli_at,
                                                core) -> None:
    r = client.post("/recommend", json={"user_id": "u3", "filters": filters})
    assert r.status_code == status and r.json()["error"]["message"] == f"{http_at}: {core}"
    with pytest.raises(TwoTowerError) as e:
        tt.recommend(run, ["u3"], filters=filters)
    assert str(e.value) == f"{http_at}: {core}"
    with pytest.raises(TwoTowerError) as e:
        tt.similar(run, ["i3"], filters=filters)
    assert str(e.value) == f"{http_at}: {core}"
    for cmd in (["recommend", "--user", "u3"], ["similar", "--item", "i3"]):
        capsys.readouterr()
        assert main([cmd[0], "--run", str(run_dir), *cmd[1:], "--filter", flag]) != 0
        err = capsys.readouterr().err
        assert f"error: {cli_at}: {core}" in err
        assert "ranking with" not in err  # refused before the index is opened


def test_python_refuses_a_string_of_values(run) -> None:
    """{"genres": "Comedy"} is a 422 over HTTP; from Python it was read letter by letter."""
    with pytest.raises(TwoTowerError, match=r'^filters.genres: must be a list of values, e.g. \{"genres": \["Comedy"\]\}'):
        tt.recommend(run, ["u3"], filters={"genres": "Comedy"})


@pytest.mark.parametrize("filters, http_at, http_sent, py_at, py_sent", [
    ("genres=Comedy", "filters", "a string", "filters", "a string"),
    (["genres"], "filters", "an array", "filters", "a list"),
    ({"genres": "Comedy"}, "filters.genres", "a string", "filters.genres", "a string"),
    ({"genres": 5}, "filters.genres", "a number", "filters.genres", "an int"),
], ids=["filters-a-string", "filters-a-list", "values-a-string", "values-a-number"])
def test_filters_of_the_wrong_shape_are_refused_in_one_wording(run, client, service, filters, http_at, http_sent,
                                                               py_at, py_sent) -> None:
    """"filters": "genres=Comedy" got pydantic's "body.filters: Input should be a valid dictionary" over HTTP (and
    {"genres": "Comedy"} "Input should be a valid list") where Python said "filters is a mapping of item metadata
    field -> list of values, e.g. {'genres': ['Comedy']}; got str": one message, naming the field, what was sent
    said in each surface's terms."""
    from twotower.serving import RecRequest

    shape = ('must map item metadata fields to lists of values, e.g. {"genres": ["Comedy"]}' if http_at == "filters"
             else 'must be a list of values, e.g. {"genres": ["%s"]}' % ("Comedy" if filters["genres"] == "Comedy"
                                                                      else "..."))
    for route, body in (("/recommend", {"user_id": "u3"}), ("/similar-items", {"item_id": "i3"})):
        r = client.post(route, json={**body, "filters": filters})
        assert r.status_code == 422 and r.json()["error"]["message"] == f"body.{http_at}: {shape}, got {http_sent}"
    r = client.post("/recommend/batch", json={"requests": [{"user_id": "u3", "filters": filters}]})
    assert r.json()["error"]["message"] == f"body.requests[0].{http_at}: {shape}, got {http_sent}"
    for call in (lambda: tt.recommend(run, ["u3"], filters=filters), lambda: tt.similar(run, ["i3"], filters=filters),
                 lambda: service.recommend(RecRequest(user_id="u3", filters=filters)),
                 lambda: service.similar_items("i3", 5, filters=filters)):
        with pytest.raises(TwoTowerError) as e:
            call()
        assert str(e.value) == f"{py_at}: {shape}, got {py_sent}"


def test_a_filter_field_given_twice_is_refused(run_dir, capsys) -> None:
    """A JSON object holds a field once: --filter genres=A --filter genres=B kept only one of them."""
    assert main(["recommend", "--run", str(run_dir), "--user", "u3", "--filter", "genres=Comedy",
                 "--filter", "genres=Drama"]) == 2
    assert "--filter genres is given twice; list its values in one flag, e.g. --filter genres=Comedy,Drama" in (
        capsys.readouterr().err)


@pytest.mark.parametrize("route, body", [
    ("/recommend", {"user_id": "u3", "k": 60}),
    ("/recommend", {"history": ["i1", "i5"], "k": 60}),
    ("/similar-items", {"item_id": "i3", "k": 60}),
])
def test_an_empty_filter_object_is_no_filter(run_dir, run, client, capsys, route, body) -> None:
    """``"filters": {}`` applied no filter, yet a short list's shortfall said "after the filters": the answer is
    the unfiltered one, word for word, on HTTP, in a batch and from Python."""
    unfiltered = client.post(route, json=body).json()
    assert unfiltered["shortfall"]["missing"] > 0  # k above what is left: a shortfall, whose reason is compared
    assert "filters" not in unfiltered["shortfall"]["reason"]
    assert client.post(route, json={**body, "filters": {}}).json() == unfiltered
    if route == "/recommend":
        batch = client.post("/recommend/batch", json={"requests": [{**body, "filters": {}}]}).json()["results"]
        assert batch == [unfiltered]
        from twotower.serving import RecRequest

        assert RecRequest(**{**body, "history": tuple(body.get("history", ())) or None}, filters={}).filters is None
        py = tt.recommend(run, history=body["history"], k=60, filters={}) if "history" in body else \
            tt.recommend(run, [body["user_id"]], k=60, filters={})
        assert py[0] == unfiltered["items"]
    else:
        assert tt.similar(run, ["i3"], k=60, filters={})[0] == unfiltered["items"]


def test_a_number_with_a_fraction_sent_back_as_a_filter_is_told_to_be_text(run, client) -> None:
    # an answer gives "price": 68.17; sent back as a filter value it was refused without saying what would match
    answer = client.post("/recommend", json={"user_id": "u3", "k": 2, "filters": {"year": [1992.5]}})
    assert answer.status_code == 422
    assert 'got a number with a fraction: send it as text ("1992.5"), as filters compare values as text' in \
        answer.json()["error"]["message"]
    with pytest.raises(TwoTowerError, match=r"got 1992.5: pass it as text \('1992.5'\), as filters compare values as text"):
        tt.recommend(run, ["u3"], k=2, filters={"year": [1992.5]})
