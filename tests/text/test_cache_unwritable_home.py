"""An embedding cache that cannot be written (a read-only HOME, a read-only mount) is skipped with a warning.

Before: `twotower train data.item_text='["title"]'` with a read-only HOME stopped with
"error: Permission denied: HOME/.cache" although the cache only saves the next run the encoding.
"""
from __future__ import annotations


import numpy as np

from twotower.config import SearchConfig
from twotower.text.cache import cached_encode

from tests.read_only_home import read_only_home
from tests.text.test_cache import CountingEncoder


def test_unwritable_default_cache_encodes_without_it(tmp_path, monkeypatch, caplog):
    home = tmp_path / "home"
    read_only_home(monkeypatch, home)

    enc = CountingEncoder()
    with caplog.at_level("WARNING", logger="twotower.text.cache"):
        got = cached_encode(enc, ["x", "y"], SearchConfig.cache_dir, max_length=8)
    np.testing.assert_array_equal(got, CountingEncoder().encode(["x", "y"], max_length=8))
    assert enc.encoded == ["x", "y"]
    assert any("cannot be written" in r.getMessage() and str(home) in r.getMessage() for r in caplog.records)
    assert not home.exists()
