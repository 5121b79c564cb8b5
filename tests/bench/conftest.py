"""The benchmark scripts are not a package: the ``bench`` fixture imports one by name from ``bench/``."""
from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], Any]]:
    """``bench("ml1m")`` -> the freshly imported module; it (and ``_common``) is forgotten afterwards."""
    monkeypatch.syspath_prepend(str(BENCH))
    loaded: list[str] = []

    def load(name: str) -> Any:
        sys.modules.pop(name, None)
        loaded.append(name)
        return importlib.import_module(name)

    yield load
    for name in (*loaded, "ml1m", "_common"):  # movielens100k imports ml1m
        sys.modules.pop(name, None)
