"""A writer lock that cannot be created names the folder given, not only a lock file the user never asked for.

Root on an NFS share with root_squash (or a special file system) passes the os.access checks of --out, then
failed on the lock file: `twotower export --out /nfs/x` printed "error: Permission denied: /nfs/.x.twotower.lock".
"""
from __future__ import annotations

import errno

import pytest

from twotower.errors import ConfigError
from twotower.utils import folder_lock


def _denied(path, *args, **kwargs):
    raise PermissionError(errno.EACCES, "Permission denied", str(path))


@pytest.mark.parametrize("beside", [True, False])
def test_an_unwritable_lock_file_is_refused_naming_the_folder(tmp_path, monkeypatch, beside) -> None:
    out = tmp_path / "new" / "deeper" / "x"
    monkeypatch.setattr(folder_lock, "open", _denied, raising=False)
    with pytest.raises(ConfigError) as e:
        with folder_lock.exclusive_writer(out, "twotower export", "wait", beside=beside):
            pass
    said = str(e.value)
    assert said.startswith(f"{out}: cannot write its lock file ") and "(Permission denied)" in said
    assert not (tmp_path / "new").exists()  # the folders made for the lock went again
