"""tt.recommend and tt.similar say which index ranked, as `twotower recommend` / `similar` print it on stderr and
`twotower serve` logs it: they ranked through an approximate RUN/index without a word, even at INFO, so a script
could not tell an ANN list from an exact one."""
from __future__ import annotations

import shutil

import pytest

from twotower.cli.main import main


def test_python_names_the_index_the_cli_names(run_dir, tmp_path, capsys, caplog) -> None:
    pytest.importorskip("faiss")
    import twotower as tt

    run_path = tmp_path / "run"
    shutil.copytree(run_dir, run_path, ignore=shutil.ignore_patterns("index"))
    assert main(["-q", "index", "build", "--run", str(run_path), "--index", "IVF2,Flat", "--queries", "10"]) == 0
    capsys.readouterr()
    assert main(["recommend", "--run", str(run_path), "--user", "u1", "--k", "5", "--json"]) == 0
    cli_line = next(line for line in capsys.readouterr().err.splitlines() if line.startswith("ranking with "))
    assert "approximate IVF2,Flat" in cli_line
    run = tt.TrainedRun.load(run_path)
    for call in (lambda: tt.recommend(run, ["u1"], k=5), lambda: tt.similar(run, ["i1"], k=5)):
        caplog.clear()
        with caplog.at_level("INFO", logger="twotower"):
            call()
        # the same sentence, the way to rank exactly named in each surface's words (--exact / exact=True)
        assert cli_line.replace("--exact", "exact=True") in [r.getMessage() for r in caplog.records]
    caplog.clear()
    with caplog.at_level("INFO", logger="twotower"):
        tt.recommend(run, ["u1"], k=5, exact=True)
    assert any(r.getMessage().startswith("ranking with exact search") for r in caplog.records)
