"""The config `twotower train --resume` continues a run with: the run's own settings and data, plus what is given.

A run trained with `--config sasrec.toml` or `model.*=` overrides was resumed by retyping the whole command;
`train --out RUN --resume` alone built the defaults and was refused (no training data, or other model settings).
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Collection
from pathlib import Path
from typing import Any

from twotower.config import (ConfigPaths, RunConfig, _deep_update, _has_key, apply_overrides, config_to_dict,
                             load_config, merged_settings, read_config_files)
from twotower.errors import ConfigError
from twotower.pipeline.artifacts import _read_json_dict, read_saved_config, run_part_file

__all__ = ["resume_config", "resume_frames_run", "check_frame_tables", "OWN_DATA_LAYOUT"]

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
                  config_file: ConfigPaths = None, *, overrides_label: str = "overrides") -> RunConfig:
    """The config to continue the run in ``out`` with: its ``config.json`` (read as :func:`read_saved_config`
    reads it, so a run saved before newer settings still loads), then ``config_file`` (one or several, merged in
    order as :func:`load_config` merges them), then ``overrides``.

    Unless those name the training data (``data.train``, ``data.path`` or ``data.dataset``), the run reads its
    own copies of its split (``out/data/*.csv``), one trained from DataFrames (``train_run(frames=...)``, whose
    config names no data) too; a run trained on ``data.dataset`` reads that dataset again
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
    given = merged_settings(read_config_files(config_file))
    _deep_update(given, apply_overrides({}, list(overrides or []), overrides_label))
    named = [name for name in _INPUTS[:3] if _has_key(given, f"data.{name}")]
    if named:
        base["data"].update(dict.fromkeys(replaced for name in named for replaced in _REPLACES[name]))
    elif not _reads_dataset(base["data"]):  # data.train, data.path, or DataFrames (a run whose config names none)
        base["data"] = {**base["data"], **_own_copies(out, base["data"])}
    return load_config(config_file, overrides, base=base, overrides_label=overrides_label)


def _reads_dataset(data: dict[str, Any]) -> bool:
    """Whether the run's training input is ``data.dataset`` (read after ``data.train`` and ``data.path``)."""
    return data["train"] is None and data["path"] is None and data["dataset"] is not None


def resume_frames_run(out: Path, config: RunConfig, frames: Collection[str]) -> RunConfig:
    """``config`` reading the run's own copies of its split when it names no training data and ``frames`` give
    none: a run trained from DataFrames saved a config that names no data (a DataFrame has no file name), so
    ``train_run(run.config, out, resume=True)`` was refused as given "no data" though the run folder keeps its
    interactions as CSV files. ``frames``: the names of the DataFrames given now (read in place of the copies)."""
    data = config.data
    if any(getattr(data, name) is not None for name in _INPUTS[:3]) or set(frames) & set(_INPUTS[:3]):
        return config
    if not (out / "config.json").is_file():  # no run to continue: train_run says so
        return config
    return dataclasses.replace(config, data=dataclasses.replace(data, **_own_copies(out, dataclasses.asdict(data))))


def check_frame_tables(out: Path, data: Any, frames: Collection[str] = (), *, command_line: bool = False) -> None:
    """ConfigError when the run in ``out`` was trained with an item or user table given as a DataFrame and the
    resume gives it neither as a file (``data``: the resume's DataConfig) nor among ``frames``: the run folder
    keeps no copy of it to read (``items.jsonl`` is the catalogue as shown, its reserved columns renamed and its
    values as JSON, not the table its features were encoded from), and it was refused as if a file were missing
    ("pass --items FILE"), a flag of no use from Python. ``command_line``: `twotower train --resume`'s wording."""
    saved = (_read_json_dict(out / "config.json") or {}).get("data")
    if not isinstance(saved, dict) or saved.get("dataset") is not None:
        return  # a dataset's tables come with it
    info = _read_json_dict(out / "run.json") or {}
    missing = [f"{who}s" for who in ("item", "user") if saved.get(f"{who}s") is None
               and info.get(f"{who}_features") is not None and getattr(data, f"{who}s") is None
               and f"{who}s" not in frames]
    if not missing:
        return
    tables = " and ".join(f"its {name[:-1]} table (frames[{name!r}])" for name in missing)
    given = ", ".join(f"{name!r}: {name}_df" for name in missing)
    if command_line:
        config = f"tt.load_config({str(out / 'config.json')!r})"
        flags = " ".join(f"--{name} FILE" for name in missing)
        how = (f"resume it from Python, passing {'them' if len(missing) > 1 else 'it'} again: tt.train_run({config}, "
               f"{str(out)!r}, resume=True, frames={{{given}}}), or write {'each' if len(missing) > 1 else 'it'} to "
               f"a file and pass {flags}")
    else:
        how = (f"pass {'them' if len(missing) > 1 else 'it'} again: tt.train_run(config, {str(out)!r}, resume=True, "
               f"frames={{{given}}})")
    raise ConfigError(f"cannot resume {out}: it was trained from DataFrames, and the run folder keeps a copy of its "
                      f"interactions (data/*.csv) but not of {tables}; {how}")


def _own_copies(out: Path, data: dict[str, Any]) -> dict[str, Any]:
    """The ``data`` settings that read the run's copies of its split in place of the files (or the one file split,
    or the DataFrames) that ``data`` names."""
    info = _read_json_dict(out / "run.json") or {}
    report = info.get("report") or {}
    copies: dict[str, Any] = {}
    for name in ("train", "valid", "test"):
        path = run_part_file(out, name)
        had = name == "train" or int(report.get(f"{name}_rows") or 0) > 0
        if path is None and had:
            raise ConfigError(f"cannot resume {out}: its copy of the {name} interactions, {out / 'data' / f'{name}.csv'}, "
                              f"is missing; {_pass_the_data(out, data, report)} to resume")
        copies[name] = None if path is None else str(path)
    # the item and user tables stay the files the run names (or the DataFrames given again): their key columns keep
    # the names they had there
    keys = {f"{who}_key": data[f"{who}_key"] or data[f"{who}_col"] for who in ("item", "user")
            if data[f"{who}s"] or info.get(f"{who}_features") is not None}
    return {"path": None, "dataset": None, **copies, **OWN_DATA_LAYOUT, **keys}


def _pass_the_data(out: Path, data: dict[str, Any], report: dict[str, Any]) -> str:
    """How to give a resume the interactions a run was trained on: its files, or for a run trained from DataFrames
    (its config names no data), the frames again."""
    if data["train"] is not None or data["path"] is not None:
        return "pass the files it was trained on (--train FILE --valid FILE, or --data FILE)"
    parts = ["path"] if isinstance(report.get("split"), dict) else \
        ["train", *(name for name in ("valid", "test") if int(report.get(f"{name}_rows") or 0) > 0)]
    given = ", ".join(f"{name!r}: {name}_df" for name in parts)
    return (f"it was trained from DataFrames: pass them again, tt.train_run(config, {str(out)!r}, resume=True, "
            f"frames={{{given}}})")
