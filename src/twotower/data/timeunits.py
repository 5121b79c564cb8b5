"""The unit of epoch timestamps (seconds, milliseconds, microseconds, nanoseconds), told from their magnitude.

Timestamps are kept in the unit the data has (a split writes them back unchanged, and runs saved from
epoch-seconds data stay as they were); what has to agree with them — a date cut-off, an ISO date beside
numbers in one column, a date shown in a message — is converted into that unit instead.
"""
from __future__ import annotations

from typing import Any

import logging

import numpy as np
import pandas as pd

from twotower.errors import ConfigError

__all__ = ["UNIT_NAMES", "ROW_ORDER", "has_times", "unit_of", "units_of", "detect_unit", "report_unit", "dates_in_unit", "date_in_unit",
           "finest_unit", "finer_for_dates", "align_date_units", "convert", "show_time", "date_text", "unit_words",
           "BAND_START_S"]

#: upper bound of |t| for each unit but the last. The bands cannot be mistaken for one another in realistic
#: data: epoch seconds reach 1e11 only in the year 5138, while epoch milliseconds (microseconds, nanoseconds)
#: stay below 1e11 (1e14, 1e17) only before 1973-03-03 -- each bound is 1e8 s after 1970 in the next unit.
#: So any time between March 1973 and the year 5138 is read in its own unit; nanoseconds end at 2262 (int64).
_BOUNDS = (("s", 1e11), ("ms", 1e14), ("us", 1e17))
#: 1973-03-03 in epoch seconds: below it (in the column's unit) a time's size reads as the next coarser unit's
BAND_START_S = 100_000_000
UNIT_NAMES = {"s": "epoch seconds", "ms": "epoch milliseconds", "us": "epoch microseconds",
              "ns": "epoch nanoseconds"}
_PER_SECOND = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}
_EPOCH = pd.Timestamp("1970-01-01", tz="UTC")
_LIMIT = 2.0**62  # |t| of an epoch time kept in int64 (the readers refuse larger numbers)

log = logging.getLogger("twotower.data.readers")  # the readers' logger: what users filter on stays the same


def has_times(df: pd.DataFrame) -> bool:
    """Whether a read frame's ``timestamp`` column holds times, not the row or line order the reader made up."""
    source = str(df.attrs.get("report", {}).get("timestamp_source", ""))
    return not source.startswith(("row order", "line order"))


def unit_of(value: float) -> str:
    """The unit one epoch time of that magnitude is in (see ``_BOUNDS``)."""
    size = abs(float(value))
    for unit, bound in _BOUNDS:
        if size < bound:
            return unit
    return "ns"


def units_of(values: np.ndarray) -> np.ndarray:
    """:func:`unit_of` of each value (an array of unit names), for a whole column at once."""
    bounds = np.array([bound for _, bound in _BOUNDS])
    names = np.array([unit for unit, _ in _BOUNDS] + ["ns"], dtype=object)
    return names[np.searchsorted(bounds, np.abs(np.asarray(values, dtype=np.float64)), side="right")]


def detect_unit(timestamps: np.ndarray) -> str:
    """The unit of a timestamp column, from its median magnitude: a few zeros or sentinels do not sway it."""
    values = np.asarray(timestamps)
    if values.size == 0:
        return "s"
    return unit_of(float(np.median(np.abs(values.astype(np.float64)))))


#: the "unit" of a table whose reader numbered the rows instead of reading times
ROW_ORDER = "row order"


def report_unit(df: pd.DataFrame, time_unit: str = "auto") -> str:
    """What a split report names as ``time_unit``: the declared unit (``data.time_unit``), the one told from the
    ``timestamp`` column's magnitude, or ``"row order"`` when the reader numbered the rows instead of reading times."""
    if not has_times(df):
        return ROW_ORDER
    return time_unit if time_unit != "auto" else detect_unit(df["timestamp"].to_numpy(dtype=np.int64))


def dates_in_unit(dates: pd.Series, unit: str) -> np.ndarray:
    """UTC datetimes as int64 epoch times in ``unit``, floored (1.5 s is 1 s)."""
    return ((dates - _EPOCH) // pd.Timedelta(1, unit=unit)).to_numpy(dtype=np.int64)


def date_in_unit(value: Any, unit: str, setting: str) -> int:
    """A date (``2024-05-01``, ``2024-05-01T12:30:00+02:00``, a datetime; naive means UTC) as epoch time in ``unit``."""
    try:
        ts = pd.Timestamp(value)
    except (ValueError, TypeError, OverflowError) as e:
        raise ConfigError(f"{setting} must be an epoch time or an ISO date like 2024-05-01, got {value!r}") from e
    if ts is pd.NaT:
        raise ConfigError(f"{setting} must be a date, got {value!r}")
    if ts.tzinfo is None:
        ts = ts.tz_localize("UTC")
    return int((ts - _EPOCH) // pd.Timedelta(1, unit=unit))


def finest_unit(dates: pd.Series) -> str:
    """The unit a column of datetimes is stored in when no unit is set: epoch seconds when every time is a whole
    second (as it always was), else the coarsest of milliseconds, microseconds and nanoseconds that holds every
    time exactly -- floored to seconds, clicks a few hundred milliseconds apart tied and were then put in item-id
    order, which is the wrong order for a sequence model and the wrong "last" item for a leave-last split.

    A finer unit is used only where the stored numbers are read back in it (``detect_unit``): epoch milliseconds
    before March 1973 would be taken for seconds, so such data stays in seconds.
    """
    times = pd.to_datetime(dates.dropna(), utc=True)
    if times.empty:
        return "s"
    micro = times.dt.microsecond.to_numpy()
    if (times.dt.nanosecond.to_numpy() != 0).any():
        unit = "ns"
    elif (micro % 1000 != 0).any():
        unit = "us"
    elif (micro != 0).any():
        unit = "ms"
    else:
        return "s"
    return unit if detect_unit(dates_in_unit(times, unit)) == unit else "s"


def _movable(numbers: np.ndarray, unit: str, finer: str) -> bool:
    """Whether epoch ``numbers`` in ``unit`` can be stored in the ``finer`` unit: multiplied, they fit int64 and
    still read as ``finer`` from their size (:func:`detect_unit`; seconds before March 1973 would read as seconds)."""
    factor = _PER_SECOND[finer] // _PER_SECOND[unit]
    if numbers.size == 0:
        return True
    if float(np.abs(numbers).max()) * factor >= _LIMIT:
        return False
    return detect_unit(numbers * factor) == finer


def finer_for_dates(numbers: np.ndarray, unit: str, dates_unit: str) -> str:
    """The unit of epoch ``numbers`` in ``unit`` stored beside dates that need ``dates_unit`` (their sub-second
    parts, :func:`finest_unit`): the finer of the two, where the numbers can be moved to it exactly (a whole
    multiple); else their own unit, the dates' sub-second parts then floored. Milliseconds in ISO dates beside
    epoch seconds were floored to seconds in silence, clicks within a second tied and put in item-id order."""
    if _PER_SECOND[dates_unit] <= _PER_SECOND[unit] or not _movable(numbers, unit, dates_unit):
        return unit
    return dates_unit


def unit_words(df: pd.DataFrame, unit: str) -> str:
    """How a refusal of files in different units names one file's unit: a file of dates alone says so (its
    "epoch milliseconds" are ours, not told from the size of numbers it does not have)."""
    if "dates_unit" in df.attrs.get("report", {}):
        return f"ISO dates, stored as {UNIT_NAMES[unit]}"
    return UNIT_NAMES[unit]


def align_date_units(frames: list[pd.DataFrame | None]) -> list[pd.DataFrame | None]:
    """Read frames that go together (train / valid / test, the files of ``--history-from``), put on the finest
    unit their dates need.

    :func:`finest_unit` decides per file, so a valid file whose times happen to be whole seconds beside a train
    file with milliseconds would otherwise sort every valid item decades before the training ones. Frames read
    from dates alone (``report["dates_unit"]``) are scaled to it; a file of numbers is moved to a finer unit only
    where dates need it (an ISO valid file with milliseconds beside a train file of epoch seconds was refused as
    "epoch milliseconds, told from their size"), and only exactly. Numbers of two units among the files are left
    as they are: the callers refuse them, as the README says (which unit the numbers mean is not ours to guess).
    """
    dated = [f is not None and "dates_unit" in f.attrs.get("report", {}) for f in frames]
    units = {f.attrs["report"]["dates_unit"] for f, d in zip(frames, dated) if d}
    if not units:
        return frames
    target = max(units, key=_PER_SECOND.__getitem__)
    numbers = {i: detect_unit(f["timestamp"].to_numpy()) for i, (f, d) in enumerate(zip(frames, dated))
               if f is not None and not d and has_times(f)}
    moved: dict[int, str] = {}  # the files of numbers scaled, by their unit
    if len(set(numbers.values())) == 1:  # numbers of two units are the caller's to refuse
        unit = next(iter(numbers.values()))
        if _PER_SECOND[unit] >= _PER_SECOND[target]:
            target = unit  # dates join the numbers, as in one column (dates beside epoch milliseconds)
        elif all(finer_for_dates(frames[i]["timestamp"].to_numpy(np.int64), unit, target) == target for i in numbers):
            moved = numbers
    out: list[pd.DataFrame | None] = []
    for i, (f, d) in enumerate(zip(frames, dated)):
        unit = f.attrs["report"]["dates_unit"] if d else moved.get(i)
        if f is None or unit is None or unit == target:
            out.append(f)
            continue
        scaled = f.assign(timestamp=f["timestamp"].to_numpy(np.int64) * (_PER_SECOND[target] // _PER_SECOND[unit]))
        scaled.attrs["report"] = {**f.attrs["report"], **({"dates_unit": target} if d else {})}
        if not d:
            log.info("%s: its epoch %s are stored as %s, the unit the sub-second parts of the dates read with it "
                     "need", f.attrs["report"].get("file", f"file {i + 1}"),
                     UNIT_NAMES[unit].split()[-1], UNIT_NAMES[target])
        out.append(scaled)
    return out


def convert(value: int, from_unit: str, to_unit: str) -> int:
    """An epoch time in another unit (floored), e.g. for the cut-off a message suggests."""
    return int(value) * _PER_SECOND[to_unit] // _PER_SECOND[from_unit]


def show_time(value: int, unit: str) -> str:
    """``1714521600000 (2024-05-01 00:00:00 UTC)``: the number as stored and the date it means in ``unit``."""
    try:
        date = pd.Timestamp(int(value), unit=unit, tz="UTC")
        # strftime refuses a year before 1 (-62135596800000008 ns) with NotImplementedError
        return f"{int(value)} ({date:%Y-%m-%d %H:%M:%S} UTC)"
    except (ValueError, OverflowError, NotImplementedError):  # beyond pandas' years 1677-2262, or Python's 1-9999
        return str(int(value))


def date_text(value: int, unit: str) -> str:
    """``2024-05-01 00:00:00 UTC``: the date an epoch time means in ``unit`` (the number itself past pandas' years)."""
    shown = show_time(value, unit)
    return shown.split(" (", 1)[1].rstrip(")") if " (" in shown else shown
