"""Output paths checked before any work: a bad ``--out`` is one line and exit 2, not a traceback an hour later."""
from __future__ import annotations

import os
from pathlib import Path

from twotower.errors import ConfigError

__all__ = ["check_output_dir", "check_output_file"]


def _parents_ok(path: Path, flag: str) -> None:
    """Every existing ancestor must be a folder we can write into (the rest is created later)."""
    for parent in reversed(path.parents):
        if not parent.exists():
            return
        if not parent.is_dir():
            raise ConfigError(f"{flag} {path}: {parent} is a file, not a folder; choose another path")
    existing = next((p for p in path.parents if p.exists()), None)
    if existing is not None and not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{flag} {path}: cannot write into {existing} (permission denied)")


def check_output_dir(path: str | os.PathLike[str], flag: str = "--out") -> Path:
    """``path`` must be a folder or creatable as one; returns it as a Path."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise ConfigError(f"{flag} {p}: exists and is a file, not a folder; choose another path")
    _parents_ok(p, flag)
    if p.is_dir() and not os.access(p, os.W_OK | os.X_OK):
        raise ConfigError(f"{flag} {p}: cannot write into this folder (permission denied)")
    return p


def check_output_file(path: str | os.PathLike[str], flag: str = "--out") -> Path:
    """``path`` must be a file (new or to be replaced), not a folder; returns it as a Path."""
    p = Path(path)
    if p.is_dir():
        raise ConfigError(f"{flag} {p}: is a folder; give a file path such as {p / 'recs.csv'}")
    _parents_ok(p, flag)
    return p
