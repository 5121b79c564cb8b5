"""`torchrun --nproc-per-node 2 -m twotower train ...` on a tiny CSV dataset, then resume in one process.

The command is exactly the one docs/distributed.md shows (``--standalone``
picks a free local rendezvous port). Rank 0 alone writes the one run folder
and prints; the checkpoint holds no world-size-specific state, so a
one-process ``--resume`` continues it.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.synthetic import write_dataset
from twotower.cli.main import main

FAST = ["train.batch_size=32", "model.user.hidden=[32]", "model.item.hidden=[32]", "model.user.out_dim=16",
        "model.item.out_dim=16", "model.user.history_len=8", "train.patience=100", "--no-progress"]


def test_torchrun_two_processes_write_one_run_folder_and_resume_in_one(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "data")
    out = tmp_path / "runs" / "ddp"
    args = ["train", "--train", str(data["train"]), "--valid", str(data["valid"]), "--test", str(data["test"]),
            "--out", str(out), *FAST]
    env = {**os.environ, "TWOTOWER_THREADS": "1", "OMP_NUM_THREADS": "1"}
    env.pop("WORLD_SIZE", None)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "-m", "twotower", "-q", *args, "--epochs", "2"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("trained: best valid") == 1  # rank 0 alone reports
    assert sorted(p.name for p in out.parent.iterdir()) == ["ddp"]  # one run folder, no temp leftovers
    for name in ("config.json", "run.json", "model.safetensors", "log.jsonl", "curves.png", "metrics.json",
                 "checkpoint/state.json", "vocab/items.json", "history.npz"):
        assert (out / name).exists(), name
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in log] == [1, 2]
    assert {"loss", "inbatch_accuracy", "item_std", "valid_NDCG@10"} <= set(log[0])
    assert log[1]["loss"] < log[0]["loss"]
    # the fits after training run on rank 0 while the other ranks end: the item-item term too (it was skipped)
    term = json.loads((out / "run.json").read_text())["item_item"]
    assert term["solver"] == "dense" and 0.0 <= term["weight"] <= 1.0 and len(term["valid"]) > 1

    # the checkpoint written by 2 ranks resumes in 1 process
    assert main(["-q", *args, "--epochs", "3", "--resume", "--no-eval"]) == 0
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in log] == [1, 2, 3]

    # the same run's index, built across 2 ranks, loads with the run's fingerprint and searches like one build
    idx_dir = tmp_path / "idx"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "-m", "twotower", "-q", "index", "build", "--run-dir", str(out), "--index", "IVF4,Flat", "--nprobe", "4",
           "--seed", "3", "--out", str(idx_dir)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("built IVF4,Flat") == 1
    import numpy as np

    from twotower.index import ExactIndex, load_index
    from twotower.pipeline.artifacts import TrainedRun

    run = TrainedRun.load(out)
    index = load_index(idx_dir, expected_fingerprint=run.fingerprint())
    assert len(index) == run.n_items
    q = run.user_vectors(np.arange(5))
    exact = ExactIndex().build(run.item_embeddings(), np.arange(run.n_items)).search(q, 5)
    got = index.search(q, 5)  # nprobe = nlist: exhaustive, so exact up to float rounding
    np.testing.assert_allclose(got.scores, exact.scores, atol=1e-5)
    # rank 0 measured it as autotune measures: the recall serving trusts (it had no record, so never refused)
    tune = json.loads((idx_dir / "tune.json").read_text())
    assert tune["chosen"]["params"] == {"nprobe": 4} and tune["chosen"]["recall"] > 0.99
    # --seed reached rank 0's k-means (it was ignored under torchrun, and meta.json said seed 0)
    meta = json.loads((idx_dir / "meta.json").read_text())
    assert meta["config"]["seed"] == 3 and meta["build_params"]["seed"] == 3


def test_torchrun_into_a_folder_another_writer_holds_ends_at_once(tmp_path: Path) -> None:
    """Rank 0 refused the locked folder before joining the process group, and rank 1 waited in the rendezvous
    until torchrun killed it, 30-38 s later; now rank 0 joins first, and rank 1 stops at its first collective."""
    from twotower.pipeline.run import RUN_WRITER
    from twotower.utils.folder_lock import exclusive_writer

    data = write_dataset(tmp_path / "data")
    out = tmp_path / "runs" / "held"
    out.mkdir(parents=True)
    env = {**os.environ, "TWOTOWER_THREADS": "1", "OMP_NUM_THREADS": "1"}
    env.pop("WORLD_SIZE", None)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m", "twotower",
           "-q", "train", "--train", str(data["train"]), "--out", str(out), *FAST, "--epochs", "1"]
    with exclusive_writer(out, *RUN_WRITER):  # another writer, as a second `twotower train` into it holds it
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=25)
    assert proc.returncode != 0
    assert "is writing this folder" in proc.stderr


_API_SCRIPT = """
import logging, sys
import twotower as tt

logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
before = logging.getLogger("twotower").level
train, valid, test, out, *fast = sys.argv[1:]
cfg = tt.load_config(overrides=[f"data.train={train}", f"data.valid={valid}", f"data.test={test}", *fast])
run, result, data = tt.train_run(cfg, out)
assert logging.getLogger("twotower").level == before  # the script's logging is its own again
if run is not None:
    tt.evaluate_run(run)
else:
    try:
        tt.evaluate_run(run)
    except tt.ConfigError as e:
        print(e, file=sys.stderr)
"""


def test_train_run_under_torchrun_logs_once_as_the_command_does(tmp_path: Path) -> None:
    """A script calling tt.train_run under torchrun printed rank 0's data warnings again on rank 1 ("valid: dropped
    2 of 42 rows ..." twice, untagged), where `twotower train` prints them once; and tt.evaluate_run(run) on rank 1,
    which gets None for the run, said only "got a NoneType" (README's example crashed that rank)."""
    data = write_dataset(tmp_path / "data")
    with open(data["valid"], "a", encoding="utf-8") as f:  # rows of ids the run does not know: warned about
        f.write("nobody,i1,2000000,4.0\nu1,nothing,2000001,4.0\n")
    script = tmp_path / "script.py"
    script.write_text(_API_SCRIPT, encoding="utf-8")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("WORLD_SIZE", None)
    fast = [a for a in FAST if a != "--no-progress"] + ["train.progress=false", "train.threads=1", "train.epochs=1",
                                                         "eval.baselines=[popularity]"]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(script),
           str(data["train"]), str(data["valid"]), str(data["test"]), str(tmp_path / "run"), *fast]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.count("valid: dropped 2 of 42 rows") == 1, proc.stderr[-3000:]
    assert proc.stderr.count("INFO twotower.pipeline.prepare: vocabularies") == 1
    assert ("evaluate_run: run is None: under torchrun tt.train_run returns the run on rank 0 alone (rank 1 gets "
            "None, as it writes no run folder); use it there: `if run is not None: ...`") in proc.stderr
