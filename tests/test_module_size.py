"""Issue 11's target: the training and loss modules stay small enough to read whole (no file over 300 lines)."""
from __future__ import annotations

from pathlib import Path

import pytest

import twotower

MAX_LINES = 300
PACKAGE = Path(twotower.__file__).parent


@pytest.mark.parametrize("folder", ["training", "losses"])
def test_no_module_in_the_folder_is_over_300_lines(folder: str) -> None:
    sizes = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in sorted((PACKAGE / folder).glob("*.py"))}
    assert sizes, f"no modules found under {PACKAGE / folder}"
    over = {name: n for name, n in sizes.items() if n > MAX_LINES}
    assert not over, f"{folder}/ modules over {MAX_LINES} lines (split them by what they do): {over}"
