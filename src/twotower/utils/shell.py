"""Paths inside the commands the CLI suggests, quoted for a POSIX shell: `--run runs/ml ü` pasted back ran
`--run runs/ml` with a stray argument."""
from __future__ import annotations

import os
import shlex

__all__ = ["shell_arg"]


def shell_arg(value: str | os.PathLike[str]) -> str:
    """``value`` as one shell word: unchanged when it needs no quoting (``runs/ml``), else single-quoted."""
    return shlex.quote(os.fspath(value))
