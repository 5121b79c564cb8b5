"""A run's index that lost its meta.json (removed, or cut short) is refused as damaged, and rebuilt in place.

Before, `recommend` and `serve` read RUN/index without meta.json as "no index built" and ranked exactly without a
word about the index files beside it, and `twotower index build --run RUN`, the command every damaged-index error
names, refused the folder as "a non-empty folder that is not a vector index": a damaged index could only be
cleared by hand.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import twotower as tt
from tests.serving.tiny_run import build_tiny_run
from twotower.cli.main import main


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_run(tmp_path_factory.mktemp("damaged_index_meta"))


@pytest.mark.parametrize("damage", ["removed", "cut short"])
def test_a_run_index_without_its_meta_json_is_refused_then_rebuilt_by_the_command_named(run_dir, damage, capsys):
    shutil.rmtree(run_dir / "index", ignore_errors=True)  # each case from a sound index
    assert main(["index", "build", "--run", str(run_dir), "--index", "HNSW8", "--threads", "1"]) == 0
    meta = run_dir / "index" / "meta.json"
    if damage == "removed":
        meta.unlink()
    else:
        meta.write_bytes(meta.read_bytes()[:100])
    run = tt.TrainedRun.load(run_dir)
    with pytest.raises(tt.IntegrityError, match=r"meta\.json") as e:
        tt.recommend(run, ["u3"], k=5)
    assert f"twotower index build --run {run_dir}" in str(e.value)
    assert main(["recommend", "--run", str(run_dir), "--user", "u3", "--k", "5"]) != 0
    assert "no index built" not in capsys.readouterr().out
    assert main(["index", "info", "--run", str(run_dir)]) != 0
    # this run's command, not `--run DIR`, asking for the index type it was built as (tune.json says which)
    assert f"twotower index build --run {run_dir} --index HNSW8`" in capsys.readouterr().err

    assert main(["index", "build", "--run", str(run_dir), "--index", "exact", "--threads", "1"]) == 0  # as named
    assert tt.load_index(run_dir / "index", expected_fingerprint=run.fingerprint()).is_exact
    assert tt.recommend(run, ["u3"], k=5) == tt.recommend(run, ["u3"], k=5, exact=True)


def test_a_folder_of_other_files_is_still_not_replaced_by_an_index_build(run_dir, tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "ids.npy").write_bytes(b"x")
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    assert main(["index", "build", "--run", str(run_dir), "--index", "exact", "--out", str(tmp_path / "mine")]) != 0
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
