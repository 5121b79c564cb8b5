"""`twotower data split` writes each row's own rating and timestamp, as the reader read them from --input, for every
--method: a reviewer read "data split writes rating 1.0". It does so only where the input has no rating column (the
1.0 the reader gives every row then, which is what reading the input itself gives `train`), with a warning when a
column such as `weight` looks like one. A guard: the split's files read back as the input reads."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from twotower.cli.main import main
from twotower.data.readers import read_interactions

KEY = ["user_id", "item_id"]
RATINGS = ["0.1", "2.5", "4", "1e-3", "0.3333333", "5"]


def _input(path, *, rating: bool = True):
    rows = [(f"u{u}", f"i{i}", RATINGS[(u + i) % len(RATINGS)], 1_600_000_000_000 + 86_400_123 * (8 * u + i))
            for u in range(6) for i in range(8) if (u * 7 + i) % 5]
    frame = pd.DataFrame(rows, columns=["user_id", "item_id", "rating", "timestamp"])
    (frame if rating else frame.drop(columns="rating")).to_csv(path, index=False)
    return path


def _read_back(out) -> pd.DataFrame:
    return pd.concat([read_interactions(out / f"{n}.csv") for n in ("train", "valid", "test")], ignore_index=True)


@pytest.mark.parametrize("method", [["--method", "temporal"], ["--method", "random"], ["--method", "leave_last"],
                                    ["--method", "time", "--valid-start", "2020-09-25", "--test-start",
                                     "2020-10-05"]])
@pytest.mark.parametrize("rating", [True, False])
def test_each_row_keeps_its_rating_and_timestamp(tmp_path, method, rating):
    src = _input(tmp_path / "in.csv", rating=rating)
    assert main(["-q", "data", "split", "--input", str(src), "--out", str(tmp_path / "split"), *method]) == 0
    want = read_interactions(src).sort_values(KEY, ignore_index=True)  # what `train --data in.csv` reads
    got = _read_back(tmp_path / "split").sort_values(KEY, ignore_index=True)
    pd.testing.assert_frame_equal(got[["user_id", "item_id", "timestamp", "rating"]],
                                  want[["user_id", "item_id", "timestamp", "rating"]], check_dtype=False)
    if rating:
        assert sorted(set(got["rating"])) == sorted(set(np.float32(RATINGS)))  # as float32, as the reader keeps them
    else:
        assert set(got["rating"]) == {1.0}  # the reader's 1.0 for every row of a file without ratings


@pytest.mark.parametrize("rating", [True, False])
def test_the_report_says_where_the_ratings_came_from(tmp_path, rating):
    """split_report.json recorded `"rating_col": "rating"` (the setting) for a file without that column, as if its
    ratings had been read, where every row was given 1.0."""
    import json

    src = _input(tmp_path / "in.csv", rating=rating)
    assert main(["-q", "data", "split", "--input", str(src), "--out", str(tmp_path / "split")]) == 0
    given = json.loads((tmp_path / "split" / "split_report.json").read_text())
    assert given["rating_source"] == ("column 'rating'" if rating else "constant 1.0 (no rating column)")
    assert given["timestamp_source"].startswith("column 'timestamp'")
