"""What the chunked-read tests share: a small interactions frame, and every file read as large, a few rows a chunk."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd
import pytest

import twotower.data.readers as readers
from twotower.data.readers import read_interactions
from twotower.errors import DataError

T = TypeVar("T")


def interactions_frame(n: int) -> pd.DataFrame:
    """``n`` good interactions of 7 users, one item each, epoch seconds 1.6e9 onwards, rating 4.0."""
    return pd.DataFrame({"user_id": [f"u{i % 7}" for i in range(n)], "item_id": [f"i{i}" for i in range(n)],
                         "timestamp": 1_600_000_000 + np.arange(n), "rating": np.full(n, 4.0)})


def read_every_file_in_chunks(monkeypatch: pytest.MonkeyPatch, rows: int = 5) -> None:
    """Every file counts as large (no head check first) and is read ``rows`` rows, lines or records at a time."""
    monkeypatch.setattr(readers, "HEAD_CHECK_BYTES", 0)
    monkeypatch.setattr(readers, "CHUNK_ROWS", rows)


def refusal(path: Path, **kw: Any) -> DataError:
    """The DataError ``read_interactions(path, **kw)`` raises (the test fails when it reads the file)."""
    with pytest.raises(DataError) as e:
        read_interactions(path, **kw)
    return e.value


def read_whole(monkeypatch: pytest.MonkeyPatch, fn: Callable[[], T]) -> T:
    """``fn()`` with every file read whole, as a small file is: what a chunked read must agree with."""
    with monkeypatch.context() as m:
        m.setattr(readers, "HEAD_CHECK_BYTES", 1 << 60)
        return fn()
