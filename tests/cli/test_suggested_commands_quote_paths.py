"""The commands the CLI suggests hold the run's path as one shell word, so they can be pasted back.

Before: `twotower train --out "runs/ml ü"` ended with "`twotower evaluate --run runs/ml ü` prints every k",
which the shell runs as `--run runs/ml` plus a stray `ü`; `index build`'s and `export`'s rebuild hints alike.
"""
from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

import pytest

from twotower.cli.main import main
from twotower.pipeline.artifacts import rebuild_command

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serving"))
from tiny_run import write_tiny_data  # noqa: E402


def test_rebuild_hints_keep_a_spaced_path_one_argument():
    run = "runs/ml ü"
    assert shlex.split(rebuild_command(run, f"{run}/index")) == ["twotower", "index", "build", "--run", run]
    assert shlex.split(rebuild_command(run, "my idx"))[-2:] == ["--out", "my idx"]
    assert shlex.split(rebuild_command(run, "ex port", export=True)) == [
        "twotower", "export", "--run", run, "--format", "onnx", "--out", "ex port"]
    assert rebuild_command("runs/ml", "runs/ml/index") == "twotower index build --run runs/ml"  # plain: unquoted


def test_the_rebuild_hint_asks_for_the_index_type_the_folder_was_built_as(tmp_path):
    # a damaged IVF index was told "twotower index build --run R --out DIR", which builds `auto`: maybe another type
    import json

    folder = tmp_path / "idx"
    folder.mkdir()
    (folder / "tune.json").write_text(json.dumps({"requested": "ivf", "spec": "ivf"}))
    assert rebuild_command("runs/ml", folder) == f"twotower index build --run runs/ml --index ivf --out {folder}"
    (folder / "tune.json").write_text(json.dumps({"requested": "auto"}))
    assert rebuild_command("runs/ml", folder) == f"twotower index build --run runs/ml --out {folder}"


def test_train_points_to_evaluate_with_the_out_folder_quoted(tmp_path, capsys):
    inter, items = write_tiny_data(tmp_path / "data")
    out = tmp_path / "my runs" / "ml ü"
    assert main(["train", "--data", str(inter), "--items", str(items), "--out", str(out), "--threads", "1",
                 "--no-progress", "data.rating_col=null", "train.epochs=1", "train.checkpoint=false",
                 "model.user.history_len=8", "model.user.out_dim=16", "model.user.hidden=[32]",
                 "model.item.out_dim=16", "model.item.hidden=[32]", "model.item.id_dim=16",
                 "eval.baselines=[]", f"eval.ks={json.dumps([10, 50])}"]) == 0
    hints = re.findall(r"`(twotower evaluate [^`]*)`", capsys.readouterr().out)
    assert hints and all(shlex.split(h)[:4] == ["twotower", "evaluate", "--run", str(out)] for h in hints), hints


def test_a_staged_run_and_a_misused_out_suggest_pasteable_commands(tmp_path, capsys):
    # the second command of each pair kept the path bare: `--out my runs/ml --resume` continued "my"
    from twotower.cli.train_cmd import staged_training_left

    out, stage = tmp_path / "my runs" / "ml", tmp_path / "my runs" / ".ml.staging"
    (stage / "checkpoint").mkdir(parents=True)
    (stage / "checkpoint" / "state.json").write_text(json.dumps({"epoch": 2}))
    hints = re.findall(r"`([^`]*--out [^`]*)`", staged_training_left(out, stage))
    assert [shlex.split(h)[shlex.split(h).index("--out") + 1] for h in hints] == [str(stage), str(out), str(out)]
    assert main(["recommend", "--run", str(out), "--user", "u 1", "--out", "my recs.csv"]) == 2  # before the run is read
    hint = re.search(r"`([^`]*)`", capsys.readouterr().err).group(1)
    assert shlex.split(hint) == ["--users", "u 1", "--out", "my recs.csv"]


def test_the_rebuild_command_keeps_the_tuning_the_index_was_built_with(tmp_path):
    # a stale index tuned for recall@20 0.99 on 300 queries (seed 3, or a pinned nprobe) was told to rebuild with a
    # command that tuned for recall@10 0.95 on 1,000 queries, seed 0
    import json

    folder = tmp_path / "idx"
    folder.mkdir()
    (folder / "tune.json").write_text(json.dumps({"requested": "hnsw", "target_recall": 0.99, "k": 20,
                                                  "tune_queries": 300, "seed": 3, "pinned": False,
                                                  "params": {"efSearch": 16}}))
    words = shlex.split(rebuild_command("run", str(folder)))
    assert words[words.index("--index") + 1] == "hnsw" and "--ef-search" not in words
    assert [words[words.index(f) + 1] for f in ("--target-recall", "--k", "--queries", "--seed")] == ["0.99", "20",
                                                                                                      "300", "3"]
    (folder / "tune.json").write_text(json.dumps({"requested": "ivf", "target_recall": 0.95, "k": 10, "seed": 0,
                                                  "pinned": True, "params": {"nprobe": 20}}))
    assert shlex.split(rebuild_command("run", str(folder)))[5:] == ["--index", "ivf", "--nprobe", "20", "--out",
                                                                    str(folder)]


def test_the_rebuild_command_gives_recorded_whole_numbers_as_the_flags_take_them(tmp_path):
    # an index built with --seed 20240101 was told to rebuild with `--seed 2.02401e+07`, which `index build` refuses
    # ("--seed: must be an integer"); --queries 2000000 read `--queries 2e+06`, --target-recall 0.9999999 read `1`
    import json

    folder = tmp_path / "idx"
    folder.mkdir()
    (folder / "tune.json").write_text(json.dumps({"requested": "hnsw", "target_recall": 0.9999999, "k": 10,
                                                  "tune_queries": 2000000, "seed": 20240101, "pinned": False}))
    words = shlex.split(rebuild_command("run", str(folder)))
    assert [words[words.index(f) + 1] for f in ("--target-recall", "--queries", "--seed")] == [
        "0.9999999", "2000000", "20240101"]


def test_the_rebuild_command_of_an_auto_index_keeps_its_exact_budget(tmp_path):
    # an `--index auto --exact-budget-ms 0.5` build was told to rebuild with `twotower index build --run run --out
    # DIR`: on the default 5 ms budget, which may choose exact search where the index was an ANN one, or the reverse
    import json

    folder = tmp_path / "idx"
    folder.mkdir()
    (folder / "tune.json").write_text(json.dumps({"requested": "auto", "exact_budget_ms": 0.5, "pinned": False}))
    assert shlex.split(rebuild_command("run", str(folder)))[4:] == ["run", "--exact-budget-ms", "0.5", "--out",
                                                                    str(folder)]
    (folder / "tune.json").write_text(json.dumps({"requested": "hnsw", "exact_budget_ms": 0.5, "pinned": False}))
    assert "--exact-budget-ms" not in rebuild_command("run", str(folder))  # read by --index auto alone


def test_the_low_recall_rebuild_names_the_run_the_folder_and_no_pin(tmp_path):
    # serve's low-recall refusal said `twotower index build --index auto`: no --run, no --out; --index auto also
    # refuses a pinned --nprobe (the likely cause of the low recall), and keeps an `auto` build's --exact-budget-ms
    import json

    folder = tmp_path / "my idx"
    folder.mkdir()
    (folder / "tune.json").write_text(json.dumps({"requested": "ivf", "exact_budget_ms": None, "pinned": True,
                                                  "params": {"nprobe": 3}, "target_recall": 0.99}))
    assert shlex.split(rebuild_command("runs/ml ü", folder, kind="auto")) == [
        "twotower", "index", "build", "--run", "runs/ml ü", "--index", "auto", "--target-recall", "0.99",
        "--out", str(folder)]
    (folder / "tune.json").write_text(json.dumps({"requested": "auto", "exact_budget_ms": 2.0, "pinned": False}))
    assert rebuild_command("runs/ml", "runs/ml/index", kind="auto") == "twotower index build --run runs/ml --index auto"
    assert shlex.split(rebuild_command("runs/ml", folder, kind="auto"))[5:] == [
        "--index", "auto", "--exact-budget-ms", "2", "--out", str(folder)]


def test_an_interrupted_demo_says_how_to_finish_the_demo(tmp_path):
    """A demo stopped in training said only `twotower train --out X --resume`, which left out the demo's own steps
    (its test table, plot and recommendations)."""
    import time

    from twotower.cli.train_cmd import interrupted_training

    out = tmp_path / "my demo"
    (out / "checkpoint").mkdir(parents=True)
    (out / "checkpoint" / "state.json").write_text(json.dumps({"epoch": 2}))
    line = interrupted_training(out, resumed=False, since=time.time() - 60, takes_resume=False)
    hints = [shlex.split(h) for h in re.findall(r"`([^`]*)`", line)]
    assert hints == [["twotower", "train", "--out", str(out), "--resume"], ["twotower", "evaluate", "--run", str(out)],
                     ["twotower", "demo", "--out", str(out)]], line
    assert "then `twotower evaluate" in line and "again for every step of the demo" in line
    plain = interrupted_training(out, resumed=False, since=time.time() - 60)  # train's own: no demo steps
    assert "twotower demo" not in plain and "twotower evaluate" not in plain


def _backticked(text: str) -> list[list[str]]:
    """Each command in backticks in ``text``, split as a POSIX shell splits it."""
    return [shlex.split(c) for c in re.findall(r"`([^`]+)`", text)]


def test_search_refusals_quote_the_paths_they_suggest(tmp_path, capsys):
    """Review: `search query --index "si ä" --fusion rrf` said "(`twotower search info --index si ä` shows it)", which
    the shell runs with a stray `ä`; so did --model's and `search index --mode`'s suggestions."""
    index, model = "si ä", "my model"
    assert main(["search", "query", "--index", index, "--fusion", "rrf", "vitamin"]) == 2
    assert ["twotower", "search", "info", "--index", index] in _backticked(capsys.readouterr().err)
    assert main(["search", "query", "--index", index, "--model", model, "vitamin"]) == 2
    err = capsys.readouterr().err
    assert ["twotower", "search", "info", "--index", index] in _backticked(err)
    assert ["twotower", "search", "index", "--beir", "DIR", "--out", "NEW_INDEX", "--model", model] in _backticked(err)
    assert main(["search", "index", "--beir", str(tmp_path), "--out", index, "--mode", "bm25"]) == 2
    assert _backticked(capsys.readouterr().err)[0][:5] == ["twotower", "search", "query", "--index", index]


def test_library_hints_quote_the_paths_they_suggest(tmp_path, capsys):
    """The same for the suggestions made below the CLI: a damaged marker's retrain command, a bi-encoder given where
    an index is read, a passages table given as the BEIR folder, `similar --item` with --out."""
    from twotower.errors import IntegrityError
    from twotower.search.artefacts import BI_ENCODER_META, check_marker_readable, index_it_hint
    from twotower.search.beir import _prepare_hint

    folder = tmp_path / "bi enc"
    folder.mkdir()
    (folder / BI_ENCODER_META).write_text("{")
    with pytest.raises(IntegrityError) as e:
        check_marker_readable(folder, "--model", (BI_ENCODER_META,))
    assert _backticked(str(e.value)) == [["twotower", "search", "train", "--out", str(folder)]]
    assert _backticked(index_it_hint("my model"))[0][-2:] == ["--model", "my model"]
    table = tmp_path / "my passages.csv"
    table.write_text("id,text\n")
    assert _backticked(_prepare_hint(table, "--beir"))[0][3:5] == ["--passages", str(table)]
    assert main(["similar", "--run", str(tmp_path / "r"), "--item", "a b", "--out", "my sims.csv"]) == 2
    assert _backticked(capsys.readouterr().err) == [["--items", "a b", "--out", "my sims.csv"]]
