"""`--out` folders: what must take writes depends on how the artefact is written.

Before: `twotower train --out /scratch/alice` (or `data split --out ~`) was refused with "cannot write into
/scratch (permission denied)", though the files go into the user's own folder; and a read-only mount was
called "permission denied", a permission nobody can grant.
"""
from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from tests.synthetic import write_dataset
from twotower.cli.main import main
from twotower.errors import ConfigError
from twotower.utils import atomic
from twotower.utils.atomic import check_output_dir


@pytest.fixture
def locked_parent(tmp_path, monkeypatch):
    """``tmp_path/shared`` takes no writes (a root-owned /scratch); ``tmp_path/shared/mine`` does."""
    shared, mine = tmp_path / "shared", tmp_path / "shared" / "mine"
    mine.mkdir(parents=True)
    real_access = os.access
    monkeypatch.setattr(atomic.os, "access", lambda p, mode: False if os.fspath(p) == os.fspath(shared)
                        else real_access(p, mode))
    return shared, mine


def test_an_existing_folder_under_a_locked_parent_is_written_into(locked_parent, tmp_path, capsys):
    shared, mine = locked_parent
    assert check_output_dir(mine) == mine
    paths = write_dataset(tmp_path / "src")
    assert main(["-q", "data", "split", "--input", str(paths["all"]), "--out", str(mine)]) == 0
    assert (mine / "train.csv").is_file()
    # a new folder there, or an artefact swapped in whole beside --out, does need the parent
    with pytest.raises(ConfigError, match=r"cannot write into .*shared \(permission denied\)"):
        check_output_dir(shared / "new")
    with pytest.raises(ConfigError, match=r"cannot write into .*shared \(permission denied\)"):
        check_output_dir(mine, swapped=True)


def test_a_read_only_mount_is_named_as_one(tmp_path, monkeypatch):
    monkeypatch.setattr(atomic.os, "access", lambda p, mode: False)
    monkeypatch.setattr(atomic.os, "statvfs", lambda p: SimpleNamespace(f_flag=os.ST_RDONLY))
    with pytest.raises(ConfigError, match=r"--out .*: cannot write into this folder \(read-only file system\)"):
        check_output_dir(tmp_path)


def test_a_missing_folder_under_a_locked_one_is_refused_before_any_work(locked_parent, capsys):
    """Review: `evaluate --csv ro/a/e.csv` (and `recommend --users all --out ro/a/r.csv`) ran the whole job and then
    failed with "Read-only file system: ro/a", where `--csv ro/e.csv` was refused at once: the check stopped at the
    first missing folder and never asked whether the nearest existing one takes writes."""
    from twotower.cli.paths import check_output_file

    shared, _ = locked_parent
    with pytest.raises(ConfigError, match=rf"^--out {shared / 'a' / 'b'}: cannot write into {shared} "
                                          r"\(permission denied\)"):
        check_output_dir(shared / "a" / "b")
    with pytest.raises(ConfigError, match=rf"^--csv {shared / 'a' / 'e.csv'}: cannot write into {shared} "
                                          r"\(permission denied\)"):
        check_output_file(shared / "a" / "e.csv", "--csv")
