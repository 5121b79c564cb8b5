"""XDG_CACHE_HOME is where twotower caches, when set: the text-embedding cache, the ONNX exports and MovieLens.

Before: every cache went to ~/.cache/twotower whatever XDG_CACHE_HOME said (a HOME quota, a shared HOME, a
cluster whose cache folder is elsewhere); the TWOTOWER_* variables of each cache still come first.
"""
from __future__ import annotations

from pathlib import Path

from twotower.config import SearchConfig
from twotower.data.movielens import default_movielens_dir
from twotower.text.cache import cached_encode
from twotower.text.onnx_backend import onnx_cache_dir

from tests.text.test_cache import CountingEncoder


def test_caches_follow_xdg_cache_home(tmp_path, monkeypatch):
    home, xdg = tmp_path / "home", tmp_path / "xdg"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(xdg))
    monkeypatch.delenv("TWOTOWER_ONNX_CACHE", raising=False)
    monkeypatch.delenv("TWOTOWER_DATA", raising=False)
    assert onnx_cache_dir() == xdg / "twotower" / "onnx"
    assert default_movielens_dir() == xdg / "twotower" / "datasets" / "movielens-100k"
    cached_encode(CountingEncoder(), ["x"], SearchConfig.cache_dir, max_length=8)
    assert any((xdg / "twotower" / "text-embeddings").iterdir())
    assert not home.exists()


def test_twotower_variables_and_relative_xdg(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("TWOTOWER_ONNX_CACHE", str(tmp_path / "onnx"))
    monkeypatch.setenv("TWOTOWER_DATA", str(tmp_path / "data"))
    assert onnx_cache_dir() == tmp_path / "onnx"
    assert default_movielens_dir() == tmp_path / "data" / "movielens-100k"
    monkeypatch.delenv("TWOTOWER_ONNX_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # ignored, as the XDG rules say
    assert onnx_cache_dir() == Path(tmp_path / "home" / ".cache" / "twotower" / "onnx")
