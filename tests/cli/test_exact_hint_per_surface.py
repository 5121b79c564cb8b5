"""The sentence naming the index a list was ranked with says how to rank exactly in each surface's own words: the
command line's ``ranking with index ...`` line and serve's log line said "--exact (from Python: exact=True) ranks the
whole catalogue exactly", a Python hint that is noise on the command line."""
from __future__ import annotations

import logging
from pathlib import Path

import pytest

import twotower as tt
from tests.serving.tiny_run import build_tiny_run
from twotower.cli.main import main


@pytest.fixture(scope="module")
def hnsw_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = build_tiny_run(tmp_path_factory.mktemp("tiny_exact_words"))
    assert main(["-q", "index", "build", "--run", str(run), "--index", "hnsw", "--ef-search", "16"]) == 0
    return run


def test_each_surface_names_its_own_way_to_rank_exactly(hnsw_run, capsys, caplog) -> None:
    from twotower.serving import RecommenderService

    capsys.readouterr()
    assert main(["recommend", "--run", str(hnsw_run), "--user", "u0", "--k", "3"]) == 0
    line = next(x for x in capsys.readouterr().err.splitlines() if x.startswith("ranking with index"))
    assert line.endswith("(efSearch=16); --exact ranks the whole catalogue exactly"), line
    assert "exact=True" not in line and "Python" not in line
    with caplog.at_level(logging.INFO, logger="twotower"):
        tt.recommend(tt.TrainedRun.load(hnsw_run), ["u0"], k=3)
    said = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("ranking with index"))
    assert said.endswith("; exact=True ranks the whole catalogue exactly") and "--exact" not in said, said
    # serve's words (the flags `twotower serve` passes), and a Python caller's
    served = RecommenderService.load(hnsw_run, exact_flag="--exact", allow_flag="--allow-low-recall")
    assert served.index_description.endswith("; --exact ranks the whole catalogue exactly")
    assert "exact=True" not in served.index_description
    assert RecommenderService.load(hnsw_run).index_description.endswith("; exact=True ranks the whole catalogue exactly")
