"""`index build` records what was asked for, not only what was chosen: `--index auto` and `--exact-budget-ms`.

tune.json's `spec` named the chosen kind (`ivf`), so an autotuned index read as one named on the command line, and
the exact-search budget that decided between exact search and an approximation was only inside the `reason` text.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.serving.tiny_run import build_tiny_run
from twotower.cli.main import main


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_run(tmp_path_factory.mktemp("index_requested"))


@pytest.mark.parametrize(("flags", "requested", "budget"), [
    (["--index", "auto", "--exact-budget-ms", "0"], "auto", 0.0),  # 0: never exact, so an approximation is chosen
    (["--index", "exact"], "exact", None),
])
def test_build_records_the_request_and_info_shows_it(run_dir, tmp_path, capsys, flags, requested, budget):
    out = tmp_path / "idx"
    assert main(["-q", "index", "build", "--run", str(run_dir), "--queries", "20", "--threads", "1", "--out",
                 str(out), *flags]) == 0
    tune = json.loads((out / "tune.json").read_text())
    assert tune["requested"] == requested and tune["exact_budget_ms"] == budget
    if requested == "auto":
        assert tune["spec"] != "auto"  # the chosen kind is kept where it was
    capsys.readouterr()
    assert main(["index", "info", "--run", str(run_dir), "--index", str(out), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["tune"]["requested"] == requested and info["tune"]["exact_budget_ms"] == budget
    assert main(["index", "info", "--run", str(run_dir), "--index", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"  requested: --index {requested}" in text
    assert ("fits 0 ms: --exact-budget-ms" in text) == (budget is not None)
