"""Is a path a run folder (``run.json`` in it)? Checked without torch, so a wrong ``--run`` is refused at once.

``twotower serve --run bad`` imported torch, uvicorn and the service before :meth:`TrainedRun.load` looked at the
folder: about 5 s to say "unknown run". The same message, from here, before any heavy import.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from twotower.errors import NotFoundError

__all__ = ["STAGING_NAME", "check_run_folder", "other_runs_index", "run_hint", "run_shown"]

#: the name of the folder a new run trains in beside the earlier run it replaces (:mod:`twotower.pipeline.staging`):
#: ``.NAME.staging-PID-sSTART`` for the run folder ``NAME``
STAGING_NAME = re.compile(r"\.(?P<name>.+)\.staging-(?P<pid>\d+)(?:-s(?P<start>\d+))?")


def run_shown(folder: str | os.PathLike[str]) -> Path:
    """The run folder as the user named it: ``runs/ml`` for its staging folder ``runs/.ml.staging-123-s456`` (a new
    run into a folder holding an earlier one trains there and is swapped in once finished), else ``folder``."""
    folder = Path(folder)
    m = STAGING_NAME.fullmatch(folder.name)
    return folder if m is None else folder.parent / m.group("name")


def run_hint(d: Path) -> str:
    """What to pass instead of ``d`` when it is not a run folder: the run it lies in, or the runs it holds."""
    for parent in list(d.parents)[:3]:  # a file or subfolder of a run (runs/ml/index, runs/ml/model.safetensors)
        if (parent / "run.json").is_file():
            return f"it lies inside the run {str(parent)!r}: pass that folder"
    try:
        inner = sorted(str(c) for c in d.iterdir() if (c / "run.json").is_file()) if d.is_dir() else []
    except OSError:
        inner = []
    if inner:  # the parent of several runs (--run runs instead of --run runs/ml)
        more = f" and {len(inner) - 5} more" if len(inner) > 5 else ""
        return f"the folder holds runs: pass one of {', '.join(repr(r) for r in inner[:5])}{more}"
    return "train one with `twotower train --out DIR`"


def check_run_folder(path: str | os.PathLike[str]) -> Path:
    """``path`` as a Path, refused (:class:`NotFoundError`, as :meth:`TrainedRun.load` says it) without run.json."""
    d = Path(path)
    if not (d / "run.json").exists():
        raise NotFoundError("run", str(d), "no run.json there; " + run_hint(d))
    return d


def other_runs_index(run_dir: str | os.PathLike[str], folder: str | os.PathLike[str]) -> Path | None:
    """The run whose own index folder ``folder`` is (``OTHER/index``, what `recommend` and `serve` read for it),
    where that run is not ``run_dir``'s; None otherwise."""
    other = Path(folder).parent
    if Path(folder).name != "index" or not (other / "run.json").is_file():
        return None
    try:
        same = other.resolve() == Path(run_dir).resolve()
    except (OSError, RuntimeError):  # a symlink loop: compared as written
        same = other == Path(run_dir)
    return None if same else other
