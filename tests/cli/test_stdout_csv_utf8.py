"""`recommend --users all --out -` under an ASCII stdout (LC_ALL=C with PYTHONUTF8=0).

Before: the CSV held ``zo\\xe9`` for the user ``zoé``, an id that no longer joins with the data it came from. The
CSV on stdout is now UTF-8, as the file of ``--out recs.csv`` is, whatever the locale.
"""
from __future__ import annotations

import io
import sys
from pathlib import Path

import pandas as pd
import pytest

from twotower.cli.main import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serving"))
from tiny_run import build_tiny_run  # noqa: E402


def test_csv_on_an_ascii_stdout_holds_the_ids_in_utf8(tmp_path):
    run = build_tiny_run(tmp_path, rename_users={"u1": "zoé", "u2": "東京"})
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="ascii", errors="strict", write_through=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys, "stdout", stream)
        assert main(["recommend", "--run", str(run), "--users", "all", "--k", "2", "--out", "-", "--threads", "1"]) == 0
    stream.detach()
    data = raw.getvalue()
    assert b"\\x" not in data and b"\\u" not in data
    users = set(pd.read_csv(io.BytesIO(data), dtype=str, encoding="utf-8")["user_id"])
    assert {"zoé", "東京", "u0"} <= users
