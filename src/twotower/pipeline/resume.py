"""The config `twotower train --resume` continues a run with: the run's own settings and data, plus what is given.

A run trained with `--config sasrec.toml` or `model.*=` overrides was resumed by retyping the whole command;
`train --out RUN --resume` alone built the defaults and was refused (no training data, or other model settings).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from twotower.config import (RunConfig, _deep_update, _has_key, apply_overrides, config_to_dict, load_config,
                             read_config_file)
from twotower.errors import ConfigError
from twotower.pipeline.artifacts import _read_json_dict, read_saved_config, run_part_file

__all__ = ["resume_config", "OWN_DATA_LAYOUT"]

#: How the run's copies of its split (data/*.csv) are read: twotower wrote them, in the canonical layout, as UTF-8
OWN_DATA_LAYOUT = {"user_col": "user_id", "item_col": "item_id", "timestamp_col": "timestamp", "rating_col": "rating",
                   "format": "table", "encoding": "utf-8", "time_unit": "auto"}
#: The settings that name the interactions read; one of the first three given names the training data afresh
_INPUTS = ("train", "path", "dataset", "valid", "test")
#: What each training input given on resume replaces of the run's: the inputs read in its place (data.train is read
#: before data.path, then data.dataset, so the run's would be read instead of the one given), and for a file or
#: dataset to split, the valid and test interactions it cuts itself. A data.train alone keeps the run's
#: valid and test files, as every other setting not given is the run's.
_REPLACES = {"train": ("path", "dataset"), "path": _INPUTS, "dataset": _INPUTS}


def resume_config(out: str | Path, overrides: list[str] | None = None,
                  config_file: str | Path | None = None, *, overrides_label: str = "overrides") -> RunConfig:
    """The config to continue the run in ``out`` with: its ``config.json`` (read as :func:`read_saved_config`
    reads it, so a run saved before newer settings still loads), then ``config_file``, then ``overrides``.

    Unless those name the training data (``data.train``, ``data.path`` or ``data.dataset``), the run reads its
    own copies of its split (``out/data/*.csv``); a run trained on ``data.dataset`` reads that dataset again
    (its item and user tables come with it, and are not copied). A ``data.train`` given replaces the run's
    training input alone (its valid, test, item and user files stay, unless given too); a ``data.path`` or
    ``data.dataset`` is split afresh, so it replaces the run's train, valid and test interactions. Without
    ``config.json`` (nothing to continue from) the base is the defaults, as for a new run;
    ``train_run(..., resume=True)`` then says what is missing.
    ``overrides_label``: as :func:`load_config`'s.
    """
    out = Path(out)
    if os.environ.get("RANK", "0") in ("", "0"):  # a resume killed outright rewrote config.json: read the run's
        from twotower.pipeline.resume_snapshot import put_back_leftover

        put_back_leftover(out)
    saved = out / "config.json"
    if not saved.is_file():
        return load_config(config_file, overrides, overrides_label=overrides_label)
    base = config_to_dict(read_saved_config(saved)[0])
    given = read_config_file(config_file) if config_file is not None else {}
    _deep_update(given, apply_overrides({}, list(overrides or []), overrides_label))
    named = [name for name in _INPUTS[:3] if _has_key(given, f"data.{name}")]
    if named:
        base["data"].update(dict.fromkeys(replaced for name in named for replaced in _REPLACES[name]))
    elif base["data"]["train"] is not None or base["data"]["path"] is not None:
        base["data"] = _own_copies(out, base["data"])
    return load_config(config_file, overrides, base=base, overrides_label=overrides_label)


def _own_copies(out: Path, data: dict[str, Any]) -> dict[str, Any]:
    """``data`` reading the run's copies of its split in place of the files (or the one file split) it names."""
    report = (_read_json_dict(out / "run.json") or {}).get("report") or {}
    copies: dict[str, Any] = {}
    for name in ("train", "valid", "test"):
        path = run_part_file(out, name)
        had = name == "train" or int(report.get(f"{name}_rows") or 0) > 0
        if path is None and had:
            raise ConfigError(f"cannot resume {out}: its copy of the {name} interactions, {out / 'data' / f'{name}.csv'}, "
                              f"is missing; pass the files it was trained on (--train FILE --valid FILE, or --data "
                              f"FILE) to resume")
        copies[name] = None if path is None else str(path)
    # the item and user tables stay the files the run names: their key columns keep the names they had there
    keys = {f"{who}_key": data[f"{who}_key"] or data[f"{who}_col"] for who in ("item", "user") if data[f"{who}s"]}
    return {**data, "path": None, "dataset": None, **copies, **OWN_DATA_LAYOUT, **keys}
