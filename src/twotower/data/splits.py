"""Train/valid/test splits of canonical interaction frames, with reports.

Every split returns a :class:`Split` whose frames keep the input columns,
ordered by (user, timestamp, item). ``report`` counts rows, users and items
per part, cold users/items (in valid/test but not in train) and the users a
rule kept entirely in train.
"""
from __future__ import annotations

import json
import logging
import math
import numbers
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from twotower.config import TIME_UNITS, DataConfig, TrainConfig
from twotower.data.timeunits import (ROW_ORDER, UNIT_NAMES, convert, date_in_unit, report_unit, show_time,
                                     unit_of)
from twotower.data.vocab import sort_ids
from twotower.errors import ConfigError, DataError
from twotower.utils.arguments import check_seed

__all__ = [
    "Split",
    "temporal_split",
    "leave_last_n_out",
    "global_time_split",
    "random_split",
    "split_report",
    "warn_split_mismatch",
]

log = logging.getLogger(__name__)

_EPS = 1e-9


@dataclass(frozen=True)
class Split:
    train: pd.DataFrame
    valid: pd.DataFrame
    test: pd.DataFrame
    report: dict

    def __iter__(self):  # allows ``train, valid, test = split``
        return iter((self.train, self.valid, self.test))


def _check_df(df: pd.DataFrame) -> None:
    if not isinstance(df, pd.DataFrame):
        raise DataError(f"expected an interactions DataFrame, got {type(df).__name__}")
    for col in ("user_id", "item_id", "timestamp"):
        if col not in df.columns:
            raise DataError(
                f"column {col!r} missing; splits need a frame from read_interactions "
                f"(columns present: {list(df.columns)})",
                column=col,
            )
    if len(df) == 0:
        raise DataError("no interactions to split")
    _check_values(df)


_READ_FIRST = ("; pass the frame through twotower.read_interactions(df) first, which reads ids as text and "
               "timestamps as epoch times (dates too), naming any row it cannot read")


def _check_values(df: pd.DataFrame) -> None:
    """Refuse what the splits would misplace without a word in a frame not made by read_interactions.

    They order rows by ``timestamp`` cast to int64: a missing time became the smallest integer (the user's
    oldest row, so in train), fractions were cut off (1.7 s tied with 1.2 s, and the tie by item id could put
    the later row in train and the earlier in test), and a missing id was split as the user or item "nan".
    """
    for col in ("user_id", "item_id"):
        missing = df[col].isna().to_numpy(dtype=bool)
        if missing.any():
            raise DataError(f"{col} is missing (an empty id){_READ_FIRST}", row=int(np.flatnonzero(missing)[0]),
                            column=col, unit="iloc")
    ts = df["timestamp"]
    if pd.api.types.is_datetime64_any_dtype(ts) or pd.api.types.is_integer_dtype(ts):
        bad = ts.isna().to_numpy(dtype=bool)
    elif pd.api.types.is_float_dtype(ts):
        values = ts.to_numpy(dtype=np.float64, na_value=np.nan)
        bad = ~np.isfinite(values)
        bad[~bad] = np.floor(values[~bad]) != values[~bad]
    else:  # text, booleans, objects: not times the int64 cast can order
        bad = np.ones(len(ts), dtype=bool)
    if bad.any():
        pos = int(np.flatnonzero(bad)[0])
        value = ts.iloc[pos]
        value = value.item() if isinstance(value, np.generic) else value
        raise DataError(f"timestamp {value!r} ({ts.dtype}) is missing or not a whole epoch time, so the split "
                        f"cannot order this row{_READ_FIRST}", row=pos, column="timestamp", unit="iloc")


def _check_ratios(ratios: Any, setting: str = "ratios") -> tuple[float, float, float]:
    try:
        values = tuple(ratios)
    except TypeError:
        raise ConfigError(f"{setting} must be three numbers (train, valid, test), got {ratios!r}") from None
    if len(values) != 3 or not all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in values):
        raise ConfigError(f"{setting} must be three numbers (train, valid, test), got {ratios!r}")
    values = tuple(float(v) for v in values)
    if not all(math.isfinite(v) and v >= 0 for v in values):
        raise ConfigError(f"{setting} must be non-negative, got {ratios!r}")
    if abs(sum(values) - 1.0) > 1e-6:
        raise ConfigError(f"{setting} must sum to 1, got {ratios!r} (sum {sum(values):g})")
    if values[0] <= 0:
        raise ConfigError(f"{setting}: the train ratio must be > 0, got {ratios!r}")
    return values  # type: ignore[return-value]


def item_order_key(items: pd.Series) -> np.ndarray:
    """An int64 key ordering item ids as the vocabulary orders them (:func:`~twotower.data.vocab.sort_ids`).

    Numerically when all are integers ("2" < "10", "007" just before "7"), else as text. One rule for the
    splits' ties and the histories' (which go by vocabulary row): ids past int64 used to fall back to text
    order here while the vocabulary kept them numeric, and "007" and "7" tied here (file order decided).
    """
    values = items.astype(str).to_numpy(dtype=object)
    ranks = pd.Index(sort_ids(pd.unique(values)), dtype=object)
    return ranks.get_indexer(values).astype(np.int64)


def _sorted_positions(df: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """Sort by (user, timestamp, item); return the frame, each row's position in its user and the user's count."""
    user_codes, _ = pd.factorize(df["user_id"].astype(str), sort=True)
    # lexsort is stable: rows tied on all three keep their order in the frame (no row-number key needed)
    order = np.lexsort((item_order_key(df["item_id"]), df["timestamp"].to_numpy(dtype=np.int64), user_codes))
    sorted_df = df.iloc[order].reset_index(drop=True)
    codes = user_codes[order]
    counts = np.bincount(codes)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    pos = np.arange(len(df)) - starts[codes]
    m = counts[codes]
    return sorted_df, pos, m


def _clean(df: pd.DataFrame) -> pd.DataFrame:
    out = df.reset_index(drop=True)
    out.attrs = {}
    return out


def split_report(train: pd.DataFrame, valid: pd.DataFrame, test: pd.DataFrame) -> dict[str, Any]:
    """Rows/users/items per part, cold users/items of valid and test, users with an empty train."""
    parts = {"train": train, "valid": valid, "test": test}
    rep: dict[str, Any] = {}
    users = _present(parts, "user_id")
    items = _present(parts, "item_id")
    for k, v in parts.items():
        rep[f"{k}_rows"] = int(len(v))
        rep[f"{k}_users"] = int(users[k].sum())
        rep[f"{k}_items"] = int(items[k].sum())
    for k in ("valid", "test"):
        rep[f"cold_users_{k}"] = int((users[k] & ~users["train"]).sum())
        rep[f"cold_items_{k}"] = int((items[k] & ~items["train"]).sum())
    rep["users_with_empty_train"] = int(((users["valid"] | users["test"]) & ~users["train"]).sum())
    return rep


def warn_split_mismatch(files: dict[str, str]) -> list[str]:
    """Warn about each file (path -> sha256) that is not the one `data split` wrote beside its ``split_report.json``.

    The report lists each file's sha256 (``files``); one that differs was replaced (a split killed between its
    renames leaves one split's train.csv beside another's test.csv) or edited since. Files of no split, and
    reports written before ``files`` was recorded, are passed over. Returns the paths warned about.
    """
    warned = []
    for path, digest in files.items():
        p = Path(path)
        try:
            listed = json.loads((p.parent / "split_report.json").read_text(encoding="utf-8"))["files"][p.name]["sha256"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if listed != digest:
            log.warning("%s is not the file `twotower data split` wrote there (its sha256 differs from the one "
                        "split_report.json records): the folder may mix the files of two splits, or the file was "
                        "edited since; split again into a new --out if it was not meant to change", path)
            warned.append(path)
    return warned


def _present(parts: dict[str, pd.DataFrame], column: str) -> dict[str, np.ndarray]:
    """Which of the parts' distinct ids (as text) each part holds: one bool mask over the distinct ids per part.

    The ids are factorized once over the three parts: a Python set per part took 17 s for 10M ids of one column.
    """
    ids = pd.concat([v[column] for v in parts.values()], ignore_index=True).astype(str)
    codes, distinct = pd.factorize(ids, use_na_sentinel=False)
    out: dict[str, np.ndarray] = {}
    start = 0
    for k, v in parts.items():
        mask = np.zeros(len(distinct), dtype=bool)
        mask[codes[start:start + len(v)]] = True
        out[k] = mask
        start += len(v)
    return out


def _warn_all_users_short(method: str, users: int, needed: int, way_out: str) -> None:
    """Every user is too short to give up rows: say so at split time, not when `train` finds valid.csv empty."""
    who = "the one user has" if users == 1 else f"all {users:,} users have"
    log.warning("%s split: valid and test are empty: %s fewer than the %d interactions a user needs to give rows "
                "to them, so every row stays in train; %s", method, who, needed, way_out)


def _finish(method: str, train: pd.DataFrame, valid: pd.DataFrame, test: pd.DataFrame, extra: dict) -> Split:
    if len(train) == 0:
        raise DataError(
            f"{method} left every user's train part empty; use a smaller valid/test share "
            "or an earlier cut-off"
        )
    report = {"method": method, **extra, **split_report(train, valid, test)}
    log.info(
        "%s split: train %d / valid %d / test %d rows; cold users valid %d test %d; %s",
        method, report["train_rows"], report["valid_rows"], report["test_rows"],
        report["cold_users_valid"], report["cold_users_test"], extra,
    )
    return Split(_clean(train), _clean(valid), _clean(test), report)


def temporal_split(df: pd.DataFrame, ratios: Sequence[float] = DataConfig.ratios) -> Split:
    """Per user, oldest interactions to train and newest to test.

    Each user's rows are sorted by (timestamp, item id — numeric when ids are
    integers). With ``m`` rows: ``n_test = floor(m * r_test)`` and ``n_valid =
    floor(m * r_valid)``, each at least 1 when ``m >= 3`` and its ratio > 0.
    Users with fewer than 3 rows stay entirely in train (``users_train_only``).
    """
    r_train, r_valid, r_test = _check_ratios(ratios)
    _check_df(df)
    s, pos, m = _sorted_positions(df)
    n_test = np.floor(m * r_test + _EPS).astype(np.int64)
    n_valid = np.floor(m * r_valid + _EPS).astype(np.int64)
    big = m >= 3
    if r_test > 0:
        n_test = np.where(big, np.maximum(n_test, 1), n_test)
    if r_valid > 0:
        n_valid = np.where(big, np.maximum(n_valid, 1), n_valid)
    n_test = np.where(big, n_test, 0)
    n_valid = np.where(big, n_valid, 0)
    is_test = pos >= m - n_test
    is_valid = (~is_test) & (pos >= m - n_test - n_valid)
    is_train = ~(is_test | is_valid)
    short_users = int(s.loc[~big, "user_id"].nunique())
    if not big.any() and (r_valid > 0 or r_test > 0):
        _warn_all_users_short("temporal", short_users, 3, "split such a file with --method random or --method "
                              "time (data.split)")
    return _finish(
        "temporal",
        s[is_train], s[is_valid], s[is_test],
        {"ratios": [r_train, r_valid, r_test], "users_train_only": short_users, "min_interactions": 3},
    )


def leave_last_n_out(df: pd.DataFrame, n: int = DataConfig.leave_n) -> Split:
    """Per user, the last ``n`` rows to test and the ``n`` before to valid.

    Users with fewer than ``2n + 1`` rows stay in train (``users_train_only``).
    """
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise ConfigError(f"n: must be an integer >= 1 (rows held out per user), got {n!r}")
    n = int(n)
    _check_df(df)
    s, pos, m = _sorted_positions(df)
    # no user holds more rows than the frame, so a larger n splits as the frame's length does; unbounded, the
    # arithmetic below left int64 (data.leave_n=1e30: "OverflowError: Python int too large to convert to C long")
    k = min(n, len(s))
    big = m >= 2 * k + 1
    is_test = big & (pos >= m - k)
    is_valid = big & ~is_test & (pos >= m - 2 * k)
    is_train = ~(is_test | is_valid)
    short_users = int(s.loc[~big, "user_id"].nunique())
    if not big.any():
        _warn_all_users_short("leave_last", short_users, 2 * n + 1,
                              f"n={n} holds out {n} for valid and {n} for test; a smaller n (--n, data.leave_n) "
                              "holds out fewer")
    return _finish(
        "leave_last",  # as `data split --method` and data.split spell it, so the report's method splits again
        s[is_train], s[is_valid], s[is_test],
        {"n": n, "users_train_only": short_users, "min_interactions": 2 * n + 1},
    )


def _to_epoch(value: Any, setting: str, unit: str = "s") -> int:
    """A cut-off as an epoch time: a number as given (floored), a date (naive: UTC) in ``unit``."""
    if isinstance(value, bool):
        raise ConfigError(f"{setting} must be an epoch time or a date, got {value!r}")
    if isinstance(value, numbers.Real):
        if not math.isfinite(float(value)):
            raise ConfigError(f"{setting} must be finite, got {value!r}")
        return int(math.floor(float(value)))
    return date_in_unit(value, unit, setting)


def _span(ts: np.ndarray, unit: str | None, declared: bool = False, per_user: bool = False) -> str:
    """The data's time range for messages, with the dates it means and the unit it was read in.

    ``per_user``: the timestamps are each user's line numbers (SASRec format), not positions in the file, so
    "positions in file order" sent the user to cut at a line of the file, which no timestamp reaches.
    """
    lo, hi = int(ts.min()), int(ts.max())
    if unit is None and per_user:
        return (f"the data has no times: its timestamps are each user's line numbers ({lo} to {hi}; SASRec format), "
                "so a cut-off N keeps every user's first N lines in train rather than cutting the file at line N; "
                "--method leave_last (data.split=leave_last) holds out each user's last lines")
    if unit is None:
        return f"the data's timestamps run from {lo} to {hi}, positions in file order rather than times"
    how = "data.time_unit" if declared else "told from their size; data.time_unit sets it"
    return (f"the data's timestamps run from {show_time(lo, unit)} to {show_time(hi, unit)}, read as "
            f"{UNIT_NAMES[unit]} ({how})")


def _yyyymmdd(value: Any) -> pd.Timestamp | None:
    """The date an integer such as 20240501 spells as YYYYMMDD, or None when it spells none."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or not 10000101 <= int(value) <= 99991231:
        return None
    try:
        return pd.Timestamp(pd.to_datetime(str(int(value)), format="%Y%m%d"))
    except (ValueError, OverflowError):
        return None


def _cutoff(value: Any, setting: str, unit: str | None, ts: np.ndarray, declared: bool = False,
            per_user: bool = False) -> int:
    """One cut-off in the data's unit: a date converted, a number checked to be of the data's magnitude.

    A number of another magnitude (epoch seconds against millisecond data) puts every row on one side of
    it, and the split would quietly hold nothing out, or everything: refused, with the value in the right unit
    (unless data.time_unit declares the unit: ``declared``). So is an 8-digit number outside the data that read
    as YYYYMMDD is a date inside it (--valid-start 20240501 meant 2024-05-01, not 1970-08-23).
    """
    if unit is None:  # row or line order: a position can be cut at, a date cannot
        if not isinstance(value, numbers.Real):
            raise ConfigError(f"{setting}={value!r} is a date, but the data has no time column "
                              f"({_span(ts, unit, per_user=per_user)}); "
                              "map its time column with data.timestamp_col, or cut at a position")
        return _to_epoch(value, setting)
    if not isinstance(value, numbers.Real):
        return _to_epoch(value, setting, unit)
    cut = _to_epoch(value, setting)
    lo, hi = int(ts.min()), int(ts.max())
    date = _yyyymmdd(value)
    if date is not None and not lo <= cut <= hi:
        # an error, not a guess: the same digits must not mean a date for one file and an epoch time for another
        as_date = date_in_unit(date, unit, setting)
        if lo <= as_date <= hi:
            raise ConfigError(
                f"{setting}={value!r} is ambiguous: read as a number in the data's unit it is {show_time(cut, unit)}, "
                f"outside the data, while read as a date (YYYYMMDD) it is {date:%Y-%m-%d}, inside it; "
                f"{_span(ts, unit, declared)}. Write {setting}={date:%Y-%m-%d} for the date (or the number "
                f"{as_date}, that date in {UNIT_NAMES[unit]})")
    given = unit_of(cut)
    if given != unit and not declared:
        also = f"; if you meant the date {date:%Y-%m-%d}, write it so" if date is not None else ""
        raise ConfigError(f"{setting}={value!r} reads as {UNIT_NAMES[given]}, but {_span(ts, unit)}: every row "
                          f"would land on one side of it. Give {setting} in {UNIT_NAMES[unit]} "
                          f"({convert(cut, given, unit)}) or as a date like 2024-05-01{also}")
    return cut


def _warn_empty_parts(valid: pd.DataFrame, test: pd.DataFrame, given: tuple[Any, Any], names: tuple[str, str],
                      span: str, refuse: tuple[bool, bool] = (False, False)) -> None:
    """Cut-offs beyond the data leave valid or test empty: say so here, not by a failure later in training.

    ``refuse`` (valid's, test's): that part empty is an error, not a warning; `data split` refuses before it
    writes, so a good earlier split in its --out is not replaced by empty valid/test files.
    """
    (v_name, t_name), (v_value, t_value) = names, given
    empty: list[tuple[bool, str]] = []
    if len(valid) == 0:
        empty.append((refuse[0], f"valid is empty: no timestamp is in [{v_name} {v_value}, {t_name} {t_value})"))
    if len(test) == 0:
        empty.append((refuse[1], f"test is empty: no timestamp is at or after {t_name} {t_value}"))
    refused = [message for wrong, message in empty if wrong]
    if refused:  # one line for both parts, so the user fixes both cut-offs at once
        raise DataError(f"{'; '.join(refused)}; {span}; choose cut-offs inside that range (nothing was written)")
    for _, message in empty:
        log.warning("%s; %s", message, span)


def _shown(value: Any, cut: int, unit: str | None) -> str:
    """A cut-off for a message: a number with the date it means in the data's unit (a date as given)."""
    return show_time(cut, unit) if unit is not None and isinstance(value, numbers.Real) else str(value)


def global_time_split(
    df: pd.DataFrame, valid_start: Any, test_start: Any, *, names: tuple[str, str] = ("valid_start", "test_start"),
    time_unit: str = "auto", refuse_empty: bool = False,
) -> Split:
    """One cut for everyone: ``t < valid_start`` train, ``valid_start <= t < test_start`` valid, rest test.

    Cut-offs are epoch times or dates (naive dates are UTC). The unit of the data's timestamps
    (seconds, milliseconds, microseconds or nanoseconds) is told from their magnitude
    (:mod:`twotower.data.timeunits`) and reported as ``time_unit``: dates are converted into it, and a
    number of another magnitude is refused, naming the setting (``names``: how the caller spells the
    two). ``time_unit`` (``data.time_unit``: ``s``, ``ms``, ``us`` or ``ns``) declares the unit instead, for
    data the magnitude misreads (times before 1973, seconds from another origin); numbers are then taken in it.
    An 8-digit number outside the data that read as YYYYMMDD is a date inside it is refused as ambiguous.
    Users/items first seen in valid/test are counted as cold in the report.
    ``refuse_empty``: a part the cut-offs ask for (valid when ``valid_start < test_start``; test always) that
    holds no row raises :class:`DataError` instead of a warning, so a caller about to write files writes none.
    """
    if time_unit not in TIME_UNITS:
        raise ConfigError(f"time_unit must be one of {', '.join(TIME_UNITS)}, got {time_unit!r}")
    for value, setting in zip((valid_start, test_start), names):
        _to_epoch(value, setting)  # a malformed cut-off is named before the data is looked at
    _check_df(df)
    s, _, _ = _sorted_positions(df)
    ts = s["timestamp"].to_numpy(dtype=np.int64)
    declared = time_unit != "auto"
    reported = report_unit(df, time_unit)  # the rule every split's report uses
    unit = None if reported == ROW_ORDER else reported
    per_user = str(df.attrs.get("report", {}).get("timestamp_source", "")).startswith("line order")
    v = _cutoff(valid_start, names[0], unit, ts, declared, per_user)
    t = _cutoff(test_start, names[1], unit, ts, declared, per_user)
    if v > t:
        raise ConfigError(f"{names[0]} ({valid_start!r}) must not be after {names[1]} ({test_start!r})")
    is_train = ts < v
    is_test = ts >= t
    is_valid = ~(is_train | is_test)
    if not is_train.any():
        raise DataError(f"the time split left the train part empty: no row is before {names[0]} "
                        f"{_shown(valid_start, v, unit)}; {_span(ts, unit, declared, per_user)}")
    _warn_empty_parts(s[is_valid], s[is_test], (_shown(valid_start, v, unit), _shown(test_start, t, unit)), names,
                      _span(ts, unit, declared, per_user), refuse=(refuse_empty and v < t, refuse_empty))
    return _finish("time", s[is_train], s[is_valid], s[is_test],
                   {"valid_start": v, "test_start": t, "time_unit": reported})


def random_split(df: pd.DataFrame, ratios: Sequence[float] = DataConfig.ratios,
                 seed: int = TrainConfig.seed) -> Split:
    """Shuffle interactions with ``seed`` and cut by ``ratios`` (per interaction, not per user).

    The defaults are the config's (``data.ratios``, ``train.seed``), so ``random_split(df)`` is the split
    `twotower data split --method random` and `train --data FILE data.split=random` make of the same rows.
    """
    r_train, r_valid, r_test = _check_ratios(ratios)
    seed = check_seed(seed)
    _check_df(df)
    # sorted first, then shuffled: the seed draws over the (user, time, item) order, so the same rows in another
    # file order (a re-export, `cat b a`) cut the same way; drawn over the file's order they cut differently
    s, _, _ = _sorted_positions(df)
    n = len(s)
    perm = np.random.default_rng(int(seed)).permutation(n)
    n_test = int(math.floor(n * r_test + _EPS))
    n_valid = int(math.floor(n * r_valid + _EPS))
    for name, share, rows in (("valid", r_valid, n_valid), ("test", r_test, n_test)):
        if share > 0 and rows == 0:  # the share rounds down to no row: said now, not by `train` reading an empty file
            log.warning("random split: %s is empty: its share %g of %d rows is less than one row; a larger share "
                        "(--ratios, data.ratios) or more data gives it rows", name, share, n)
    part = np.zeros(n, dtype=np.int8)  # 0 train, 1 valid, 2 test
    part[perm[:n_test]] = 2
    part[perm[n_test:n_test + n_valid]] = 1
    return _finish(
        "random", s[part == 0], s[part == 1], s[part == 2], {"ratios": [r_train, r_valid, r_test], "seed": int(seed)}
    )
