"""A missing index is answered with the command that builds it for this run: it said `--run DIR`, DIR as written."""
from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from tests.serving.tiny_run import build_tiny_run
from twotower.cli.main import main
from twotower.errors import NotFoundError


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_run(tmp_path_factory.mktemp("tiny run"))  # a space: the path is shell-quoted


def test_index_info_without_an_index_names_the_run(run_dir, capsys):
    assert main(["index", "info", "--run", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert f"build one with `twotower index build --run {shlex.quote(str(run_dir))}`" in err, err
    assert "DIR" not in err


def test_an_empty_index_folder_names_the_run_and_the_folder(run_dir, tmp_path, capsys):
    from twotower.pipeline.artifacts import TrainedRun
    from twotower.pipeline.recommend import open_run_index

    empty = tmp_path / "idx"
    empty.mkdir()
    want = f"`twotower index build --run {shlex.quote(str(run_dir))} --out {shlex.quote(str(empty))}`"
    assert main(["index", "info", "--run", str(run_dir), "--index", str(empty)]) == 2
    assert want in capsys.readouterr().err
    with pytest.raises(NotFoundError) as e:  # serve --index, and from Python
        open_run_index(TrainedRun.load(run_dir), empty)
    assert want in str(e.value) and "DIR" not in str(e.value)
