"""export.json, an index's meta.json and its tune.json name the twotower version that wrote them, as the records of
`recommend --out` and `evaluate --csv` do (`twotower_version`); an index or export written before they did still
loads and is described."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.serving.tiny_run import build_tiny_run
from twotower.cli.main import main
from twotower.utils.version import installed_version


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_run(tmp_path_factory.mktemp("records_version"))


def _as_saved_before_the_version_was_recorded(index_dir: Path) -> None:
    """Drop twotower_version from tune.json and meta.json, with the checksums an earlier version wrote."""
    from twotower.index.storage import _canonical
    from twotower.utils.atomic import sha256_file

    tune_path, meta_path = index_dir / "tune.json", index_dir / "meta.json"
    tune = json.loads(tune_path.read_text())
    del tune["twotower_version"]
    tune_path.write_text(json.dumps(tune, indent=2, sort_keys=True) + "\n")
    meta = json.loads(meta_path.read_text())
    del meta["twotower_version"], meta["meta_sha256"]
    meta["sha256"]["tune.json"] = sha256_file(tune_path)
    meta["meta_sha256"] = hashlib.sha256(_canonical(meta)).hexdigest()
    meta_path.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")


@pytest.mark.parametrize("flags", [["--index", "exact"], ["--index", "auto", "--exact-budget-ms", "0"]])
def test_index_build_records_the_version_in_meta_and_tune(run_dir, tmp_path, flags) -> None:
    if "auto" in flags:
        pytest.importorskip("faiss")
    out = tmp_path / "idx"
    assert main(["-q", "index", "build", "--run", str(run_dir), "--queries", "20", "--threads", "1", "--out",
                 str(out), *flags]) == 0
    version = installed_version()
    assert version != "unknown"
    assert json.loads((out / "meta.json").read_text())["twotower_version"] == version
    assert json.loads((out / "tune.json").read_text())["twotower_version"] == version


def test_an_index_saved_without_the_version_still_loads_and_is_described(run_dir, tmp_path, capsys) -> None:
    from twotower.index import load_index
    from twotower.index.storage import read_meta, read_tuning

    out = tmp_path / "old"
    assert main(["-q", "index", "build", "--run", str(run_dir), "--index", "exact", "--out", str(out)]) == 0
    _as_saved_before_the_version_was_recorded(out)
    assert "twotower_version" not in read_meta(out) and "twotower_version" not in read_tuning(out)
    assert len(load_index(out)) == 60
    capsys.readouterr()
    assert main(["index", "info", "--run", str(run_dir), "--index", str(out)]) == 0
    assert main(["index", "info", "--run", str(run_dir), "--index", str(out), "--json"]) == 0


def test_onnx_export_records_the_version(run_dir, tmp_path) -> None:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    import twotower as tt

    report = tt.export_onnx(run_dir, tmp_path / "onnx", check_users=4)
    assert json.loads((report.out / "export.json").read_text())["twotower_version"] == installed_version()


def test_every_record_takes_the_version_from_one_helper(monkeypatch) -> None:
    """`twotower --version`, the --out records and the artefacts' records say one version (a single helper)."""
    import twotower.utils.version as v
    from twotower.cli.main import _version

    monkeypatch.setattr("importlib.metadata.version", lambda name: "9.9.9")
    assert v.installed_version() == _version() == "9.9.9"


def test_a_trained_run_names_the_twotower_and_torch_versions_that_wrote_it(run_dir) -> None:
    """run.json said nothing of the code that trained the run, though its numbers can move with either version."""
    import torch

    from twotower.pipeline.artifacts import TrainedRun

    info = json.loads((run_dir / "run.json").read_text())
    assert info["twotower_version"] == installed_version()
    assert info["torch_version"] == torch.__version__
    TrainedRun.load(run_dir)  # sealed with them: the manifest's checksum covers run.json
