"""The modes of what a library writes inside atomic_dir.

Regression for a user walkthrough: `twotower search train` and `rerank train` save through sentence-transformers,
whose safetensors ``save_file`` writes through a 0600 temporary file of its own, so ``query/model.safetensors`` and
the cross-encoder's ``model.safetensors`` came out unreadable to every other user (a service account serving a
model another account trained), while the files beside them were 0644.
"""
from __future__ import annotations

import os
import stat
import sys

import pytest

from tests.utils.umask_switch import umask as _umask
from twotower.utils.atomic import atomic_dir

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX modes")


def _mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.mark.parametrize(("mask", "file_mode", "dir_mode"), [(0o022, 0o644, 0o755), (0o077, 0o600, 0o700)])
def test_owner_only_files_inside_get_the_read_bits_the_umask_allows(tmp_path, mask, file_mode, dir_mode):
    out = tmp_path / "model"
    with _umask(mask), atomic_dir(out) as tmp:
        (tmp / "sub").mkdir()
        os.chmod(tmp / "sub", 0o700)
        weights = tmp / "sub" / "model.safetensors"
        weights.write_bytes(b"w")
        os.chmod(weights, 0o600)  # as a library's mkstemp leaves it
    assert _mode(out / "sub" / "model.safetensors") == file_mode
    assert _mode(out / "sub") == dir_mode


def test_write_bits_and_links_are_left_as_written(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_bytes(b"x")
    os.chmod(target, 0o600)
    with _umask(0o022), atomic_dir(tmp_path / "out") as tmp:
        (tmp / "ro").write_bytes(b"r")
        os.chmod(tmp / "ro", 0o400)
        (tmp / "link").symlink_to(target)
    assert _mode(tmp_path / "out" / "ro") == 0o444  # read bits added, no write bit given
    assert _mode(target) == 0o600  # the link's target is not this folder's to change


def test_safetensors_weights_saved_inside_are_readable_by_others(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file

    with _umask(0o022), atomic_dir(tmp_path / "model") as tmp:
        save_file({"w": torch.zeros(2)}, str(tmp / "model.safetensors"))
    assert _mode(tmp_path / "model" / "model.safetensors") == 0o644
