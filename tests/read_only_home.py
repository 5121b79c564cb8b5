"""A HOME that nothing can be created under, as a read-only HOME (or one owned by another user) refuses."""
from __future__ import annotations

import errno
from pathlib import Path

import pytest


def read_only_home(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    """Point HOME at ``home`` and refuse every mkdir at or under it (root ignores chmod, so the refusal is faked)."""
    monkeypatch.setenv("HOME", str(home))
    real_mkdir = Path.mkdir

    def mkdir(self: Path, *args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        if self == home or home in self.parents:
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", mkdir)
