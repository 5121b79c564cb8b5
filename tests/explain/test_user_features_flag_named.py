"""`--user-features` refusals name the flag, as `--filter genres: ...` names its own, before the index is opened:
the command line printed Python's and HTTP's field (``user_features.age: ...``), which no flag is called."""
from __future__ import annotations

import json

import pytest

from twotower.cli.main import main


@pytest.mark.parametrize(("features", "said"), [
    ({"c0": 1}, "--user-features c0: not a user feature of this run; its user tower reads age"),
    ({"age": "x"}, "--user-features age: a finite number, got 'x'"),
    ({"age": [1]}, "--user-features age: a finite number, got [1]"),
    ({"age": 1e300}, "--user-features age: a finite number (float32 range), got 1e+300"),
])
@pytest.mark.parametrize("command", ["recommend", "explain"])
def test_a_bad_column_or_value_is_named_by_the_flag(feature_run, capsys, features, said, command) -> None:
    hist = ",".join(feature_run.item_vocab.ids[r] for r in feature_run.history.of(2))
    extra = ["--item", "i0"] if command == "explain" else []
    for history in (hist, ""):  # with a history, and a user with no history yet
        capsys.readouterr()
        assert main([command, "--run", str(feature_run.dir), "--threads", "1", "--history", history, *extra,
                     "--user-features", json.dumps(features)]) == 2
        err = capsys.readouterr().err
        assert err.rstrip().endswith(f"error: {said}"), (history, err)
        assert "user_features" not in err and "ranking with" not in err  # refused before the index is opened


def test_a_run_without_user_features_is_named_by_the_flag(mean_run, capsys) -> None:
    capsys.readouterr()
    assert main(["recommend", "--run", str(mean_run.dir), "--threads", "1", "--history", mean_run.item_vocab.ids[0],
                 "--user-features", '{"age": 3}']) == 2
    err = capsys.readouterr().err
    assert "error: --user-features: this run's user tower reads no user features" in err and "ranking with" not in err
