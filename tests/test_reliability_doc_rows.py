"""docs/reliability.md's table of interruptions cites every SIGTERM regression test, and names every command
whose SIGTERM line it describes.

A docs walkthrough: `index build`'s and `recommend --users --out` / `similar --items --out`'s SIGTERM handling
(tests/cli/test_index_build_sigterm.py, tests/cli/test_bulk_out_sigterm.py) had no row, and `similar --out` was left
out of the commands the evaluate/export row compares itself with, so the page read as if those writers still ended
on the spot.
"""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "reliability.md").read_text(encoding="utf-8")


def test_every_sigterm_regression_test_is_cited():
    tests = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("test_*sigterm*.py"))
    assert tests  # the glob still finds them
    assert [t for t in tests if f"`{t}" not in DOC] == []


def test_the_writers_named_as_stopping_like_train_include_similar():
    assert "`recommend --out` and `similar --out`" in DOC
