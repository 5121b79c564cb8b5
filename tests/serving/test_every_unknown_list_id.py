"""Every list of ids names every unknown id, not only the first, on every surface that takes the list.

A history already did (``the history holds 2 unknown ids: 'nope', 'nope2'``); `recommend --users u1,nope,nope2`,
`similar --items`, `--filter item_id=...` and their Python and HTTP spellings named only ``nope``, so fixing the list
took one command per id. The first unknown id keeps its place (``--users: user 2 of 3``, ``user_ids[1]``), the
others follow by name, the first ten then a count, in one wording everywhere.
"""
from __future__ import annotations

import pytest

import twotower as tt
from twotower.pipeline.refusals import UNKNOWN_USER_HINT, unknown_user_hint
from tests.serving.refusal_words import cli_refusal as _cli
from tests.serving.refusal_words import py_refusal as _py


@pytest.fixture(scope="module")
def run(run_dir):
    return tt.TrainedRun.load(run_dir)


def _named(what: str, ids: list[str]) -> str:
    return f"; the {what} holds {len(ids)} unknown ids: " + ", ".join(repr(i) for i in ids)


def test_every_unknown_user_of_a_list_is_named(run_dir, run, capsys) -> None:
    users = ["u1", "nope", "u2", "nope2", "nope"]
    said = f"unknown user 'nope' (not among the 40 known users){_named('user list', ['nope', 'nope2'])}; "
    assert _cli(capsys, "recommend", "--run", str(run_dir), "--users", ",".join(users)) == \
        f"--users: user 2 of 5: {said}{unknown_user_hint('--history')}"  # the flag, where Python says "the history"
    said += UNKNOWN_USER_HINT
    assert _py(lambda: tt.recommend(run, users)) == f"user_ids[1]: {said}"


def test_a_long_list_of_unknown_users_is_bounded(run_dir, run, capsys) -> None:
    users = ["u1"] + [f"x{n}" for n in range(12)]
    said = _cli(capsys, "recommend", "--run", str(run_dir), "--users", ",".join(users))
    assert ("; the user list holds 12 unknown ids: " + ", ".join(f"'x{n}'" for n in range(10)) + " and 2 more") in said
    assert said.startswith("--users: user 2 of 13: unknown user 'x0'")


def test_every_unknown_item_of_similar_items_is_named(run_dir, run, capsys) -> None:
    items = ["i1", "i2", "nope", "nope2", "i2"]
    said = f"unknown item 'nope' (not among the 60 known items){_named('item list', ['nope', 'nope2'])}"
    assert _cli(capsys, "similar", "--run", str(run_dir), "--items", ",".join(items)) == f"--items: item 3 of 5: {said}"
    assert _py(lambda: tt.similar(run, items)) == f"item_ids[2]: {said}"


def test_every_unknown_item_of_a_filter_is_named_on_every_surface(run_dir, run, client, capsys) -> None:
    ids = ["i1", "nope", "i2", "nope2"]
    said = f"unknown item 'nope' (not among the 60 known items){_named('item_id filter', ['nope', 'nope2'])}"
    filters = {"item_id": ids}
    r = client.post("/recommend", json={"user_id": "u3", "filters": filters})
    assert r.status_code == 404 and r.json()["error"]["message"] == f"filters.item_id[1]: {said}"
    assert _py(lambda: tt.recommend(run, ["u3"], filters=filters)) == f"filters.item_id[1]: {said}"
    assert _py(lambda: tt.similar(run, ["i3"], filters=filters)) == f"filters.item_id[1]: {said}"
    for cmd in (["recommend", "--user", "u3"], ["similar", "--item", "i3"]):
        assert _cli(capsys, cmd[0], "--run", str(run_dir), *cmd[1:], "--filter", "item_id=" + ",".join(ids)) == \
            f"--filter item_id: item 2 of 4: {said}"


@pytest.mark.parametrize("cmd", [["recommend", "--user", "u3"], ["similar", "--item", "i3"]])
def test_every_unknown_excluded_item_is_named_as_the_lists_are(run_dir, run, client, capsys, cmd) -> None:
    """--exclude-items named every unknown id already: the lists above now say it the same way."""
    said = f"unknown item 'nope' (not among the 60 known items){_named('exclusion list', ['nope', 'nope2'])}"
    assert _cli(capsys, cmd[0], "--run", str(run_dir), *cmd[1:], "--exclude-items", "i1,nope,nope2") == \
        f"--exclude-items: item 2 of 3: {said}"


def test_every_unknown_user_of_a_users_file_is_named(run_dir, tmp_path, capsys) -> None:
    path = tmp_path / "users.csv"
    path.write_text("user_id\nu1\nnope\nu2\nnope2\n")
    said = _cli(capsys, "recommend", "--run", str(run_dir), "--users", str(path))
    assert "row 3, column 'user_id': unknown user 'nope' (not among the 40 known users)" \
           f"{_named('user list', ['nope', 'nope2'])}" in said
