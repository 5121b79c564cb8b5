"""From Python, a stale or damaged index names the Python way around it, ``exact=True``: tt.recommend and
tt.similar said "rank exactly with --exact", a flag of the command line."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import twotower as tt
from tests.serving.tiny_run import build_tiny_run
from twotower.cli.main import main
from twotower.errors import IntegrityError


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_run(tmp_path_factory.mktemp("tiny_exact_hint"))


@pytest.fixture(params=["stale", "damaged"])
def bad_index_run(request, run_dir, tmp_path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    if request.param == "stale":  # an index of other weights in RUN/index
        tt.ExactIndex().build(np.eye(16, dtype=np.float32), np.arange(16)).save(run / "index", model_fingerprint="x")
    else:
        assert main(["-q", "index", "build", "--run", str(run), "--index", "flat", "--queries", "5"]) == 0
        damaged = run / "index" / "index.faiss"
        damaged.write_bytes(damaged.read_bytes()[:-8])
    return run


@pytest.mark.parametrize("call", ["recommend", "similar"])
def test_python_is_told_exact_true(bad_index_run, call, capsys):
    run = tt.TrainedRun.load(bad_index_run)
    with pytest.raises(IntegrityError) as e:
        if call == "recommend":
            tt.recommend(run, ["u0"])
        else:
            tt.similar(run, ["i0"])
    assert str(e.value).endswith("(or rank exactly with exact=True)"), str(e.value)
    assert "--exact" not in str(e.value)
    assert (tt.recommend(run, ["u0"], exact=True) if call == "recommend" else tt.similar(run, ["i0"], exact=True))
    # the command line keeps its flag
    assert main(["-q", call, "--run", str(bad_index_run), "--user" if call == "recommend" else "--item",
                 "u0" if call == "recommend" else "i0"]) == 2
    assert capsys.readouterr().err.endswith("(or rank exactly with --exact)\n")
