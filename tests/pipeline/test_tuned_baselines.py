"""Baseline hyper-parameters are tuned once per run folder and reused by later evaluations."""
from __future__ import annotations

import functools
import json

import pytest
import scipy.sparse as sp

from tests.synthetic import make_interactions
from twotower.cli.main import main
import twotower.evaluation.baselines as baselines
from twotower.pipeline.artifacts import TrainedRun
from twotower.pipeline.evaluate_run import evaluate_run
from twotower.utils.folder_lock import LOCK_FILE
from twotower.pipeline.tuned_baselines import TUNED_FILE, cached_tuning, matrix_digest

FAST = ["train.batch_size=32", "model.user.hidden=[32]", "model.item.hidden=[32]", "model.user.out_dim=16",
        "model.item.out_dim=16", "model.user.history_len=6", "model.user.history_dim=16", "--no-progress"]


def _tune_counter(calls: list[str], name: str, value: float):
    def tune():
        calls.append(name)
        return value, [{"param": value, "NDCG@10": 0.5}]
    return tune


def test_cached_tuning_reuses_only_a_matching_key(tmp_path):
    calls: list[str] = []
    key = {"grid": [1.0, 2.0], "metric": "NDCG@10", "train": "a", "valid": "b"}
    assert cached_tuning(tmp_path, "ease", key, _tune_counter(calls, "ease", 2.0))[:2] == (2.0, False)
    value, reused, seconds = cached_tuning(tmp_path, "ease", key, _tune_counter(calls, "ease", 9.0))
    assert (value, reused) == (2.0, True) and seconds >= 0.0 and calls == ["ease"]
    # other data (or grid, or metric): tuned again and replaced; other baselines' entries are kept
    assert cached_tuning(tmp_path, "itemknn", key, _tune_counter(calls, "itemknn", 10))[:2] == (10.0, False)
    other = {**key, "train": "changed"}
    assert cached_tuning(tmp_path, "ease", other, _tune_counter(calls, "ease", 5.0))[:2] == (5.0, False)
    stored = json.loads((tmp_path / TUNED_FILE).read_text())
    assert stored["entries"]["ease"]["value"] == 5.0 and stored["entries"]["itemknn"]["value"] == 10
    assert stored["entries"]["ease"]["table"] == [{"param": 5.0, "NDCG@10": 0.5}]
    # atomic: no temp file left (the run folder's writer lock, taken for the write, stays as it does after a train)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([TUNED_FILE, LOCK_FILE])


def test_a_broken_cache_file_is_tuned_again(tmp_path):
    (tmp_path / TUNED_FILE).write_text("{ not json", encoding="utf-8")
    calls: list[str] = []
    key = {"grid": [1.0], "metric": "NDCG@10", "train": "a", "valid": "b"}
    assert cached_tuning(tmp_path, "ease", key, _tune_counter(calls, "ease", 1.0))[:2] == (1.0, False)
    assert json.loads((tmp_path / TUNED_FILE).read_text())["entries"]["ease"]["value"] == 1.0


def test_matrix_digest_follows_the_nonzero_pattern():
    a = sp.csr_matrix(([1.0, 1.0], ([0, 1], [1, 2])), shape=(2, 3))
    b = sp.csr_matrix(([1.0, 1.0], ([0, 1], [1, 0])), shape=(2, 3))
    assert matrix_digest(a) == matrix_digest(a.copy()) != matrix_digest(b)
    assert matrix_digest(sp.csr_matrix(a, shape=(2, 3))) != matrix_digest(sp.csr_matrix((2, 4)))
    assert matrix_digest(None) is None


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> TrainedRun:
    d = tmp_path_factory.mktemp("tuned")
    make_interactions(n_users=40, n_items=30, per_user=12).to_csv(d / "all.csv", index=False)
    assert main(["-q", "data", "split", "--input", str(d / "all.csv"), "--out", str(d / "split")]) == 0
    rc = main(["-q", "train", "--train", str(d / "split" / "train.csv"), "--valid", str(d / "split" / "valid.csv"),
               "--test", str(d / "split" / "test.csv"), "--out", str(d / "run"), "--epochs", "1", "--no-eval", *FAST])
    assert rc == 0
    return TrainedRun.load(d / "run")


def test_evaluate_tunes_once_then_reuses_the_stored_setting(run, monkeypatch, caplog):
    first = evaluate_run(run, baselines=("ease", "itemknn"), ks=(10,))
    stored = json.loads((run.dir / TUNED_FILE).read_text())["entries"]
    assert set(stored) == {"ease", "itemknn"}
    assert first[1]["model"] == f"ease (λ={stored['ease']['value']:g})"
    assert first[2]["model"] == f"itemknn (k={stored['itemknn']['value']})"

    def must_not_tune(tune):
        @functools.wraps(tune)  # same signature: the grid in the key is read from it
        def refuse(*args, **kwargs):
            raise AssertionError("tuned again although the run's data did not change")
        return refuse

    monkeypatch.setattr(baselines, "tune_ease", must_not_tune(baselines.tune_ease))
    monkeypatch.setattr(baselines, "tune_itemknn", must_not_tune(baselines.tune_itemknn))
    with caplog.at_level("INFO", logger="twotower"):
        second = evaluate_run(run, baselines=("ease", "itemknn"), ks=(10,))
    for a, b in zip(first, second):
        assert a["model"] == b["model"] and a["NDCG@10"] == b["NDCG@10"]
        if a["model"] != "two-tower":  # the tuning cost is still counted in fit_s
            assert b["fit_s"] >= stored[a["model"].split(" ")[0]]["seconds"]
    info = [r.getMessage() for r in caplog.records if r.levelname == "INFO"]
    assert [m for m in info if m.startswith("baselines:")] == [
        f"baselines: EASE λ={stored['ease']['value']:g}, ItemKNN k={stored['itemknn']['value']} "
        f"(tuned earlier on valid NDCG@10, read from {run.dir / TUNED_FILE})"
    ]
    assert not [m for m in info if "tune_" in m or "evaluated" in m]  # no line per tried setting or evaluation


def test_tuning_then_fitting_computes_the_similarity_and_gram_once(run, monkeypatch):
    """The chosen setting is fitted from the tuning's own work: at 299k items ItemKNN's pass alone is 12 minutes."""
    (run.dir / TUNED_FILE).unlink(missing_ok=True)
    calls: list[str] = []
    for name in ("_top_similar", "_gram"):
        original = getattr(baselines, name)

        def counted(*args, _name=name, _original=original, **kwargs):
            calls.append(_name)
            return _original(*args, **kwargs)

        monkeypatch.setattr(baselines, name, counted)
    rows = evaluate_run(run, baselines=("ease", "itemknn"), ks=(10,))
    assert sorted(calls) == ["_gram", "_top_similar"]
    stored = json.loads((run.dir / TUNED_FILE).read_text())["entries"]
    assert rows[2]["model"] == f"itemknn (k={stored['itemknn']['value']})"
    # the same figures as fitting the chosen settings afresh (the next evaluation reads them from the file)
    again = evaluate_run(run, baselines=("ease", "itemknn"), ks=(10,))
    assert [r["NDCG@10"] for r in rows] == [r["NDCG@10"] for r in again]
    assert sorted(calls) == ["_gram", "_gram", "_top_similar", "_top_similar"]


def test_a_setting_that_could_not_be_kept_is_not_reported_as_saved(run, monkeypatch, caplog):
    """With the run locked by `train` (or read-only) the save is skipped with a warning, yet the summary line still
    said 'tuned on valid NDCG@10, saved to RUN/tuned_baselines.json' of a file that was not there."""
    import twotower.pipeline.tuned_baselines as tuned_baselines

    (run.dir / TUNED_FILE).unlink(missing_ok=True)

    def read_only(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(tuned_baselines, "atomic_write_json", read_only)
    with caplog.at_level("INFO", logger="twotower"):
        evaluate_run(run, baselines=("itemknn",), ks=(10,))
    assert not (run.dir / TUNED_FILE).exists()
    summary = [r.getMessage() for r in caplog.records if r.getMessage().startswith("baselines:")]
    assert len(summary) == 1 and ", saved to" not in summary[0]
    assert summary[0].endswith(f"(tuned on valid NDCG@10; not saved to {run.dir / TUNED_FILE}: itemknn tuned again "
                               "next time)")


def test_itemknn_is_tuned_again_on_another_sample_of_validation_users(run, monkeypatch):
    """ItemKNN's k is tuned on a sample of ``eval.ease_tune_max_users`` validation users drawn with the run's
    seed: a k stored for another sample (or all users) is not reused, and the stored key says which sample."""
    import dataclasses

    (run.dir / TUNED_FILE).unlink(missing_ok=True)
    evaluate_run(run, baselines=("itemknn",), ks=(10,))
    whole = json.loads((run.dir / TUNED_FILE).read_text())["entries"]["itemknn"]
    assert whole["key"]["max_users"] == run.config.eval.ease_tune_max_users
    assert whole["key"]["seed"] == run.config.train.seed
    sampled = dataclasses.replace(run.config, eval=dataclasses.replace(run.config.eval, ease_tune_max_users=5))
    monkeypatch.setattr(run, "config", sampled)
    evaluate_run(run, baselines=("itemknn",), ks=(10,))
    entry = json.loads((run.dir / TUNED_FILE).read_text())["entries"]["itemknn"]
    assert entry["key"]["max_users"] == 5
    assert [row["users_evaluated"] for row in entry["table"]] == [5] * len(entry["table"])
    assert all(row["users_evaluated"] > 5 for row in whole["table"])
