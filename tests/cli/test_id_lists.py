"""Id lists on the command line take a JSON array, for ids that hold a comma ("it,em").

Before: --history / --users were split at every comma, so the item "it,em" could not be named at all
(`--history 'it,em'` asked for items 'it' and 'em': "unknown item 'it'").
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from twotower.cli.id_lists import parse_id_list
from twotower.cli.main import main
from twotower.errors import ConfigError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serving"))
from tiny_run import build_tiny_run  # noqa: E402


def test_comma_lists_and_json_arrays():
    assert parse_id_list("50, 181 ,172", "--history") == ["50", "181", "172"]
    assert parse_id_list(' ["it,em", "007", 7] ', "--history") == ["it,em", "007", "7"]
    with pytest.raises(ConfigError, match=r"--history: starts with '\[' but is not a JSON array"):
        parse_id_list('["it,em"', "--history")
    # where it breaks, in the typed value's characters (the decoder's words alone read "Expecting ',' delimiter")
    with pytest.raises(ConfigError, match=r"not a JSON array \(Expecting ',' delimiter at character 6\)"):
        parse_id_list('["a" "b"]', "--users")
    with pytest.raises(ConfigError, match=r"--users: a JSON array must hold ids"):
        parse_id_list('[["a"]]', "--users")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return build_tiny_run(tmp_path_factory.mktemp("idlists"))


def test_recommend_and_explain_read_a_json_history(run_dir, capsys):
    assert main(["recommend", "--run", str(run_dir), "--history", '["i1", "i2"]', "--k", "3", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["items"]) == 3
    assert main(["explain", "--run", str(run_dir), "--history", '["i1", "i2"]', "--item", "i3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["item_id"] == "i3"


def test_a_json_array_s_ids_are_stripped_before_they_are_counted_distinct(run_dir, capsys, caplog):
    """'["u1", " u1"]' is one user twice, as 'u1, u1' is: the JSON ids were deduplicated before their spaces were
    dropped, so --users wrote two identical lists (and --items too) without the "2 ids, 1 distinct" warning."""
    assert parse_id_list('["u1", " u1 "]', "--users") == ["u1", "u1"]
    for argv, flag, header in ((["recommend", "--users", '["u1", " u1"]'], "--users", "user_id"),
                               (["similar", "--items", '["i1", " i1"]'], "--items", "item_id")):
        capsys.readouterr()
        caplog.clear()
        with caplog.at_level("WARNING", logger="twotower"):
            assert main([argv[0], "--run", str(run_dir), *argv[1:], "--k", "1", "--out", "-"]) == 0
        rows = capsys.readouterr().out.splitlines()
        assert rows[0].startswith(header) and len(rows) == 2  # one list, not two identical ones
        assert f"{flag}: 2 ids, 1 distinct" in caplog.text
