"""`recommend --users ... --out` and `similar --items ... --out` records say the `--filter-exact-max` used.

It decides how a filter is ranked through an approximate index (exactly over the matching items, or a wider index
search), so two files made with different values could hold different lists; their records were the same.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.serving.tiny_run import build_tiny_run
from twotower.cli.main import main
from twotower.serving.settings import ServiceSettings


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_run(tmp_path_factory.mktemp("filter_exact_max_record"))


@pytest.mark.parametrize("command", [["recommend", "--users", "all"], ["similar", "--items", "all"]])
def test_the_record_names_the_filter_exact_max_used(run_dir, tmp_path, command):
    for flags, want in (([], ServiceSettings.filter_exact_max), (["--filter-exact-max", "3"], 3)):
        out = tmp_path / f"out{want}.csv"
        assert main(["-q", command[0], "--run", str(run_dir), *command[1:], "--k", "2", "--out", str(out),
                     *flags]) == 0
        assert json.loads(Path(f"{out}.json").read_text())["filter_exact_max"] == want
