"""`--user-features` refusals name the flag, as `--filter genres: ...` names its own, before the index is opened:
the command line printed Python's and HTTP's field (``user_features.age: ...``), which no flag is called."""
from __future__ import annotations

import json

import pytest

from twotower.cli.main import main


@pytest.mark.parametrize(("features", "said"), [
    ({"c0": 1}, "--user-features c0: not a user feature of this run; its user tower reads age"),
    # a string is no number, whatever it spells: "a finite number, got '25'" did not say what was wrong with 25
    ({"age": "x"}, "--user-features age: expected a JSON number, got the string 'x'"),
    ({"age": "25"}, """--user-features age: expected a JSON number, got the string '25' (write {"age": 25})"""),
    ({"age": " 2.5e1 "}, """--user-features age: expected a JSON number, got the string ' 2.5e1 ' (write {"age": 2.5e1})"""),
    ({"age": "nan"}, "--user-features age: expected a JSON number, got the string 'nan'"),
    ({"age": [1]}, "--user-features age: a finite number, got [1]"),
    ({"age": 1e300}, "--user-features age: a finite number (float32 range), got 1e+300"),
    # the values as typed (JSON), not as Python writes them (['1'], {'a': 1}); true/false is 1/0, as the table reads it
    ({"age": ["1"]}, '--user-features age: a finite number, got ["1"]'),
    ({"age": {"a": 1}}, '--user-features age: a finite number, got {"a": 1}'),
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


@pytest.mark.parametrize(("typed", "said"), [("[1]", "an array"), ("null", "null"), ('"age"', "a string"),
                                             ("true", "a boolean")])
def test_a_value_that_is_no_object_is_named_in_json_words(feature_run, capsys, typed, said) -> None:
    """'got list', 'got NoneType', 'got str': Python's type names for what was typed as JSON; now the words of
    POST /recommend's 422 for "user_features": "age"."""
    capsys.readouterr()
    assert main(["recommend", "--run", str(feature_run.dir), "--history", "i0", "--user-features", typed]) == 2
    assert capsys.readouterr().err.rstrip().endswith(
        f'error: --user-features: must map user feature columns to values, e.g. {{"age": 25, "gender": "F"}}, got {said}')


@pytest.mark.parametrize("command", ["recommend", "explain"])
def test_a_value_training_never_saw_is_warned_of_by_the_flag(feature_run, capsys, command) -> None:
    """The warning was a log line naming HTTP's field: '... WARNING twotower.pipeline.recommend: user_features.age:
    500 is ...'; --json's answer keeps POST /recommend's (/explain's) words."""
    hist = ",".join(feature_run.item_vocab.ids[r] for r in feature_run.history.of(2))
    extra = ["--item", "i0"] if command == "explain" else []
    argv = [command, "--run", str(feature_run.dir), "--threads", "1", "--history", hist, *extra,
            "--user-features", '{"age": 500}']
    capsys.readouterr()
    assert main(argv) == 0
    err = capsys.readouterr().err
    warned = [ln for ln in err.splitlines() if "500 is" in ln]
    assert len(warned) == 1 and warned[0].startswith("warning: --user-features age: 500 is "), err
    assert "standard deviations from the training mean" in warned[0] and "user_features" not in err
    assert main([*argv, "--json"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out)["warnings"][0].startswith("user_features.age: 500 is ")


def test_feature_columns_a_tower_is_told_not_to_read_are_said_to_have_no_effect(tmp_path, caplog, capsys) -> None:
    """model.user.use_features=false beside data.user_numeric: the columns were read and fitted without a word,
    and a later --user-features was told the run "was trained without user feature columns"."""
    from tests.explain.explain_tiny_run import train_tiny_run

    with caplog.at_level("WARNING", logger="twotower.pipeline.run"):
        out = train_tiny_run(tmp_path / "nofeat", user_features=True, epochs=1,
                             extra=("model.user.use_features=false",))
    assert ("data.user_numeric has no effect: the user tower reads no features with model.user.use_features=false"
            in caplog.text)
    assert "data.item_" not in caplog.text  # the item tower reads its columns
    assert main(["recommend", "--run", str(out), "--threads", "1", "--history", "i1", "--user-features",
                 '{"age": 30}']) == 2
    assert "it was trained with model.user.use_features=false" in capsys.readouterr().err


def test_a_missing_feature_encoder_is_named_not_blamed_on_training(feature_run, tmp_path, capsys) -> None:
    """Loaded with --no-verify without its features/users.json, a run trained with user features refused a new
    user's features as "this run's user tower reads no user features (it was trained without user feature
    columns ...)": the file is what is wrong."""
    import os
    import shutil

    from twotower.errors import DataError
    from twotower.explain import explain_by_id
    from twotower.pipeline.artifacts import TrainedRun

    out = tmp_path / "run"
    shutil.copytree(feature_run.dir, out)
    (out / "features" / "users.json").unlink()
    said = f"{out / 'features' / 'users.json'}: missing (the artefact is incomplete)"
    with pytest.raises(DataError, match="^user_features: ") as e:
        explain_by_id(TrainedRun.load(out, verify=False), history=["i1"], item_id="i0", user_features={"age": 30})
    assert said in str(e.value) and "trained without" not in str(e.value)
    capsys.readouterr()
    try:
        assert main(["recommend", "--run", str(out), "--no-verify", "--history", "i1", "--user-features",
                     '{"age": 30}']) == 2
    finally:
        os.environ.pop("TWOTOWER_NO_VERIFY", None)  # main sets it for the process
    err = capsys.readouterr().err
    assert f"error: --user-features: {said}" in err and "trained without" not in err
