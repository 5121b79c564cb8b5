"""An index whose meta.json names the run's model and whose ids are its item rows, but whose vectors are another
run's (the same settings trained with another seed), is refused by `recommend --index`, `similar` and `serve`,
naming the index and the command that rebuilds it.

Before, it was served without a word: the other run's index file swapped in with its checksum entry brought in
line, or another run's vectors saved from Python under this run's fingerprint, answered with other neighbours.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.serving.tiny_run import build_tiny_run
from twotower.cli.main import main
from twotower.errors import IntegrityError


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The tiny run, and the same settings trained with another seed."""
    from twotower.config import RunConfig, config_from_dict
    from twotower.pipeline.run import train_run
    from twotower.utils.atomic import read_json

    run = build_tiny_run(tmp_path_factory.mktemp("tiny_other_vectors"))
    cfg = config_from_dict(RunConfig, read_json(run / "config.json"))
    other = run.parent / "seed1"
    train_run(dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, seed=cfg.train.seed + 1)), other)
    np.random.seed(None)
    return run, other


def _swap_index_file(donor: Path, folder: Path) -> None:
    """``donor``'s index file into ``folder``, meta.json's checksums brought in line (as a hand-made fix would)."""
    from twotower.index.storage import _canonical

    shutil.copy(donor / "index.faiss", folder / "index.faiss")
    meta = json.loads((folder / "meta.json").read_text())
    meta["sha256"]["index.faiss"] = hashlib.sha256((folder / "index.faiss").read_bytes()).hexdigest()
    del meta["meta_sha256"]
    meta["meta_sha256"] = hashlib.sha256(_canonical(meta)).hexdigest()
    (folder / "meta.json").write_text(json.dumps(meta))


def test_an_index_file_of_another_seed_is_refused_everywhere(runs, tmp_path, capsys):
    from twotower.serving import RecommenderService

    run, other = runs
    for r, out in ((run, tmp_path / "idx"), (other, tmp_path / "other")):
        assert main(["-q", "index", "build", "--run", str(r), "--index", "hnsw", "--queries", "5",
                     "--out", str(out)]) == 0
    idx = tmp_path / "idx"
    assert main(["-q", "recommend", "--run", str(run), "--user", "u0", "--index", str(idx)]) == 0  # its own: served
    _swap_index_file(tmp_path / "other", idx)
    capsys.readouterr()
    rebuild = f"`twotower index build --run {run} --index hnsw --queries 5 --out {idx}` (or rank exactly with --exact)"
    for argv in (["recommend", "--run", str(run), "--user", "u0", "--index", str(idx)],
                 ["similar", "--run", str(run), "--item", "i0", "--index", str(idx)]):
        assert main(["-q", *argv]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {idx}: ") and "holds other vectors" in err and rebuild in err, err
    with pytest.raises(IntegrityError, match="holds other vectors"):
        RecommenderService.load(run, idx)
    assert main(["-q", "index", "info", "--run", str(run), "--index", str(idx)]) == 2


def test_another_seed_s_vectors_saved_under_the_run_s_fingerprint_are_refused(runs, tmp_path, capsys):
    """From Python, an approximate index (searched, not read back) of the wrong run's vectors."""
    from twotower.index import FaissIndex
    from twotower.pipeline.artifacts import TrainedRun

    run, other = runs
    fp = TrainedRun.load(run).fingerprint()
    vectors = TrainedRun.load(other).item_embeddings()
    FaissIndex("IVF4,PQ4x4").build(vectors, np.arange(len(vectors))).save(tmp_path / "py", model_fingerprint=fp)
    assert main(["-q", "recommend", "--run", str(run), "--user", "u0", "--index", str(tmp_path / "py")]) == 2
    err = capsys.readouterr().err
    assert "searched with their own vectors" in err and f"--out {tmp_path / 'py'}" in err, err
    # the run's own vectors in the same index type are served
    own = TrainedRun.load(run).item_embeddings()
    FaissIndex("IVF4,PQ4x4").build(own, np.arange(len(own))).save(tmp_path / "own", model_fingerprint=fp)
    assert main(["-q", "recommend", "--run", str(run), "--user", "u0", "--index", str(tmp_path / "own")]) == 0
