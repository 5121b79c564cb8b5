"""`tt.export_onnx` from Python refuses and locks as `twotower export` does."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import twotower as tt
from tests.lock_holder import writer_lock_held
from tests.serving.tiny_run import build_tiny_run

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="the writer lock is a POSIX flock")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_run(tmp_path_factory.mktemp("py_export"))


@posix_only
def test_export_onnx_into_a_run_takes_the_run_s_writer_lock(run_dir):
    """Before, only the CLI took it: an export into RUN/onnx from a notebook ran beside a `train --out RUN`."""
    run = tt.TrainedRun.load(run_dir)
    with writer_lock_held(run_dir):
        with pytest.raises(tt.ConfigError, match=r"twotower train \(pid \d+\) is writing this folder; .*`tt.export_onnx`"):
            tt.export_onnx(run, run_dir / "onnx", check_users=4)
    assert not (run_dir / "onnx").exists()


@posix_only
def test_export_onnx_elsewhere_locks_its_out_folder(run_dir, tmp_path):
    """Two exports into one folder outside any run: the second is refused, as a second `twotower export` is."""
    run = tt.TrainedRun.load(run_dir)
    out = tmp_path / "exported"
    with writer_lock_held(out, what="twotower export", beside=True):
        with pytest.raises(tt.ConfigError, match=rf"^{out}: twotower export \(pid \d+\) is writing this folder"):
            tt.export_onnx(run, out, check_users=4)
    assert not out.exists()
    assert tt.export_onnx(run, out, check_users=4).out == out  # released: it exports
    assert (out / "export.json").is_file()


def test_export_onnx_takes_a_run_folder_as_build_index_does(run_dir, tmp_path):
    """A run folder's path failed with "AttributeError: 'str' object has no attribute 'model'"."""
    report = tt.export_onnx(str(run_dir), tmp_path / "from_path", check_users=4)
    assert json.loads((report.out / "export.json").read_text())["run"] == str(run_dir.resolve())
    (tmp_path / "not_a_run").mkdir()
    with pytest.raises(tt.NotFoundError, match=r"unknown run .*not_a_run. \(no run.json there"):
        tt.export_onnx(tmp_path / "not_a_run", tmp_path / "o", check_users=4)
    with pytest.raises(tt.ConfigError, match=r"^export_onnx: run must be a loaded run \(tt.TrainedRun\), got a tuple"):
        tt.export_onnx((tt.TrainedRun.load(run_dir), None, None), tmp_path / "o", check_users=4)
    assert not (tmp_path / "o").exists()


def test_export_onnx_checks_out_as_the_cli_does(run_dir, tmp_path):
    """An out below a file failed with a bare "FileExistsError: [Errno 17] File exists: 'f'" after loading."""
    a_file = tmp_path / "f"
    a_file.write_text("x")
    with pytest.raises(tt.ConfigError, match=rf"^out {a_file / 'onnx'}: {a_file} is a file, not a folder"):
        tt.export_onnx(run_dir, a_file / "onnx", check_users=4)


@pytest.mark.parametrize("bad", [0, -5, 2.5, True])
def test_export_onnx_refuses_a_check_of_no_users(run_dir, tmp_path, bad):
    """check_users=0 exported with no user vector checked (export.json: "users": 0) while --check-users 0 is refused;
    -5 failed in numpy ("negative dimensions are not allowed")."""
    with pytest.raises(tt.ConfigError, match=rf"^check_users must be a whole number >= 1, got {bad!r}"):
        tt.export_onnx(run_dir, tmp_path / "onnx", check_users=bad)
    assert not (tmp_path / "onnx").exists()
