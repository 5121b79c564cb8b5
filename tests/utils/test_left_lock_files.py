"""A lock file twotower left in a folder (`export --out DIR/a` keeps ``DIR/.a.twotower.lock`` after it ends) is not
the user's file: `export --out DIR` listed it as one ("a non-empty folder that is not an ONNX export
(.a.twotower.lock)") and refused, and `index build --out DIR` refused the folder as non-empty. A lock some process
holds now still counts: its writer is at work there."""
from __future__ import annotations

import pytest

from twotower.errors import ConfigError
from twotower.export.folder import CLI_LABELS, check_export_dir
from twotower.index.storage import _check_replaceable
from twotower.utils.folder_lock import exclusive_writer, lock_path
from twotower.utils.output_folders import check_artefact_dir


def _left_lock(tmp_path):
    out = tmp_path / "exports"
    out.mkdir()
    with exclusive_writer(out / "a", "twotower export", "wait", beside=True):
        pass
    assert (out / ".a.twotower.lock").is_file()  # kept after its writer ended, as every lock file is
    return out


def test_export_lists_only_the_users_files(tmp_path) -> None:
    out = _left_lock(tmp_path)
    assert check_export_dir(out, labels=CLI_LABELS) == ()  # nothing of the user's to remove
    (out / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match=r"not an ONNX export \(notes\.txt\);"):
        check_export_dir(out, labels=CLI_LABELS)


def test_index_folders_with_a_left_lock_are_empty(tmp_path) -> None:
    out = _left_lock(tmp_path)
    check_artefact_dir(out, kind="vector index", is_same_kind=lambda p: False)
    _check_replaceable(out)
    (out / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="non-empty folder"):
        check_artefact_dir(out, kind="vector index", is_same_kind=lambda p: False)


def test_a_held_lock_is_still_listed(tmp_path) -> None:
    out = tmp_path / "exports"
    with exclusive_writer(out / "a", "twotower export", "wait", beside=True):
        assert lock_path(out / "a", beside=True).parent == out
        with pytest.raises(ConfigError, match=r"\(\.a\.twotower\.lock\)"):
            check_export_dir(out, labels=CLI_LABELS)
