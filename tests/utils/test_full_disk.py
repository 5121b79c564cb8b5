"""A full disk (or quota, or a read-only filesystem) while an artefact is written: one line naming the file.

Before: `twotower train --out` on a full disk ended in a traceback, `OSError: [Errno 28] No space left on
device` without the file, or safetensors' `SafetensorError: ... I/O error` and torch.save's `RuntimeError:
[enforce fail at inline_container.cc:672] . unexpected pos 1101184 vs 1101076`, naming nothing. The temporary
file is still removed, so the previous version of the artefact stays whole.
"""
from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from tests.synthetic import write_dataset
from twotower.cli.main import main
from twotower.utils import atomic
from twotower.utils.atomic import atomic_dir, atomic_path, atomic_write_bytes, atomic_write_set


def _no_space(*_a, **_k):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # as write() and fsync() raise it: no file named


class _Statvfs:
    def __init__(self, free: int) -> None:
        self.f_bavail, self.f_frsize = free, 1


def test_a_failed_write_names_the_file_it_was_writing(tmp_path, monkeypatch):
    target = tmp_path / "history.npz"
    target.write_bytes(b"old")
    monkeypatch.setattr(Path, "write_bytes", _no_space)
    with pytest.raises(OSError) as got:
        atomic_write_bytes(target, b"new")
    assert got.value.errno == errno.ENOSPC and got.value.filename == str(target)
    assert target.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == ["history.npz"]


def test_a_library_writer_failing_on_a_full_disk_is_said_as_one(tmp_path, monkeypatch):
    monkeypatch.setattr(atomic.os, "statvfs", lambda _p: _Statvfs(0))
    with pytest.raises(OSError) as got, atomic_path(tmp_path / "model.safetensors"):
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 1101184 vs 1101076")
    assert got.value.errno == errno.ENOSPC and got.value.filename == str(tmp_path / "model.safetensors")
    # with room left the library's own error is the story: it passes unchanged
    monkeypatch.setattr(atomic.os, "statvfs", lambda _p: _Statvfs(10 << 30))
    with pytest.raises(RuntimeError, match="unexpected pos"), atomic_path(tmp_path / "model.safetensors"):
        raise RuntimeError("unexpected pos")


def test_safetensors_on_a_full_disk_is_said_as_one_whatever_room_is_left_after(tmp_path, monkeypatch):
    # a real 6 MB tmpfs: `train` ended in "SafetensorError: Error while serializing: I/O error: No space left on
    # device (os error 28)", a traceback, as safetensors deletes its partial file before raising and the free
    # space then read 2.5 MB, above the threshold that puts a library's failure down to a full disk
    from safetensors import SafetensorError

    monkeypatch.setattr(atomic.os, "statvfs", lambda _p: _Statvfs(2_500_000))
    with pytest.raises(OSError) as got, atomic_path(tmp_path / "model.safetensors"):
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")
    assert got.value.errno == errno.ENOSPC and got.value.filename == str(tmp_path / "model.safetensors")
    assert str(got.value) == f"[Errno 28] No space left on device: '{tmp_path / 'model.safetensors'}'"
    with pytest.raises(SafetensorError, match="os error 2"), atomic_path(tmp_path / "model.safetensors"):
        raise SafetensorError("I/O error: No such file or directory (os error 2)")  # not the storage's failure
    assert list(tmp_path.iterdir()) == []


def test_a_set_of_files_names_the_one_it_was_writing(tmp_path):
    # `data split` writes train/valid/test.csv as one set: a disk that filled while valid.csv was written was said
    # as "No space left on device: .../train.csv", the first file of the set, already whole
    def filling():
        yield b"user_id,item_id\n"
        _no_space()

    files = {tmp_path / "train.csv": b"t", tmp_path / "valid.csv": filling(), tmp_path / "test.csv": b"x"}
    (tmp_path / "valid.csv").write_bytes(b"old")
    with pytest.raises(OSError) as got:
        atomic_write_set(files)
    assert got.value.errno == errno.ENOSPC and got.value.filename == str(tmp_path / "valid.csv")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["valid.csv"] and (tmp_path / "valid.csv").read_bytes() == b"old"


def test_a_file_inside_a_folder_artefact_is_named_where_it_would_have_been(tmp_path, monkeypatch):
    monkeypatch.setattr(Path, "write_bytes", _no_space)
    with pytest.raises(OSError) as got, atomic_dir(tmp_path / "checkpoint") as tmp:
        atomic_write_bytes(tmp / "model.safetensors", b"w")
    assert got.value.filename == str(tmp_path / "checkpoint" / "model.safetensors")  # not the temporary folder
    assert list(tmp_path.iterdir()) == []


def test_the_cli_says_a_full_disk_in_one_line(tmp_path, monkeypatch, capsys):
    paths = write_dataset(tmp_path / "src")
    out = tmp_path / "split"
    monkeypatch.setattr(os, "fsync", _no_space)
    assert main(["-q", "data", "split", "--input", str(paths["all"]), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    # the set is written in its order: the first write that fails is train.csv's
    assert err.startswith(f"error: No space left on device: {out / 'train.csv'}; free space there")
    assert err.count("\n") == 1
    monkeypatch.setattr(os, "fsync", lambda *_a: (_ for _ in ()).throw(OSError(errno.EROFS, "Read-only file system")))
    assert main(["-q", "data", "split", "--input", str(paths["all"]), "--out", str(out)]) == 2
    assert "Read-only file system" in capsys.readouterr().err


def test_train_on_a_disk_that_fills_says_which_epoch_the_checkpoint_holds(tmp_path, monkeypatch, capsys):
    """Before: a traceback from safetensors or torch.save, and no word on whether the epochs done were lost."""
    from twotower.training import hooks

    paths = write_dataset(tmp_path / "src", n_users=24, per_user=8)
    out = tmp_path / "run"
    real = hooks.save_checkpoint
    calls = {"n": 0}

    def fills_on_the_second(directory, *a, **k):
        calls["n"] += 1
        if calls["n"] == 2:
            with atomic_dir(directory) as tmp:  # a library writer failing inside the checkpoint folder
                monkeypatch.setattr(atomic.os, "statvfs", lambda _p: _Statvfs(0))
                (tmp / "optimizer.pt").write_bytes(b"half")
                raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 1101184 vs 1101076")
        return real(directory, *a, **k)

    monkeypatch.setattr(hooks, "save_checkpoint", fills_on_the_second)
    argv = ["-q", "train", "--train", str(paths["train"]), "--valid", str(paths["valid"]), "--out", str(out),
            "--epochs", "3", "--no-progress", "--no-eval", "train.threads=1", "train.patience=100",
            "model.user.hidden=[16]", "model.item.hidden=[16]", "eval.baselines=[]"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err == (f"error: No space left on device: {out / 'checkpoint'}; free space there, then: "
                   f"{out / 'checkpoint'} holds epoch 1 (best so far: epoch 1); run the same command with --resume "
                   f"to continue from there, or just `twotower train --out {out} --resume` (it reads the run's settings "
                   "and data; without --resume it starts over)\n")
