"""`index build` measures the chosen index's recall with ITEM vectors as queries (what `similar` and /similar-items
ask it), records it in tune.json's "similar_recall", and warns at build, in `index info` and where `similar` loads
it, when it is below target.

Before, autotune tuned (and tune.json reported) recall for user queries only: on a 373k-item catalogue the chosen
IVF nprobe=1 read recall@10 0.99 while `similar` through it recalled 0.21, and nothing said so.
"""
from __future__ import annotations

import json
import logging
import re
import shlex
from pathlib import Path

import numpy as np
import pytest

import twotower as tt
from tests.serving.tiny_run import build_tiny_run
from twotower.cli.main import main
from twotower.pipeline.artifacts import TrainedRun
from twotower.pipeline.recommend import low_recall


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_run(tmp_path_factory.mktemp("similar_recall"))


@pytest.fixture
def users_on_one_cluster(run_dir, monkeypatch):
    """Item vectors spread at random but for a tight cluster of 6, and every user pointing at that cluster: the
    users' top 5 sit in one IVF list (nprobe=1 recalls them all), an item's neighbours are spread over the lists."""
    n, dim = TrainedRun.load(run_dir).item_embeddings().shape
    rng = np.random.default_rng(0)
    items = rng.standard_normal((n, dim)).astype(np.float32)
    towards = rng.standard_normal(dim).astype(np.float32)
    towards /= np.linalg.norm(towards)
    items[:6] = towards + 0.01 * rng.standard_normal((6, dim))
    items /= np.linalg.norm(items, axis=1, keepdims=True)  # unit vectors, as a run's are
    monkeypatch.setattr(TrainedRun, "item_embeddings", lambda self, *a, **kw: items.copy())
    monkeypatch.setattr(TrainedRun, "item_vectors", lambda self, rows, *a, **kw: items[np.asarray(rows)].copy())

    def users(self, rows, *a, **kw):
        rows = np.asarray(rows)
        return (towards + 0.02 * np.random.default_rng(1).standard_normal((rows.size, dim))).astype(np.float32)

    monkeypatch.setattr(TrainedRun, "user_vectors", users)


def test_build_records_and_warns_the_item_query_recall_without_changing_the_choice(
        run_dir, tmp_path, users_on_one_cluster, caplog, capsys):
    policy = tt.IndexPolicy(k=5, tune_queries=40, target_recall=0.95)
    lines: list[str] = []
    with caplog.at_level(logging.WARNING):
        built = tt.build_index(run_dir, "IVF4,Flat", out=tmp_path / "ivf", policy=policy, echo=lines.append)
    # the choice is autotune's, on user queries, as before: the cheapest nprobe meeting the target
    assert built.tuning["chosen"]["params"] == {"nprobe": 1} and built.tuning["met_target"]
    assert built.index.search_params == {"nprobe": 1}  # the search for a better setting put the knob back
    tune = json.loads((tmp_path / "ivf" / "tune.json").read_text())
    rec = tune["similar_recall"]
    assert rec["k"] == 5 and rec["queries"] == 40 and rec["target"] == 0.95 and rec["params"] == {"nprobe": 1}
    assert rec["recall"] < 0.95 and rec["met_target"] is False
    assert rec["suggest"]["nprobe"] in (2, 4) and rec["suggest"]["recall"] >= 0.95
    chosen = next(line for line in lines if line.startswith("chosen: "))
    assert f"item queries (similar) recall@5 {rec['recall']:.4f} on 40 items" in chosen
    warned = [r.getMessage() for r in caplog.records if "tuned for user queries" in r.getMessage()]
    assert len(warned) == 1 and "`twotower similar --exact`" in warned[0]
    assert f"--nprobe {rec['suggest']['nprobe']}" in warned[0] and "/similar-items" in warned[0]
    # the rebuild it names is a whole command (it named flags without `twotower index build --run ...`): run as
    # printed, it builds this folder's index at the suggested setting, which meets the target for item queries
    command = re.search(r"rebuild with `([^`]+)`", warned[0]).group(1)
    assert command.startswith(f"twotower index build --run {run_dir} --index IVF4,Flat")
    assert f"--out {tmp_path / 'ivf'}" in command and "--k 5 --queries 40" in command

    # index info shows it; `similar` through the index warns once as it loads; exact search says nothing
    capsys.readouterr()
    assert main(["index", "info", "--run", str(run_dir), "--index", str(tmp_path / "ivf")]) == 0
    info = capsys.readouterr().out
    assert f"similar (item queries): recall@5 {rec['recall']:.4f} on 40 items (below target 0.95)" in info
    run = tt.TrainedRun.load(run_dir)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        tt.similar(run, ["i10"], k=5, index=tmp_path / "ivf")
        tt.recommend(run, ["u3"], k=5, index=tmp_path / "ivf")  # user queries: what the index was tuned for
        tt.similar(run, ["i10"], k=5, exact=True)
    assert sum("tuned for user queries" in r.getMessage() for r in caplog.records) == 1

    assert main(shlex.split(command)[1:]) == 0
    rebuilt = json.loads((tmp_path / "ivf" / "tune.json").read_text())["similar_recall"]
    assert rebuilt["params"] == {"nprobe": rec["suggest"]["nprobe"]} and rebuilt["met_target"] is True


def test_an_index_meeting_the_target_for_items_warns_nothing(run_dir, tmp_path, caplog):
    policy = tt.IndexPolicy(k=5, tune_queries=40, target_recall=0.95)
    with caplog.at_level(logging.WARNING):
        built = tt.build_index(run_dir, "IVF4,Flat", out=tmp_path / "all", policy=policy, params={"nprobe": 4})
        tt.similar(tt.TrainedRun.load(run_dir), ["i10"], k=5, index=tmp_path / "all")
    assert built.tuning["similar_recall"]["recall"] == 1.0 and built.tuning["similar_recall"]["suggest"] is None
    assert not any("tuned for user queries" in r.getMessage() for r in caplog.records)


@pytest.fixture
def users_between_clusters(run_dir, monkeypatch):
    """Items in 6 loose clusters (in 8 dimensions) and users pointing anywhere: an item's neighbours sit in its own
    cluster, a user's often straddle IVF lists, so users need a larger nprobe than items (here 3 against 2)."""
    n = TrainedRun.load(run_dir).item_embeddings().shape[0]
    dim, rng = 8, np.random.default_rng(0)
    centres = rng.standard_normal((6, dim))
    items = centres[rng.integers(0, 6, n)] + 0.5 * rng.standard_normal((n, dim))
    items = (items / np.linalg.norm(items, axis=1, keepdims=True)).astype(np.float32)
    users = rng.standard_normal((len(TrainedRun.load(run_dir).user_vocab), dim)).astype(np.float32)
    monkeypatch.setattr(TrainedRun, "item_embeddings", lambda self, *a, **kw: items.copy())
    monkeypatch.setattr(TrainedRun, "item_vectors", lambda self, rows, *a, **kw: items[np.asarray(rows)].copy())
    monkeypatch.setattr(TrainedRun, "user_vectors", lambda self, rows, *a, **kw: users[np.asarray(rows)].copy())


def test_the_suggested_setting_meets_the_target_for_user_queries_too(run_dir, tmp_path, users_between_clusters, caplog):
    """`index build --nprobe 1` warned "rebuild with ... --nprobe 4 (recall@10 0.9760 on the same items)": item
    recall alone, and the index that command built read user recall@10 0.9429, which `serve` refused. The setting
    suggested now meets the target for both kinds of query, and the rebuilt index is one `serve` accepts."""
    policy = tt.IndexPolicy(k=5, tune_queries=60, target_recall=0.95)
    with caplog.at_level(logging.WARNING):
        built = tt.build_index(run_dir, "IVF4,Flat", out=tmp_path / "ivf1", policy=policy, params={"nprobe": 1})
    rec = built.tuning["similar_recall"]
    assert rec["met_target"] is False and rec["suggest"]["recall"] >= 0.95
    assert rec["suggest"]["user_recall"] >= 0.95
    warned = next(r.getMessage() for r in caplog.records if "tuned for user queries" in r.getMessage())
    assert f"user queries recall@5 {rec['suggest']['user_recall']:.4f}" in warned
    command = re.search(r"rebuild with `([^`]+)`", warned).group(1)
    assert main(shlex.split(command)[1:]) == 0
    rebuilt = json.loads((tmp_path / "ivf1" / "tune.json").read_text())
    assert rebuilt["params"] == {"nprobe": rec["suggest"]["nprobe"]}
    assert rebuilt["met_target"] is True and rebuilt["similar_recall"]["met_target"] is True  # users and items
    assert low_recall(tmp_path / "ivf1") is None  # what `serve` refuses an index for


def test_the_build_across_ranks_measures_and_warns_the_item_query_recall_as_one_process_does(run_dir, tmp_path, caplog):
    """`torchrun ... index build` measured the merged index for user queries alone: its tune.json had no
    "similar_recall", and its `chosen:` line, `index info` and `similar` said nothing of item queries, where the
    one-process build of the same index warned that item-to-item searches miss neighbours. It also wrote no
    recall_qps.png and no `why:` line. Rank 0's path, called here in one process (test_torchrun runs 2 ranks)."""
    from twotower.pipeline.index_build_distributed import build_distributed

    policy = tt.IndexPolicy(k=5, tune_queries=40, target_recall=0.95)
    one = tt.build_index(run_dir, "IVF4,Flat", out=tmp_path / "one", policy=policy, params={"nprobe": 1},
                         echo=lambda line: None)
    lines: list[str] = []
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        built = build_distributed(TrainedRun.load(run_dir), "IVF4,Flat", tmp_path / "ranks", policy, None,
                                  {"nprobe": 1}, lines.append)
    rec = json.loads((tmp_path / "ranks" / "tune.json").read_text())["similar_recall"]
    assert rec == built.tuning["similar_recall"] == one.tuning["similar_recall"]  # the same index, measured alike
    assert rec["params"] == {"nprobe": 1} and rec["met_target"] is False and rec["suggest"]["nprobe"] == 4
    chosen = next(line for line in lines if line.startswith("chosen: "))
    assert f"item queries (similar) recall@5 {rec['recall']:.4f} on 40 items" in chosen
    warned = [r.getMessage() for r in caplog.records if "tuned for user queries" in r.getMessage()]
    assert len(warned) == 1 and "--nprobe 4" in warned[0]
    assert any(line.startswith("why: IVF4,Flat nprobe=1 as given") for line in lines)
    assert (tmp_path / "ranks" / "recall_qps.png").is_file()
    assert f"plot {tmp_path / 'ranks' / 'recall_qps.png'}" in lines[-1]
