"""An embedding cache that cannot be written (a read-only HOME, a read-only mount) is skipped with a warning.

Before: `twotower train data.item_text='["title"]'` with a read-only HOME stopped with
"error: Permission denied: HOME/.cache" although the cache only saves the next run the encoding.
"""
from __future__ import annotations


from pathlib import Path

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


def _read_only_folder(monkeypatch, folder):  # noqa: ANN001, ANN202
    """``folder`` as a read-only mount: nothing under it is made or opened for writing (root ignores chmod, so the
    refusal is faked where the cache opens its files)."""
    import builtins
    import errno

    import twotower.text.cache as cache_module

    def no_write(path, mode="r", *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        if (folder == Path(path) or folder in Path(path).parents) and set(mode) & set("wax+"):
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return builtins.open(path, mode, *args, **kwargs)

    monkeypatch.setattr(cache_module, "open", no_write, raising=False)


def test_a_read_only_cache_is_read_not_encoded_again(tmp_path, monkeypatch, caplog):
    """Review: a pre-filled cache on a read-only mount was skipped whole, so every text was encoded again (135 s of
    a small search index); its embeddings are read now, and only the texts it lacks are encoded (and not kept)."""
    cache = tmp_path / "cache"
    first = cached_encode(CountingEncoder(), ["x", "y"], cache, max_length=8)
    (entry,) = [p for p in cache.iterdir() if p.is_dir()]
    (entry / ".lock").unlink()  # a lock file that cannot be made either: read without it
    before = sorted(p.name for p in entry.iterdir())
    _read_only_folder(monkeypatch, cache)

    enc = CountingEncoder()
    with caplog.at_level("WARNING", logger="twotower.text.cache"):
        np.testing.assert_array_equal(cached_encode(enc, ["y", "x"], cache, max_length=8), first[::-1])
    assert enc.encoded == [] and not caplog.records  # all of them there: nothing to say
    got = cached_encode(enc, ["x", "z"], cache, max_length=8)
    np.testing.assert_array_equal(got, CountingEncoder().encode(["x", "z"], max_length=8))
    assert enc.encoded == ["z"]
    assert sorted(p.name for p in entry.iterdir()) == before
    assert any("cannot be written (Read-only file system): 1 of 2 texts read from it" in r.getMessage()
               for r in caplog.records)


def test_search_commands_go_on_without_an_unwritable_default_cache(tmp_path, monkeypatch):
    """Review: `search index` with a read-only default cache folder (XDG_CACHE_HOME on a read-only mount) was
    refused naming --cache, a flag never given, though the fallback above lets the run go on; a --cache given is
    still checked."""
    import argparse
    import os

    import pytest

    from twotower.cli.search_cmd import _check_cache
    from twotower.errors import ConfigError
    from twotower.utils import atomic

    ro = tmp_path / "ro"
    ro.mkdir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(ro))
    real_access = os.access
    monkeypatch.setattr(atomic.os, "access", lambda p, mode: False if Path(p) == ro or ro in Path(p).parents
                        else real_access(p, mode))
    args = argparse.Namespace(cache=SearchConfig.cache_dir)
    _check_cache(args)
    assert args.cache == str(ro / "twotower" / "text-embeddings")
    with pytest.raises(ConfigError, match=rf"^--cache {ro / 'mine'}: cannot write into {ro} \(permission denied\)"):
        _check_cache(argparse.Namespace(cache=str(ro / "mine")))
