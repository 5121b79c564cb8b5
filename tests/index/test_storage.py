"""fingerprint_arrays and load_index dispatch."""
from __future__ import annotations

import json

import numpy as np
import pytest

from twotower.errors import ConfigError
from twotower.index import ExactIndex, FaissIndex, fingerprint_arrays, load_index


def test_fingerprint_changes_with_bytes_shape_dtype_and_config():
    a = np.arange(6, dtype=np.float32)
    base = fingerprint_arrays(a, config={"dim": 6, "name": "m"})
    assert base == fingerprint_arrays(a.copy(), config={"name": "m", "dim": 6})  # key order is irrelevant
    assert len(base) == 64
    b = a.copy()
    b[3] = np.nextafter(b[3], np.float32(10))  # one ulp
    assert fingerprint_arrays(b, config={"dim": 6, "name": "m"}) != base
    assert fingerprint_arrays(a.reshape(2, 3), config={"dim": 6, "name": "m"}) != base
    assert fingerprint_arrays(a.astype(np.float64), config={"dim": 6, "name": "m"}) != base
    assert fingerprint_arrays(a, config={"dim": 6, "name": "n"}) != base


def test_meta_json_describes_the_index(catalogue, tmp_path):
    x, ids, _ = catalogue
    FaissIndex("ivf", nprobe=8).build(x, ids).save(tmp_path / "i", model_fingerprint="fp")
    meta = json.loads((tmp_path / "i" / "meta.json").read_text())
    assert meta["backend"] == "faiss" and meta["factory"] == "IVF51,Flat" and meta["params"] == {"nprobe": 8}
    assert meta["dim"] == 16 and meta["count"] == 2000 and meta["metric"] == "ip"
    assert meta["model_fingerprint"] == "fp" and meta["created"]
    assert set(meta["sha256"]) == {"index.faiss", "ids.npy"} and meta["build_params"]["n_train"] == 2000
    ExactIndex().build(x, ids).save(tmp_path / "e")
    assert set(json.loads((tmp_path / "e" / "meta.json").read_text())["sha256"]) == {"vectors.npy", "ids.npy"}


def test_load_dispatches_and_class_load_checks_type(catalogue, tmp_path):
    x, ids, _ = catalogue
    ExactIndex().build(x, ids).save(tmp_path / "e")
    assert isinstance(load_index(tmp_path / "e"), ExactIndex)
    with pytest.raises(ConfigError, match="load_index"):
        FaissIndex.load(tmp_path / "e")
    with pytest.raises(ConfigError, match="empty"):
        ExactIndex().save(tmp_path / "empty")


def test_saving_over_a_folder_that_is_not_an_index_is_refused_and_leaves_it_intact(tmp_path):
    # the folder is replaced whole: index.save(run_dir) (or `index build --out RUN`) used to delete the run
    index = ExactIndex().build(np.eye(4, dtype=np.float32), np.arange(4))
    run = tmp_path / "run"
    run.mkdir()
    (run / "model.safetensors").write_bytes(b"weights")
    with pytest.raises(ConfigError, match="is a non-empty folder that is not an index; saving an index replaces"):
        index.save(run)
    assert (run / "model.safetensors").read_bytes() == b"weights"
    table = tmp_path / "train.csv"
    table.write_text("user_id,item_id\n")
    with pytest.raises(ConfigError, match="train.csv is a file"):
        index.save(table)
    assert table.read_text() == "user_id,item_id\n"
    # a new folder, an empty one and an earlier index are still written (the last replaced)
    (tmp_path / "empty").mkdir()
    for target in (tmp_path / "new", tmp_path / "empty", tmp_path / "new"):
        index.save(target)
        assert len(load_index(target)) == 4


def test_a_search_index_folder_is_not_taken_for_a_vector_index(tmp_path):
    # a search index keeps a meta.json too: its presence alone must not let the vector index replace it
    index = ExactIndex().build(np.eye(4, dtype=np.float32), np.arange(4))
    search = tmp_path / "search"
    search.mkdir()
    (search / "meta.json").write_text('{"kind": "search-index", "docs": 3}')
    with pytest.raises(ConfigError, match="not an index"):
        index.save(search)
    assert (search / "meta.json").read_text() == '{"kind": "search-index", "docs": 3}'


@pytest.mark.parametrize("backend", ["exact", "faiss"])
def test_a_file_missing_from_the_checksum_table_is_refused_before_it_is_read(catalogue, tmp_path, backend):
    # meta.json checks itself only: one rewritten without index.faiss's (or vectors.npy's) entry, its meta_sha256
    # recomputed, let any file be read in its place unchecked
    import hashlib

    from twotower.errors import IntegrityError
    from twotower.index.storage import _canonical

    x, ids, _ = catalogue
    index = ExactIndex() if backend == "exact" else FaissIndex("flat")
    index.build(x, ids).save(tmp_path / "i")
    data_file = "vectors.npy" if backend == "exact" else "index.faiss"
    ExactIndex().build(x[::-1].copy(), ids).save(tmp_path / "other")  # the replacement
    meta_path = tmp_path / "i" / "meta.json"
    meta = json.loads(meta_path.read_text())
    del meta["sha256"][data_file], meta["meta_sha256"]
    meta["meta_sha256"] = hashlib.sha256(_canonical(meta)).hexdigest()
    meta_path.write_text(json.dumps(meta))
    if backend == "exact":
        (tmp_path / "i" / data_file).write_bytes((tmp_path / "other" / data_file).read_bytes())
    with pytest.raises(IntegrityError, match=rf"{data_file}: not listed in the checksums of .*meta.json, so it "
                                             "cannot be verified before it is read; rebuild"):
        load_index(tmp_path / "i")
    del meta["sha256"], meta["meta_sha256"]  # no table at all: a KeyError before
    meta["meta_sha256"] = hashlib.sha256(_canonical(meta)).hexdigest()
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(IntegrityError, match="not listed in the checksums"):
        load_index(tmp_path / "i")
