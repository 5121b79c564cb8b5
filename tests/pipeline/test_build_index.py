"""tt.build_index: `twotower index build` from Python, saved into the run as the command saves it.

Before, Python had no such call: a notebook ran tt.autotune and then report.index.save(run.dir / "index",
model_fingerprint=..., tuning=report.to_dict()) by hand, without the command's lock, its checks of the folder
it replaces, or its tuning record for an exact index.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import twotower as tt
from tests.lock_holder import writer_lock_held
from tests.serving.tiny_run import build_tiny_run
from twotower.cli.main import main


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_run(tmp_path_factory.mktemp("py_index_build"))


def _records(folder: Path) -> tuple[dict, dict]:
    """meta.json and tune.json without what differs between two builds of one index (time, checksums, timing)."""
    meta = json.loads((folder / "meta.json").read_text())
    tune = json.loads((folder / "tune.json").read_text())
    for key in ("created", "sha256", "meta_sha256"):  # meta_sha256 covers `created`: two builds a second apart differ
        meta.pop(key, None)
    tune.pop("build_s", None)
    return meta, tune


def test_build_index_saves_into_the_run_what_the_command_saves_and_recommend_uses_it(run_dir, tmp_path, monkeypatch):
    import twotower.pipeline.recommend as rec

    run = tt.TrainedRun.load(run_dir)
    built = tt.build_index(run, index="exact")
    assert built.out == run_dir / "index" and built.model_fingerprint == run.fingerprint() and built.index.is_exact
    assert main(["index", "build", "--run", str(run_dir), "--index", "exact", "--out", str(tmp_path / "cli")]) == 0
    assert _records(run_dir / "index") == _records(tmp_path / "cli")

    opened = []
    real = rec.load_index
    monkeypatch.setattr(rec, "load_index", lambda d, **kw: opened.append(Path(d)) or real(d, **kw))
    lists = tt.recommend(run, ["u3"], k=5)
    assert opened == [run_dir / "index"]  # the saved index, not exact search built on the fly
    assert lists == tt.recommend(run, ["u3"], k=5, exact=True)


def test_build_index_auto_records_and_returns_why(run_dir, tmp_path):
    policy = tt.IndexPolicy(exact_p99_ms=1000, tune_queries=10)  # a generous budget: the choice is under test
    built = tt.build_index(run_dir, out=tmp_path / "auto", policy=policy)  # a run folder is loaded under the lock
    assert built.reason.startswith("exact search: its single-query p99") and built.report is not None
    tune = json.loads((tmp_path / "auto" / "tune.json").read_text())
    assert tune["reason"] == built.reason and tune["chosen"]["factory"] == "exact"
    assert tt.load_index(tmp_path / "auto", expected_fingerprint=built.model_fingerprint).is_exact

    pinned = tt.build_index(run_dir, "IVF8,Flat", out=tmp_path / "ivf", policy=policy, params={"nprobe": 2})
    assert pinned.tuning["pinned"] and pinned.tuning["chosen"]["params"] == {"nprobe": 2}


def test_build_index_names_its_arguments_not_the_command_s_flags(run_dir, tmp_path):
    a_file = tmp_path / "f"
    a_file.write_text("x")
    with pytest.raises(tt.ConfigError, match=rf"^out {a_file}: exists and is a file"):
        tt.build_index(run_dir, "exact", out=a_file)
    with pytest.raises(tt.ConfigError, match="^params pins a setting of an approximate index"):
        tt.build_index(run_dir, "exact", out=tmp_path / "x", params={"nprobe": 2})
    with pytest.raises(tt.ConfigError, match="^max_train: must be a positive integer, got 0"):
        tt.build_index(run_dir, "ivf", out=tmp_path / "x", max_train=0)


def test_build_index_advises_a_missed_target_in_its_own_arguments(run_dir, tmp_path, caplog):
    """Not autotune's `candidates` (build_index has none), nor the command's flags."""
    policy = tt.IndexPolicy(target_recall=1.0, tune_queries=20)
    with caplog.at_level("WARNING", logger="twotower.index.autotune"):
        built = tt.build_index(run_dir, "IVF8,PQ4x4", out=tmp_path / "pq", policy=policy)
    assert not built.tuning["met_target"]
    said = next(r.getMessage() for r in caplog.records if "no setting reached" in r.getMessage())
    assert "index='exact'" in said and "IndexPolicy(target_recall=...)" in said
    assert "candidates" not in said and "--" not in said


@pytest.mark.skipif(sys.platform == "win32", reason="the writer lock is a POSIX flock")
def test_build_index_takes_the_run_s_writer_lock(run_dir):
    with writer_lock_held(run_dir):
        with pytest.raises(tt.ConfigError, match=r"twotower train \(pid \d+\) is writing this folder; .*`tt.build_index`"):
            tt.build_index(run_dir, "exact")
