"""`evaluate --no-exclude-seen`: held-out repeats (a user re-buying an item) can be hit, for every model alike.

The standard protocol masks each user's train(+valid) items, so a repeat is never hit (27% of the test pairs of
an e-commerce log with re-purchases); `recommend` had --no-exclude-seen and HTTP exclude_seen, evaluate had none.
"""
from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pandas as pd
import pytest

from twotower.cli.main import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serving"))
from tiny_run import N_ITEMS, build_tiny_run  # noqa: E402


@pytest.fixture(scope="module")
def rebought(tmp_path_factory) -> tuple[Path, Path]:
    """The tiny run and a test file in which every user re-buys one of their training items."""
    folder = tmp_path_factory.mktemp("evaluate-repeats")
    run = build_tiny_run(folder)
    train = pd.read_csv(run / "data" / "train.csv", dtype=str)
    repeats = train.groupby("user_id", sort=False).head(1)
    path = folder / "rebuy.csv"
    repeats.to_csv(path, index=False)
    return run, path


def _rows(run: Path, test: Path, capsys, *extra: str) -> list[dict]:
    capsys.readouterr()
    assert main(["evaluate", "--run", str(run), "--test", str(test), "--baselines", "popularity",
                 "--ks", str(N_ITEMS - 1), "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_repeats_are_never_hit_by_default_and_the_warning_says_so(rebought, capsys, caplog):
    run, test = rebought
    with caplog.at_level(logging.WARNING):
        rows = _rows(run, test, capsys)
    assert [r["HitRate@59"] for r in rows] == [0.0, 0.0]
    assert all(r["exclude_seen"] is True for r in rows)
    assert "never hit" in caplog.text


def test_no_exclude_seen_ranks_the_whole_catalogue_for_every_model(rebought, capsys, caplog):
    run, test = rebought
    with caplog.at_level(logging.WARNING):
        rows = _rows(run, test, capsys, "--no-exclude-seen")
    # 59 of 60 items, nothing masked: each user's re-bought item is in nearly every list, for both models
    assert [r["model"] for r in rows] == ["two-tower", "popularity"]
    assert all(r["HitRate@59"] > 0.9 for r in rows), rows
    assert all(r["exclude_seen"] is False for r in rows)
    assert "never hit" not in caplog.text  # those pairs are reachable now


def test_the_table_footer_and_the_csv_record_name_the_protocol(rebought, capsys, tmp_path):
    run, test = rebought
    csv = tmp_path / "e.csv"
    assert main(["evaluate", "--run", str(run), "--test", str(test), "--baselines", "", "--ks", "5",
                 "--no-exclude-seen", "--csv", str(csv)]) == 0
    out = capsys.readouterr().out
    assert "seen items included (--no-exclude-seen" in out and "excluding each user's" not in out
    assert json.loads((tmp_path / "e.csv.json").read_text())["exclude_seen"] is False
    assert "exclude_seen" in csv.read_text().splitlines()[0]


def test_the_never_hit_warning_writes_both_counts_with_thousands_separators(tmp_path, capsys, caplog, monkeypatch):
    """It read "11247 of 42,114 test pairs are in the train + valid history ...": one count plain, one grouped."""
    import re

    import tiny_run

    monkeypatch.setattr(tiny_run, "N_USERS", 120)  # 120 users x 12 items: over 1,000 training pairs
    run = build_tiny_run(tmp_path)
    with caplog.at_level(logging.WARNING):
        assert main(["evaluate", "--run", str(run), "--test", str(run / "data" / "train.csv"), "--baselines", "",
                     "--ks", "5", "--json"]) == 0
    line = next(r.getMessage() for r in caplog.records if "never hit" in r.getMessage())
    assert re.match(r"\d{1,3}(,\d{3})+ of \d{1,3}(,\d{3})+ test pairs are in the train", line), line
