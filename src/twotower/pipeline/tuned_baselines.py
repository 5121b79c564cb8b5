"""Baseline hyper-parameters tuned once per run folder and reused by every later `evaluate`.

Tuning EASE's λ and ItemKNN's k on the validation split costs a dozen fits;
the answer depends only on the run's train/valid interactions, the selection
metric and the grid, so the first evaluation stores it in
``<run>/tuned_baselines.json`` (written atomically) and later evaluations read
it back. An entry is reused only when all of those match; otherwise it is
tuned again and replaced. The file is not in the run's manifest: it is a cache
that loading never reads, and deleting it only costs a re-tune.
"""
from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import scipy.sparse as sp

from twotower.errors import ConfigError, IntegrityError
from twotower.utils.atomic import atomic_write_json, read_json
from twotower.utils.digest import matrix_digest  # re-exported: the key of every tuned entry
from twotower.utils.folder_lock import exclusive_writer

__all__ = ["TUNED_FILE", "tuning_key", "cached_tuning", "is_kept", "matrix_digest"]

log = logging.getLogger(__name__)

TUNED_FILE = "tuned_baselines.json"
_FORMAT = 1


def tuning_key(tune: Callable[..., Any], grid_arg: str, *, metric: str, train: sp.csr_matrix,
               valid: sp.csr_matrix) -> dict[str, Any]:
    """What a tuned value depends on: the grid (read from ``tune``'s own default), metric and data."""
    grid = inspect.signature(tune).parameters[grid_arg].default
    return {"grid": [float(g) for g in grid], "metric": metric, "train": matrix_digest(train), "valid": matrix_digest(valid)}


def _read(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = read_json(path)
    except IntegrityError as e:  # a cache: a broken one is re-tuned and rewritten, not an error
        log.warning("%s; tuning again", e)
        return {}
    if not isinstance(data, dict) or data.get("format") != _FORMAT or not isinstance(data.get("entries"), dict):
        return {}
    return data["entries"]


def cached_tuning(run_dir: str | Path, name: str, key: dict[str, Any],
                  tune: Callable[[], tuple[float, list[dict]]]) -> tuple[float, bool, float]:
    """``(value, reused, tune_seconds)``: the stored value for ``name`` when its ``key`` matches, else ``tune()`` saved.

    ``tune`` returns ``(best_value, table)`` as :func:`tune_ease` does; the
    table is stored next to the value so the file says why that value won,
    and the seconds tuning took, so a reused value reports the same cost.
    A run folder that cannot be written (read-only copy) still evaluates; the
    value is just not kept.
    """
    path = Path(run_dir) / TUNED_FILE
    entries = _read(path)
    entry = entries.get(name)
    if isinstance(entry, dict) and entry.get("key") == key and isinstance(entry.get("value"), (int, float)):
        seconds = entry.get("seconds")
        return float(entry["value"]), True, float(seconds) if isinstance(seconds, (int, float)) else 0.0
    # tuning refits the baseline once per grid value: say so, or the terminal sits silent for a while
    log.info("tuning %s on the validation split (once per run; kept in %s)", name, path)
    t0 = time.perf_counter()
    value, table = tune()
    seconds = time.perf_counter() - t0
    log.info("tuned %s in %.1f s: %g", name, seconds, value)
    try:
        # the run folder's writer lock, for a moment: not written while `train` rewrites the folder, and two
        # evaluations' read-then-write of the file do not drop each other's entry
        with exclusive_writer(run_dir, "twotower evaluate", "the tuned setting is not kept"):
            entries = {**_read(path), name: {"key": key, "value": value, "seconds": seconds, "table": table}}
            atomic_write_json(path, {"format": _FORMAT, "entries": entries})
    except ConfigError as e:
        log.warning("%s; the next evaluation tunes %s again", e, name)
    except OSError as e:
        log.warning("could not save the tuned %s setting to %s (%s); the next evaluation tunes it again",
                    name, path, e.strerror or e)
    return float(value), False, seconds


def is_kept(run_dir: str | Path, name: str, key: dict[str, Any]) -> bool:
    """Whether ``<run>/tuned_baselines.json`` holds ``name``'s setting for ``key``: a save that another writer's
    lock or a read-only folder prevented is only warned about, and must not be reported as saved."""
    entry = _read(Path(run_dir) / TUNED_FILE).get(name)
    return isinstance(entry, dict) and entry.get("key") == key
