"""evaluate_run from Python checks its arguments before any work, as `twotower evaluate` checks its flags."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from twotower.errors import ConfigError
from twotower.pipeline.artifacts import TrainedRun
from twotower.pipeline.evaluate_run import evaluate_run

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serving"))
from tiny_run import build_tiny_run  # noqa: E402


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> TrainedRun:
    return TrainedRun.load(build_tiny_run(tmp_path_factory.mktemp("evaluate-args")))


def test_a_split_other_than_test_or_valid_is_refused_not_scored_as_valid(run):
    with pytest.raises(ConfigError, match="^split: must be 'test' or 'valid', got 'train'$"):
        evaluate_run(run, split="train", baselines=())


@pytest.mark.parametrize(("baselines", "message"), [
    ("popularity", r"a sequence of names, e.g. \('popularity',\), not the string"),  # used to iterate its letters
    (("popularity", "knn"), "'knn' is not one of popularity, ease, itemknn"),
    (("popularity", "popularity"), "names a baseline twice"),
])
def test_bad_baselines_are_refused_before_anything_is_fitted(run, baselines, message, monkeypatch):
    module = sys.modules[evaluate_run.__module__]  # the package re-exports the function under the module's name
    monkeypatch.setattr(module, "run_matrices", lambda r: pytest.fail("work started before the arguments were checked"))
    with pytest.raises(ConfigError, match=message):
        evaluate_run(run, baselines=baselines)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"ks": 10}, r"^EvalProtocol\.ks: must be a sequence of positive integers, e.g. ks=\(10, 20\), got 10"),  # was a TypeError
    ({"ks": (0,)}, r"^EvalProtocol\.ks: must hold positive integers"),
    ({"select_metric": "ndcg@10"}, "metric 'ndcg@10' is not of the form NAME@K"),  # was after the two-tower row
])
def test_bad_cut_offs_or_selection_metric_are_refused_before_any_work(run, kwargs, message, monkeypatch):
    module = sys.modules[evaluate_run.__module__]
    monkeypatch.setattr(module, "run_matrices", lambda r: pytest.fail("work started before the arguments were checked"))
    with pytest.raises(ConfigError, match=message):
        evaluate_run(run, baselines=("popularity",), **kwargs)


def test_good_arguments_still_evaluate(run):
    rows = evaluate_run(run, split="valid", baselines=["popularity"], ks=(5,))
    assert [r["model"] for r in rows] == ["two-tower", "popularity"] and "NDCG@5" in rows[0]


def test_left_out_settings_are_the_runs_own_eval_settings(run, capsys):
    """The tiny run trained with eval.baselines=[]: evaluate (Python and CLI) agrees with what training evaluated,
    instead of adding the library's default baselines to the table."""
    import json

    from twotower.cli.main import main

    want_ks = run.config.eval.ks
    rows = evaluate_run(run)
    assert [r["model"] for r in rows] == ["two-tower"]
    assert {int(k.split("@")[1]) for k in rows[0] if k.startswith("NDCG@")} == set(want_ks)
    assert main(["evaluate", "--run", str(run.dir), "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert [r["model"] for r in cli] == ["two-tower"]
    assert main(["evaluate", "--run", str(run.dir), "--json", "--baselines", "popularity", "--ks", "5"]) == 0
    given = json.loads(capsys.readouterr().out)
    assert [r["model"] for r in given] == ["two-tower", "popularity"] and "NDCG@5" in given[0] and "NDCG@10" not in given[0]


@pytest.mark.parametrize("value", [-1, 0, 2.5, True])
def test_a_bad_ease_max_items_is_refused_before_any_work(run, value, monkeypatch):
    # -1 was taken and skipped EASE with "... items > eval.ease_max_items=-1" after the other rows were computed
    module = sys.modules[evaluate_run.__module__]
    monkeypatch.setattr(module, "run_matrices", lambda r: pytest.fail("work started before the arguments were checked"))
    with pytest.raises(ConfigError, match=r"^ease_max_items: must be an integer >= 1 .* got "):
        evaluate_run(run, ease_max_items=value)


def test_a_k_past_every_users_rankable_items_is_warned_about(run, caplog):
    """k one below the catalogue gave Recall 1.0 for every model, popularity included, with no warning: only
    k >= the catalogue was said to say nothing about the ranking, though each user's excluded history makes the
    lists hold every item they can be shown well before that."""
    k = run.n_items - 1  # every evaluated user has a training item excluded: their lists hold all the rest
    with caplog.at_level("WARNING", logger="twotower"):
        rows = evaluate_run(run, baselines=("popularity",), ks=(1, k))
    n = rows[0]["users_evaluated"]
    assert (f"k={k} reaches past the rankable items (the catalogue less the excluded history) of {n} of {n} "
            f"evaluated users") in caplog.text
    assert "k=1 reaches past" not in caplog.text


@pytest.fixture(scope="module")
def run_without_test(tmp_path_factory) -> TrainedRun:
    """A run trained on a train and a valid file alone: no test split."""
    import pandas as pd

    from tiny_run import write_tiny_data
    from twotower.config import load_config
    from twotower.data.splits import temporal_split
    from twotower.pipeline.run import train_run

    folder = tmp_path_factory.mktemp("no-test")
    split = temporal_split(pd.read_csv(write_tiny_data(folder / "data")[0], dtype={"user_id": str, "item_id": str}))
    cfg = load_config(overrides=["train.epochs=1", "train.threads=1", "train.progress=false", "eval.baselines=[]",
                                 "model.user.hidden=[16]", "model.item.hidden=[16]", "model.item_item.enabled=false"])
    run, _, _ = train_run(cfg, folder / "run", frames={"train": split.train, "valid": split.valid})
    return run


def test_a_run_without_the_split_is_refused_as_a_twotower_error_in_the_callers_words(run_without_test, capsys):
    from twotower.cli.main import main

    # a bare FileNotFoundError ("... give the held-out file to `twotower evaluate --test FILE`"): no TwoTowerError
    # to catch, and advice in flags a Python caller has none of
    run = run_without_test
    path = run.dir / "data" / "test.csv"
    with pytest.raises(ConfigError, match=rf"^split='test': run {run.dir} has no test split \({path}\); give a "
                                          r"held-out file as test_file=PATH, or score split='valid'$"):
        evaluate_run(run)
    assert main(["evaluate", "--run", str(run.dir)]) == 2  # the command line still names its flags
    assert capsys.readouterr().err.endswith(
        f"error: run {run.dir} has no test split ({path}): give the held-out file to `twotower evaluate --test "
        "FILE`, or `--test FILE` to `twotower train`\n")


def test_a_run_without_validation_data_says_how_to_give_it_some(run_without_test, tmp_path):
    import shutil

    copy = TrainedRun.load(shutil.copytree(run_without_test.dir, tmp_path / "run"))
    (copy.dir / "data" / "valid.csv").unlink()  # read from the folder when scored
    with pytest.raises(ConfigError, match=r"^split='valid': .* has no valid split .*; it was trained without validation "
                                          r"data \(data\.valid, or frames=\{'valid': df\}, gives it some\)$"):
        evaluate_run(copy, split="valid")


def test_a_held_out_dataframe_is_named_test_file_not_printed_whole(run, caplog):
    """A DataFrame given as test_file (read as history_from reads one) was named in every warning and error by its
    whole repr, a printout of the frame where the file's name goes: it is ``<DataFrame test_file>``."""
    import pandas as pd

    from twotower.errors import DataError

    held = pd.read_csv(run.dir / "data" / "test.csv", dtype={"user_id": str, "item_id": str})
    unknown = held.iloc[[0]].assign(user_id="nobody")
    with caplog.at_level("WARNING", logger="twotower"):
        rows = evaluate_run(run, baselines=(), ks=(5,), test_file=pd.concat([held, unknown], ignore_index=True))
    assert rows[0]["held_out_rows_dropped"] == 1 and "test_file" not in rows[0]
    assert "<DataFrame test_file>: dropped 1 of" in caplog.text
    assert "user_id item_id" not in caplog.text  # the frame's printout
    with pytest.raises(DataError) as e:
        evaluate_run(run, baselines=(), ks=(5,), test_file=unknown)
    assert str(e.value).startswith("file <DataFrame test_file>: none of its 1 row "), str(e.value)
