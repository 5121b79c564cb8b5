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

from tests.lock_holder import writer_lock_held
from tests.synthetic import write_dataset
from twotower.cli.main import main
from twotower.errors import ConfigError, IntegrityError
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
        assert _train(dataset, out, "train.lr=0.01") == 2  # other settings, refused for the lock alone
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
    with writer_lock_held(tmp_path, 60) as proc:
        with pytest.raises(ConfigError, match=rf"another twotower train \(pid {proc.pid}\)"):
            with exclusive_writer(tmp_path, "twotower train", "wait"):
                pass
    with exclusive_writer(tmp_path, "twotower train", "wait"):  # the kernel dropped the dead holder's lock
        with exclusive_writer(tmp_path, "twotower train", "wait"):  # and this process may nest its own
            pass


def test_a_folder_created_for_the_lock_goes_again_when_nothing_was_written(tmp_path):
    with pytest.raises(RuntimeError):
        with exclusive_writer(tmp_path / "a" / "b", "twotower train", "wait"):
            raise RuntimeError
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- other writers and readers of a run folder
# Before, `index build --run R` (and `export --out R/onnx`) wrote into R without the lock: two builds at once could
# pair one's recall_qps.png and tune.json with the other's index, and a build beside `train --out R` built from a run
# being rewritten; readers loaded such a run file by file, so a load could mix two writes.

_HOLDER = ("import sys, time; from twotower.utils.folder_lock import exclusive_writer\n"
           "with exclusive_writer(sys.argv[1], sys.argv[2], 'wait'):\n"
           "    print('held', flush=True); time.sleep(120)\n")


class _Holder:
    """Another process holding ``folder``'s writer lock as command ``what`` (as `twotower train` would)."""

    def __init__(self, folder: Path, what: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
        self.proc = subprocess.Popen([sys.executable, "-c", _HOLDER, str(folder), what], stdout=subprocess.PIPE,
                                     text=True, env=env)

    def __enter__(self) -> int:
        assert self.proc.stdout.readline().strip() == "held"
        return self.proc.pid

    def __exit__(self, *exc: object) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.proc.stdout.close()


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[dict[str, Path], Path]:
    tmp = tmp_path_factory.mktemp("lock")
    dataset = write_dataset(tmp / "data", n_users=24, per_user=8)
    assert _train(dataset, tmp / "run") == 0
    return dataset, tmp / "run"


def test_index_build_into_a_run_being_trained_or_indexed_is_refused_naming_the_holder(trained, capsys):
    _, run = trained
    before = _snapshot(run)
    for holder, named in (("twotower train", "twotower train"), ("twotower index build", "another twotower index build")):
        with _Holder(run, holder) as pid:
            capsys.readouterr()
            assert main(["index", "build", "--run", str(run), "--index", "exact"]) == 2
            assert capsys.readouterr().err.strip() == (
                f"error: {run}: {named} (pid {pid}) is writing this folder; wait for it to finish, then run "
                "`twotower index build` again")
        assert _snapshot(run) == before  # no index folder, no recall_qps.png
    assert main(["index", "build", "--run", str(run), "--index", "exact"]) == 0  # released: it builds
    assert (run / "index" / "meta.json").is_file()


def test_export_into_a_run_takes_its_lock_and_export_elsewhere_only_reads_it(trained, tmp_path, capsys, caplog):
    _, run = trained
    with _Holder(run, "twotower train") as pid:
        capsys.readouterr()
        assert main(["export", "--run", str(run), "--out", str(run / "onnx"), "--check-users", "2"]) == 2
        assert f"twotower train (pid {pid}) is writing this folder" in capsys.readouterr().err
        assert not (run / "onnx").exists()
        # a reader: loads the run as it stands, and says clearly that a train is rewriting it
        with caplog.at_level("WARNING", logger="twotower"):
            assert main(["export", "--run", str(run), "--out", str(tmp_path / "onnx"), "--check-users", "2"]) == 0
    assert f"twotower train (pid {pid}) is writing this run folder now" in caplog.text


def test_a_reader_is_not_warned_about_an_index_build(trained, caplog):
    _, run = trained
    with _Holder(run, "twotower index build"), caplog.at_level("WARNING"):
        TrainedRun.load(run)
    assert "is writing this run folder" not in caplog.text


def test_a_load_is_never_a_mix_of_two_writes(tmp_path, monkeypatch):
    """A writer replacing the run's files while a reader loads them: the reader kept the first run's config.json
    and run.json beside the second run's weights. Now the load is read again until no file changed under it."""
    import shutil

    import torch

    from twotower.pipeline import artifacts

    dataset = write_dataset(tmp_path / "data", n_users=24, per_user=8)
    a, b = tmp_path / "a", tmp_path / "b"
    assert _train(dataset, a, "train.seed=1") == 0
    assert _train(dataset, b, "train.seed=2") == 0
    real_load_weights, swapped = artifacts.load_weights, []

    def swap_then_load(path, model):  # noqa: ANN001, ANN202 - the second run written over the first mid-load
        if not swapped:
            for f in sorted(p for p in b.rglob("*") if p.is_file() and p.name != LOCK_FILE):
                dest = a / f.relative_to(b)
                shutil.copy2(f, dest.with_suffix(".tmp"))
                os.replace(dest.with_suffix(".tmp"), dest)  # as atomic writes do: a new file renamed in
            swapped.append(True)
        return real_load_weights(path, model)

    monkeypatch.setattr(artifacts, "load_weights", swap_then_load)
    got = TrainedRun.load(a)
    want = TrainedRun.load(b)
    assert got.config.train.seed == want.config.train.seed == 2
    for (name, t), (_, u) in zip(got.model.state_dict().items(), want.model.state_dict().items()):
        assert torch.equal(t, u), name


def test_a_load_whose_files_keep_changing_is_refused(trained, monkeypatch):
    from twotower.pipeline import artifacts

    _, run = trained
    real = artifacts.Vocabulary.load

    def touch_then_load(path):  # noqa: ANN001, ANN202 - a writer rewriting history.npz all the time
        data = (run / "history.npz").read_bytes()
        (run / "history.tmp").write_bytes(data)
        os.replace(run / "history.tmp", run / "history.npz")
        return real(path)

    monkeypatch.setattr(artifacts, "_LOAD_RETRY_S", 0.0)
    monkeypatch.setattr(artifacts.Vocabulary, "load", staticmethod(touch_then_load))
    with pytest.raises(IntegrityError, match=r"its files kept changing while they were read \(3 tries\)"):
        TrainedRun.load(run)


def test_evaluate_keeps_no_tuned_setting_while_another_process_writes_the_run(tmp_path, caplog):
    from twotower.pipeline.tuned_baselines import TUNED_FILE, cached_tuning

    with _Holder(tmp_path, "twotower train") as pid, caplog.at_level("WARNING"):
        value, reused, _ = cached_tuning(tmp_path, "ease", {"k": 1}, lambda: (3.0, []))
    assert (value, reused) == (3.0, False)
    assert not (tmp_path / TUNED_FILE).exists()
    assert f"twotower train (pid {pid}) is writing this folder" in caplog.text
    value, _, _ = cached_tuning(tmp_path, "ease", {"k": 1}, lambda: (4.0, []))
    assert (tmp_path / TUNED_FILE).is_file() and value == 4.0


def test_a_readers_probe_does_not_refuse_a_writer(tmp_path):
    """A reader's active_writer() holds the lock for a moment; a writer starting then waits it out."""
    import threading

    (tmp_path / LOCK_FILE).write_text("")
    reader = open(tmp_path / LOCK_FILE)  # noqa: SIM115
    fcntl.flock(reader.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
    threading.Timer(0.05, reader.close).start()
    with exclusive_writer(tmp_path, "twotower train", "wait"):
        pass
