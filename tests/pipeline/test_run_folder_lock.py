"""One `twotower train` at a time writes a run folder.

Durability audit: two `train --out R` started together interleaved their files, and the one that ended last
sealed a manifest over the other's config.json and vocabularies beside its own weights ("tensor
'item_tower.features.numeric' has shape (1615, 0), the model expects (1682, 0)" on every later load, or with
equal shapes a run whose config.json was not the one its weights were trained with). A second writer is now
refused at once, naming the folder and the pid that holds it, and the run in the folder is left as it was.
"""
from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.synthetic import write_dataset
from twotower.cli.main import main
from twotower.errors import ConfigError
from twotower.pipeline.artifacts import TrainedRun, verify_manifest
from twotower.utils.folder_lock import LOCK_FILE, exclusive_writer

FAST = ["train.batch_size=32", "model.user.hidden=[16]", "model.item.hidden=[16]", "model.user.out_dim=16",
        "model.item.out_dim=16", "model.item.id_dim=16", "model.user.history_dim=16", "model.user.history_len=8",
        "train.threads=1", "eval.baselines=[]", "data.rating_col=null", "--no-progress", "--epochs", "1"]


def _train(dataset: dict[str, Path], out: Path, *extra: str) -> int:
    return main(["-q", "train", "--train", str(dataset["train"]), "--valid", str(dataset["valid"]),
                 "--test", str(dataset["test"]), "--out", str(out), *FAST, *extra])


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != LOCK_FILE}


def test_a_second_training_into_a_folder_being_written_is_refused_and_changes_nothing(tmp_path, capsys):
    dataset = write_dataset(tmp_path / "data", n_users=24, per_user=8)
    out = tmp_path / "run"
    assert _train(dataset, out) == 0
    before = _snapshot(out)
    # another process is training there: it holds the folder's lock (a separate open file, as a process would)
    with open(out / LOCK_FILE, "w") as other:
        fcntl.flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        other.write("4242\n")
        other.flush()
        capsys.readouterr()
        assert _train(dataset, out, "model.item.id_dim=8") == 2
        err = capsys.readouterr().err
        assert err.strip() == (f"error: {out}: another twotower train (pid 4242) is writing this folder; wait for it "
                               "to finish, or train into another --out")
        assert _snapshot(out) == before  # the run there was not cleared, rewritten or resealed
        assert _train(dataset, out, "--resume", "--epochs", "2") == 2  # --resume too
        assert _snapshot(out) == before
    assert verify_manifest(out) and TrainedRun.load(out).info["n_items"] > 0
    assert _train(dataset, out, "--resume", "--epochs", "2") == 0  # released: the next command works


def test_the_python_api_takes_the_same_lock(tmp_path):
    from twotower.config import load_config
    from twotower.pipeline.run import train_run

    dataset = write_dataset(tmp_path / "data", n_users=24, per_user=8)
    out = tmp_path / "run"
    out.mkdir()
    cfg = load_config(overrides=[f"data.train={dataset['train']}", f"data.valid={dataset['valid']}"])
    with open(out / LOCK_FILE, "w") as other:
        fcntl.flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(ConfigError, match="another twotower train is writing this folder"):
            train_run(cfg, out)
    assert [p.name for p in out.iterdir()] == [LOCK_FILE]  # nothing of a run was written


def test_a_writer_killed_with_sigkill_leaves_the_folder_unlocked(tmp_path):
    holder = ("import sys, time; from twotower.utils.folder_lock import exclusive_writer\n"
              "with exclusive_writer(sys.argv[1], 'twotower train', 'wait'):\n"
              "    print('held', flush=True); time.sleep(60)\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    proc = subprocess.Popen([sys.executable, "-c", holder, str(tmp_path)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(ConfigError, match=rf"another twotower train \(pid {proc.pid}\)"):
            with exclusive_writer(tmp_path, "twotower train", "wait"):
                pass
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    with exclusive_writer(tmp_path, "twotower train", "wait"):  # the kernel dropped the dead holder's lock
        with exclusive_writer(tmp_path, "twotower train", "wait"):  # and this process may nest its own
            pass


def test_a_folder_created_for_the_lock_goes_again_when_nothing_was_written(tmp_path):
    with pytest.raises(RuntimeError):
        with exclusive_writer(tmp_path / "a" / "b", "twotower train", "wait"):
            raise RuntimeError
    assert list(tmp_path.iterdir()) == []
