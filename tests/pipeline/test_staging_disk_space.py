"""A new `twotower train --out RUN` over a finished run trains beside it (pipeline/staging.py), so the disk holds
both runs until the new one is swapped in. Where the old code removed the earlier run first, a new run that just
fit beside it now filled the disk mid-training: it is refused at start-up, naming both sizes and the ways out; and
a disk that fills anyway says where (the staging folder) and that RUN still holds the earlier run.
"""
from __future__ import annotations

import collections
import errno
import os
import shutil
from pathlib import Path

import pytest

from tests.pipeline.test_train_staging import _args, _files
from tests.synthetic import write_dataset
from twotower.cli.main import main
from twotower.pipeline.artifacts import verify_manifest

_Usage = collections.namedtuple("_Usage", "total used free")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> dict[str, Path]:
    return write_dataset(tmp_path_factory.mktemp("data"), n_users=24, per_user=8)


@pytest.fixture
def finished(dataset, tmp_path) -> Path:
    out = tmp_path / "runs" / "a"
    assert main(_args(dataset, out, 1)) == 0
    return out


def _run_bytes(out: Path) -> int:
    return sum(p.stat().st_size for p in out.rglob("*") if p.is_file())


def test_a_new_run_the_disk_cannot_hold_beside_the_earlier_one_is_refused_before_training(finished, dataset,
                                                                                          monkeypatch, capsys):
    before = _files(finished)
    free = _run_bytes(finished) // 2  # room for half of a run like the earlier one
    monkeypatch.setattr(shutil, "disk_usage", lambda path: _Usage(1 << 40, (1 << 40) - free, free))
    capsys.readouterr()
    assert main(_args(dataset, finished, 1)) == 2
    err = capsys.readouterr().err
    assert "not enough free space for the new run" in err
    assert f"{finished} holds an earlier run (" in err and "needs about " in err and " is free on that filesystem" in err
    assert "another --out" in err and f"rm -r {finished}" in err
    assert [p.name for p in finished.parent.iterdir()] == ["a"]  # no staging folder left behind
    assert _files(finished) == before and verify_manifest(finished)


def test_a_disk_that_fills_in_the_staging_folder_names_it_and_keeps_the_earlier_run(finished, dataset, monkeypatch,
                                                                                    capsys):
    import twotower.training.hooks as hooks

    before = _files(finished)

    def full(*args, **kwargs):
        [stage] = [p for p in finished.parent.iterdir() if p.name.startswith(".a.staging-")]
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(stage / "checkpoint" / "model.safetensors"))

    monkeypatch.setattr(hooks, "save_checkpoint", full)
    capsys.readouterr()
    assert main(_args(dataset, finished, 2)) == 2
    err = capsys.readouterr().err
    assert "No space left on device" in err and ".a.staging-" in err
    assert f"{finished} still holds the earlier run, untouched" in err
    assert "room for both" in err and "another --out" in err
    assert _files(finished) == before


@pytest.mark.parametrize("settings", [[], ["train.checkpoint=false"]], ids=["same-settings", "other-settings"])
def test_no_room_is_said_before_the_item_texts_are_encoded(finished, dataset, monkeypatch, capsys, settings):
    """The check ran once the model was built, after the item texts were encoded (minutes with MiniLM on a large
    catalogue), so a disk without room said so only then; now before, on the model's parameters counted (another
    model: its size is estimated, not the earlier run's)."""
    import twotower.pipeline.run as run_module

    encoded: list[object] = []
    real = run_module.encode_item_texts
    monkeypatch.setattr(run_module, "encode_item_texts", lambda *a, **k: encoded.append(a) or real(*a, **k))
    free = _run_bytes(finished) // 2
    monkeypatch.setattr(shutil, "disk_usage", lambda path: _Usage(1 << 40, (1 << 40) - free, free))
    capsys.readouterr()
    assert main([*_args(dataset, finished, 1), *settings]) == 2
    assert "not enough free space for the new run" in capsys.readouterr().err
    assert encoded == []  # refused before the texts were encoded
