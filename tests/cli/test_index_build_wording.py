"""`twotower index build` writes a search setting as its table and plot do: ``efSearch=16``, not ``{'efSearch': 16}``.

Its ``why:`` and ``chosen:`` lines printed the Python dict (``chosen: HNSW32 {'efSearch': 16} recall@10 ...``; ``Flat {}``
for an index without knobs) under a table saying ``efSearch=16``; the saved files keep their JSON shape.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.serving.tiny_run import build_tiny_run
from twotower.cli.main import main


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_run(tmp_path_factory.mktemp("tiny_wording"))


def test_the_why_and_chosen_lines_name_the_setting_as_the_table_does(run_dir, tmp_path, capsys) -> None:
    out = tmp_path / "idx"
    assert main(["index", "build", "--run", str(run_dir), "--index", "hnsw", "--queries", "20", "--threads", "1",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    tune = json.loads((out / "tune.json").read_text())
    ef = tune["chosen"]["params"]["efSearch"]
    lines = {line.split(":", 1)[0]: line for line in printed.splitlines() if line.startswith(("why:", "chosen:"))}
    assert f": efSearch={ef} at " in lines["why"], lines
    assert lines["chosen"].startswith(f"chosen: HNSW32 efSearch={ef} recall@10 "), lines
    assert "{" not in printed and f"efSearch={ef}" in printed  # the table's wording, and no dict anywhere
    # the saved files keep their shape: the setting is a JSON object in tune.json and meta.json
    assert tune["params"] == tune["chosen"]["params"] == {"efSearch": ef}
    assert json.loads((out / "meta.json").read_text())["params"] == {"efSearch": ef}
    assert main(["index", "info", "--run", str(run_dir), "--index", str(out)]) == 0
    info = capsys.readouterr().out
    assert f"HNSW32 (efSearch={ef})" in info.splitlines()[0] and "{" not in info.splitlines()[0]


def test_an_index_without_knobs_is_named_alone(run_dir, tmp_path, capsys) -> None:
    assert main(["index", "build", "--run", str(run_dir), "--index", "flat", "--queries", "20", "--threads", "1",
                 "--out", str(tmp_path / "idx")]) == 0
    printed = capsys.readouterr().out
    assert "chosen: Flat recall@10 " in printed and "Flat {}" not in printed
    assert "why: Flat (no search setting) reaches recall@10 0.95 at " in printed
