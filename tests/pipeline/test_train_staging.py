"""A new `twotower train --out RUN` (without --resume) over a finished run trains beside it, in a staging folder,
and replaces RUN only once finished: stopped after an epoch (Ctrl-C, SIGTERM) or killed, it leaves the earlier
run byte for byte, and the new one resumable from its staging folder.

It removed the earlier run's files once the data was read, so a new run that was stopped, failed or diverged
left the user with neither run.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.synthetic import write_dataset
from twotower.cli.main import main
from twotower.pipeline.artifacts import TrainedRun, verify_manifest

FAST = ["train.batch_size=32", "model.user.hidden=[16]", "model.item.hidden=[16]", "model.user.out_dim=16",
        "model.item.out_dim=16", "model.item.id_dim=16", "model.user.history_dim=16", "model.user.history_len=8",
        "train.threads=1", "eval.baselines=[]", "data.rating_col=null", "--no-progress"]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> dict[str, Path]:
    return write_dataset(tmp_path_factory.mktemp("data"), n_users=24, per_user=8)


def _args(dataset: dict[str, Path], out: Path, epochs: int) -> list[str]:
    return ["-q", "train", "--train", str(dataset["train"]), "--valid", str(dataset["valid"]), "--test",
            str(dataset["test"]), "--out", str(out), *FAST, "--epochs", str(epochs)]


def _files(folder: Path) -> dict[str, bytes]:
    """Every file but the lock file (each writer records its pid there)."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != ".twotower.lock"}


@pytest.fixture
def finished(dataset, tmp_path) -> Path:
    out = tmp_path / "runs" / "a"
    assert main(_args(dataset, out, 1)) == 0
    (out / "notes.txt").write_text("mine")
    return out


def test_a_run_stopped_after_an_epoch_leaves_the_earlier_run_and_resumes_into_it(finished, dataset, monkeypatch,
                                                                                  capsys):
    import twotower.training.hooks as hooks
    from twotower.cli.train_cmd import Terminated

    before = _files(finished)
    save = hooks.save_checkpoint

    def stopped_after_saving(*args, **kwargs):
        save(*args, **kwargs)
        raise Terminated  # SIGTERM right after epoch 1 was checkpointed

    monkeypatch.setattr(hooks, "save_checkpoint", stopped_after_saving)
    capsys.readouterr()
    assert main(_args(dataset, finished, 3)) == 143
    err = capsys.readouterr().err
    assert _files(finished) == before  # byte for byte, and it still loads
    assert verify_manifest(finished) and TrainedRun.load(finished).fingerprint()
    [stage] = [p for p in finished.parent.iterdir() if p.name.startswith(".a.staging-")]
    assert f"{finished} still holds the earlier run, untouched" in err
    assert f"`twotower train --out {stage} --resume`" in err and "holds epoch 1" in err

    monkeypatch.setattr(hooks, "save_checkpoint", save)
    assert main(["-q", "train", "--out", str(stage), "--resume", "--epochs", "2", "--no-progress"]) == 0
    assert not stage.exists()  # finished: swapped in where it was meant to go
    assert [p.name for p in finished.parent.iterdir()] == ["a"]
    assert verify_manifest(finished)
    assert len((finished / "log.jsonl").read_text().splitlines()) == 2  # the new run's epochs, not the earlier 1
    assert (finished / "notes.txt").read_text() == "mine"  # the user's own file stays
    assert (finished / "metrics.json").is_file()  # the closing evaluation wrote into the run folder


def test_a_new_run_removes_a_killed_runs_staging_folder_and_replaces_the_earlier_run(finished, dataset, caplog):
    dead = subprocess.run(["true"], check=True)  # noqa: S607 - a pid that no longer runs
    proc = subprocess.Popen(["true"])  # noqa: S607
    proc.wait()
    stale = finished.parent / f".a.staging-{proc.pid}"
    (stale / "checkpoint").mkdir(parents=True)
    (stale / "checkpoint" / "state.json").write_text("{}")
    before = _files(finished)
    assert dead.returncode == 0 and main(_args(dataset, finished, 1)) == 0
    assert not stale.exists()
    assert [p.name for p in finished.parent.iterdir()] == ["a"]
    assert verify_manifest(finished) and _files(finished) != before
    assert (finished / "notes.txt").read_text() == "mine"
