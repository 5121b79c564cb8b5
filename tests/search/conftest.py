"""Fixtures for the search tests."""
from __future__ import annotations

from pathlib import Path

import pytest
from search_data import write_beir


@pytest.fixture
def beir_dir(tmp_path: Path) -> Path:
    return write_beir(tmp_path / "beir")
