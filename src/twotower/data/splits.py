"""Train/valid/test splits of canonical interaction frames, with reports.

Every split returns a :class:`Split` whose frames keep the input columns,
ordered by (user, timestamp, item). ``report`` counts rows, users and items
per part, cold users/items (in valid/test but not in train) and the users a
rule kept entirely in train.
"""
from __future__ import annotations

import logging
import math
import numbers
import re
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pandas as pd

from twotower.errors import ConfigError, DataError

__all__ = [
    "Split",
    "temporal_split",
    "leave_last_n_out",
    "global_time_split",
    "random_split",
    "split_report",
]

log = logging.getLogger(__name__)

_INT_RE = re.compile(r"^[+-]?\d+$")
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
    """An int64 key ordering item ids numerically when all are integers, else as text."""
    values = items.astype(str).to_numpy(dtype=object)
    uniq = pd.unique(values)
    if all(_INT_RE.match(v) for v in uniq):
        try:
            return np.array([int(v) for v in values], dtype=np.int64)
        except OverflowError:
            pass
    codes, _ = pd.factorize(pd.Series(values), sort=True)
    return codes.astype(np.int64)


def _sorted_positions(df: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """Sort by (user, timestamp, item); return the frame, each row's position in its user and the user's count."""
    user_codes, _ = pd.factorize(df["user_id"].astype(str), sort=True)
    order = np.lexsort(
        (
            np.arange(len(df)),
            item_order_key(df["item_id"]),
            df["timestamp"].to_numpy(dtype=np.int64),
            user_codes,
        )
    )
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
    users = {k: set(v["user_id"].astype(str)) for k, v in parts.items()}
    items = {k: set(v["item_id"].astype(str)) for k, v in parts.items()}
    for k, v in parts.items():
        rep[f"{k}_rows"] = int(len(v))
        rep[f"{k}_users"] = len(users[k])
        rep[f"{k}_items"] = len(items[k])
    for k in ("valid", "test"):
        rep[f"cold_users_{k}"] = len(users[k] - users["train"])
        rep[f"cold_items_{k}"] = len(items[k] - items["train"])
    rep["users_with_empty_train"] = len((users["valid"] | users["test"]) - users["train"])
    return rep


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


def temporal_split(df: pd.DataFrame, ratios: Sequence[float] = (0.8, 0.1, 0.1)) -> Split:
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
    return _finish(
        "temporal",
        s[is_train], s[is_valid], s[is_test],
        {"ratios": [r_train, r_valid, r_test], "users_train_only": short_users, "min_interactions": 3},
    )


def leave_last_n_out(df: pd.DataFrame, n: int = 1) -> Split:
    """Per user, the last ``n`` rows to test and the ``n`` before to valid.

    Users with fewer than ``2n + 1`` rows stay in train (``users_train_only``).
    """
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise ConfigError(f"n (rows held out per user) must be an integer >= 1, got {n!r}")
    n = int(n)
    _check_df(df)
    s, pos, m = _sorted_positions(df)
    big = m >= 2 * n + 1
    is_test = big & (pos >= m - n)
    is_valid = big & ~is_test & (pos >= m - 2 * n)
    is_train = ~(is_test | is_valid)
    short_users = int(s.loc[~big, "user_id"].nunique())
    return _finish(
        "leave_last_n_out",
        s[is_train], s[is_valid], s[is_test],
        {"n": n, "users_train_only": short_users, "min_interactions": 2 * n + 1},
    )


def _to_epoch(value: Any, setting: str) -> int:
    if isinstance(value, bool):
        raise ConfigError(f"{setting} must be epoch seconds or a date, got {value!r}")
    if isinstance(value, numbers.Real):
        if not math.isfinite(float(value)):
            raise ConfigError(f"{setting} must be finite, got {value!r}")
        return int(math.floor(float(value)))
    try:
        ts = pd.Timestamp(value)
    except (ValueError, TypeError) as e:
        raise ConfigError(f"{setting} must be epoch seconds or an ISO date like 2024-05-01, got {value!r}") from e
    if ts is pd.NaT:
        raise ConfigError(f"{setting} must be a date, got {value!r}")
    if ts.tzinfo is None:
        ts = ts.tz_localize("UTC")
    return int((ts - pd.Timestamp("1970-01-01", tz="UTC")) // pd.Timedelta(seconds=1))


def global_time_split(df: pd.DataFrame, valid_start: Any, test_start: Any) -> Split:
    """One cut for everyone: ``t < valid_start`` train, ``valid_start <= t < test_start`` valid, rest test.

    Cut-offs are epoch seconds or dates (naive dates are UTC). Users/items first
    seen in valid/test are counted as cold in the report.
    """
    v = _to_epoch(valid_start, "valid_start")
    t = _to_epoch(test_start, "test_start")
    if v > t:
        raise ConfigError(f"valid_start ({valid_start!r}) must not be after test_start ({test_start!r})")
    _check_df(df)
    s, _, _ = _sorted_positions(df)
    ts = s["timestamp"].to_numpy(dtype=np.int64)
    is_train = ts < v
    is_test = ts >= t
    is_valid = ~(is_train | is_test)
    return _finish("global_time", s[is_train], s[is_valid], s[is_test], {"valid_start": v, "test_start": t})


def random_split(df: pd.DataFrame, ratios: Sequence[float] = (0.8, 0.1, 0.1), seed: int = 0) -> Split:
    """Shuffle interactions with ``seed`` and cut by ``ratios`` (per interaction, not per user)."""
    r_train, r_valid, r_test = _check_ratios(ratios)
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise ConfigError(f"seed must be an integer, got {seed!r}")
    _check_df(df)
    n = len(df)
    perm = np.random.default_rng(int(seed)).permutation(n)
    n_test = int(math.floor(n * r_test + _EPS))
    n_valid = int(math.floor(n * r_valid + _EPS))
    part = np.zeros(n, dtype=np.int8)  # 0 train, 1 valid, 2 test
    part[perm[:n_test]] = 2
    part[perm[n_test:n_test + n_valid]] = 1
    s, _, _ = _sorted_positions(df.assign(_part=part))
    p = s.pop("_part").to_numpy()
    return _finish(
        "random", s[p == 0], s[p == 1], s[p == 2], {"ratios": [r_train, r_valid, r_test], "seed": int(seed)}
    )
