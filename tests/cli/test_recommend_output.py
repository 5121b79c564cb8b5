"""`twotower recommend`: argument checks before the run loads, --json shortfall like HTTP, title-less lists."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from twotower.cli.main import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serving"))
from tiny_run import build_tiny_run  # noqa: E402


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return build_tiny_run(tmp_path_factory.mktemp("recout"))


@pytest.mark.parametrize("k", ["0", "-5", "100000"])
def test_bad_k_is_refused_before_the_run_is_read(tmp_path, capsys, k):
    # the run folder does not even exist: the k error must come first, with nothing printed before it
    assert main(["recommend", "--run", str(tmp_path / "nope"), "--user", "u1", "--k", k]) == 2
    err = capsys.readouterr().err
    assert "--k must be between 1 and 10000" in err and "ranking with" not in err


def test_json_says_shortfall_only_for_a_short_list(run_dir, capsys):
    from twotower.pipeline.artifacts import TrainedRun

    n_items = TrainedRun.load(run_dir).n_items
    assert main(["recommend", "--run", str(run_dir), "--history", "i1", "--k", "3", "--json"]) == 0
    full = json.loads(capsys.readouterr().out)
    assert len(full["items"]) == 3 and "shortfall" not in full
    assert main(["recommend", "--run", str(run_dir), "--history", "i1", "--k", str(n_items + 5), "--json"]) == 0
    short = json.loads(capsys.readouterr().out)
    assert short["shortfall"]["missing"] == n_items + 5 - len(short["items"]) > 0


def test_items_without_titles_are_named_once(capsys):
    from twotower.cli.commands import _print_items

    _print_items([{"rank": 1, "item_id": "150", "score": 0.25}, {"rank": 2, "item_id": "7", "score": 0.2,
                   "title": "Heat"}], False, "top 2", 2)
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].strip() == "1. item 150 (score 0.250)"
    assert lines[2].strip() == "2. Heat (item 7, score 0.200)"
