"""`twotower recommend`: argument checks before the run loads, --json shortfall like HTTP, title-less lists."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from twotower.cli.main import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serving"))
from tiny_run import build_tiny_run  # noqa: E402


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return build_tiny_run(tmp_path_factory.mktemp("recout"))


@pytest.mark.parametrize("k", ["0", "-5", "100000"])
def test_bad_k_is_refused_before_the_run_is_read(tmp_path, capsys, k):
    # the run folder does not even exist: the k error must come first, with nothing printed before it
    assert main(["recommend", "--run", str(tmp_path / "nope"), "--user", "u1", "--k", k]) == 2
    err = capsys.readouterr().err
    assert f"--k: must be at {'least 1' if int(k) < 1 else 'most 10000'}" in err and "ranking with" not in err


def test_json_says_shortfall_only_for_a_short_list(run_dir, capsys):
    from twotower.pipeline.artifacts import TrainedRun

    n_items = TrainedRun.load(run_dir).n_items
    assert main(["recommend", "--run", str(run_dir), "--history", "i1", "--k", "3", "--json"]) == 0
    full = json.loads(capsys.readouterr().out)
    assert len(full["items"]) == 3 and "shortfall" not in full
    assert main(["recommend", "--run", str(run_dir), "--history", "i1", "--k", str(n_items + 5), "--json"]) == 0
    short = json.loads(capsys.readouterr().out)
    assert short["shortfall"]["missing"] == n_items + 5 - len(short["items"]) > 0


def test_items_without_titles_are_named_once(capsys):
    from twotower.cli.printing import _print_items

    _print_items([{"rank": 1, "item_id": "150", "score": 0.25}, {"rank": 2, "item_id": "7", "score": 0.2,
                   "title": "Heat"}], False, "top 2", 2)
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].strip() == "1. item 150 (score 0.250)"
    assert lines[2].strip() == "2. Heat (item 7, score 0.200)"


def test_users_file_with_repeated_users_gives_one_list_per_user(run_dir, tmp_path, capsys):
    """An interactions file names a user once per row; the output has one top-k per distinct user."""
    from twotower.pipeline.artifacts import TrainedRun

    users = TrainedRun.load(run_dir).user_vocab.ids[:3]
    f = tmp_path / "users.csv"
    f.write_text("user_id,item_id\n" + "".join(f"{u},x{n}\n" for n in range(4) for u in users))
    out = tmp_path / "recs.csv"
    assert main(["recommend", "--run", str(run_dir), "--users", str(f), "--k", "2", "--out", str(out)]) == 0
    import pandas as pd

    recs = pd.read_csv(out, dtype={"user_id": str})
    assert len(recs) == 3 * 2 and list(dict.fromkeys(recs["user_id"])) == list(users)
    assert main(["recommend", "--run", str(run_dir), "--users", f"{users[0]},{users[0]}", "--k", "2", "--out", "-"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 1 + 2  # header + one list


def test_users_naming_a_missing_file_says_so(run_dir, tmp_path, capsys):
    assert main(["recommend", "--run", str(run_dir), "--users", str(tmp_path / "nofile.csv")]) == 2
    err = capsys.readouterr().err
    assert "no such file" in err and "unknown user" not in err


def test_shortfall_line_names_a_new_user_plainly(run_dir, capsys):
    from twotower.pipeline.artifacts import TrainedRun

    n_items = TrainedRun.load(run_dir).n_items
    assert main(["recommend", "--run", str(run_dir), "--history", "i1", "--k", str(n_items + 5)]) == 0
    err = capsys.readouterr().err
    assert "(e.g. a new user:" in err and "user a new user" not in err


def test_a_users_list_longer_than_a_file_name_is_read_as_ids(run_dir, capsys):
    # a thousand comma-separated ids went to os.stat as a path and crashed with "File name too long"
    from twotower.pipeline.artifacts import TrainedRun

    users = TrainedRun.load(run_dir).user_vocab.ids[:2]
    spec = ",".join(users * 200)
    assert len(spec) > 300
    assert main(["recommend", "--run", str(run_dir), "--users", spec, "--k", "2", "--out", "-"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1 + 2 * 2  # header + one list per distinct user


@pytest.fixture(scope="module")
def numeric_ids_run(tmp_path_factory):
    return build_tiny_run(tmp_path_factory.mktemp("numeric_ids"), rename_users={"u7": "7", "u8": "007"})


def test_users_file_ids_are_text_as_in_every_input_file(numeric_ids_run, tmp_path, capsys):
    # the file was read with numbers guessed: 007 became user 7 (7's list printed as 007's, silently)
    f = tmp_path / "users.csv"
    f.write_text("user_id,item_id\n007,i1\n7,i2\n")
    assert main(["-q", "recommend", "--run", str(numeric_ids_run), "--users", str(f), "--k", "2", "--out", "-"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(",")[0] for line in out[1:]] == ["007", "007", "7", "7"]
    lists = main(["-q", "recommend", "--run", str(numeric_ids_run), "--users", "007,7", "--k", "2", "--out", "-"])
    assert lists == 0 and capsys.readouterr().out.splitlines() == out  # the file reads as the comma list does


@pytest.mark.parametrize("text, said", [
    ("user_id,item_id\n7,i1\n0007,i2\n", "row 3, column 'user_id': unknown user '0007'"),
    ("user_id,item_id\n7,i1\n,i2\n", "row 3, column 'user_id': empty id"),  # was: unknown user '7.0'
])
def test_a_bad_id_in_a_users_file_names_the_file_row_and_column(numeric_ids_run, tmp_path, capsys, text, said):
    f = tmp_path / "users.csv"
    f.write_text(text)
    assert main(["-q", "recommend", "--run", str(numeric_ids_run), "--users", str(f), "--out", "-"]) == 2
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines()[-1].startswith(f"error: file {f}, {said}") and captured.out == ""


def test_an_unknown_user_is_pointed_to_history(run_dir, capsys):
    """A user who first appears after training (e.g. only in the test split) got 'unknown user' alone; the flag
    named as the command line spells it (it said HTTP's "send them as the history")."""
    assert main(["recommend", "--run", str(run_dir), "--user", "ghost"]) == 2
    err = capsys.readouterr().err
    assert "--user: unknown user 'ghost'" in err
    assert "served from their items: send them as --history (item ids, oldest first) instead of the user id" in err
    assert "the history" not in err


def test_titles_with_line_breaks_and_escapes_stay_on_their_line(capsys):
    """A title holding a newline or a terminal escape was printed raw: the list's line split in two and
    ``\\x1b[...`` restyled the terminal; both are now written as escapes."""
    from twotower.cli.printing import _print_items

    _print_items([{"rank": 1, "item_id": "7", "score": 0.2, "title": "Line one\nLine \x1b[31mtwo 🎬",
                   "genres": "Drama\rX"}], False, "top 1", 1)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and "\x1b" not in lines[1]
    assert lines[1].strip() == "1. Line one\\nLine \\x1b[31mtwo 🎬 (item 7, score 0.200)  [Drama\\rX]"


def test_similar_s_heading_keeps_a_title_s_line_break_on_its_line(run_dir, capsys, monkeypatch):
    """`similar --item`'s heading printed the item's title raw, as the list below it no longer does: a title with a
    newline split the heading in two."""
    from twotower.serving.catalog import ItemCatalog

    monkeypatch.setattr(ItemCatalog, "display_name", lambda self, row: "Line one\nLine \x1b[31mtwo")
    assert main(["similar", "--run", str(run_dir), "--item", "i1", "--k", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "top 2 similar to Line one\\nLine \\x1b[31mtwo" and len(lines) == 3


def test_users_json_gives_each_score_to_the_digits_of_user_json(run_dir, capsys):
    """`--users 42,7 --json` printed scores to 10 decimals (0.7645612955) where `--user 42 --json`, `tt.recommend`
    and POST /recommend round to 6: the same lists, other digits."""
    assert main(["-q", "recommend", "--run", str(run_dir), "--users", "u1,u2", "--k", "5", "--json"]) == 0
    many = json.loads(capsys.readouterr().out)
    for user in ("u1", "u2"):
        assert main(["-q", "recommend", "--run", str(run_dir), "--user", user, "--k", "5", "--json"]) == 0
        one = json.loads(capsys.readouterr().out)["items"]
        assert [(r["item_id"], r["rank"], r["score"]) for r in many if r["user_id"] == user] == \
            [(r["item_id"], r["rank"], r["score"]) for r in one]
