"""The folder twotower caches into: ``$XDG_CACHE_HOME/twotower`` where that is set, else ``~/.cache/twotower``.

The TWOTOWER_* variables of each cache (TWOTOWER_ONNX_CACHE, TWOTOWER_DATA) and ``--cache DIR`` still come first.
"""
from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DEFAULT_CACHE_HOME", "cache_home", "expand_cache_path"]

#: how defaults (``SearchConfig.cache_dir``) and --help write the cache folder; :func:`expand_cache_path` reads it
DEFAULT_CACHE_HOME = "~/.cache/twotower"


def cache_home() -> Path:
    """``$XDG_CACHE_HOME/twotower`` when XDG_CACHE_HOME holds an absolute path (the XDG rule: a relative one is
    ignored), else ``~/.cache/twotower``."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "twotower"
    return Path.home() / ".cache" / "twotower"


def expand_cache_path(value: str | os.PathLike[str]) -> Path:
    """``value`` with ``~`` expanded, and ``~/.cache/twotower`` (what the defaults say) standing for
    :func:`cache_home`: the text-embedding cache's default went to ~/.cache whatever XDG_CACHE_HOME said."""
    text = os.fspath(value)
    if text == DEFAULT_CACHE_HOME or text.startswith(DEFAULT_CACHE_HOME + "/"):
        return cache_home() / text[len(DEFAULT_CACHE_HOME):].lstrip("/")
    return Path(text).expanduser()
