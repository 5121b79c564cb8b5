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


def _suggested_build(err: str) -> list[str]:
    import re

    return shlex.split(re.search(r"`(twotower index build [^`]+)`", err).group(1))[1:]


@pytest.mark.parametrize("folder", ["data", "run data"])
def test_a_folder_of_other_files_suggests_a_build_that_is_not_refused(run_dir, tmp_path, capsys, folder):
    """`recommend --index data/ml` (the data) or `--index runs/ml/data` (the run's own copy of it) suggested
    `index build --out data/ml`, which `index build` refused as a non-empty folder that is not an index. The
    suggestion is now the run's own index folder, and run as printed it builds an index `recommend` then reads."""
    import shutil

    own = run_dir / "index"
    shutil.rmtree(own, ignore_errors=True)
    other = run_dir.parent / "data" if folder == "data" else run_dir / "data"
    other.mkdir(exist_ok=True)
    (other / "notes.txt").write_text("not an index\n")
    assert main(["recommend", "--run", str(run_dir), "--user", "u1", "--index", str(other)]) == 2
    err = capsys.readouterr().err
    assert "an index built there would replace them" in err, err
    command = _suggested_build(err)
    assert str(other) not in command
    assert main(command) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["recommend", "--run", str(run_dir), "--user", "u1", "--index", str(own)]) == 0
    # with the run's own index built, the hint names it rather than a second build
    assert main(["recommend", "--run", str(run_dir), "--user", "u1", "--index", str(other)]) == 2
    assert f"the run's own index is {own}" in capsys.readouterr().err
    shutil.rmtree(own)


def test_a_missing_index_folder_says_it_does_not_exist(run_dir, tmp_path, capsys):
    assert main(["recommend", "--run", str(run_dir), "--user", "u1", "--index", str(tmp_path / "nonexist")]) == 2
    err = capsys.readouterr().err
    assert "(it does not exist; build one with" in err and "no meta.json there" not in err, err
