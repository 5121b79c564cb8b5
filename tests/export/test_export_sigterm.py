"""SIGTERM (a scheduler's preemption, `timeout`, `kill`) during `twotower export` stops it as Ctrl-C does: the new
export's temporary folder is removed, one line says what --out holds, status 143, as `index build` has it.

Walk: `kill -TERM` of `twotower export --run RUN --out exp` (ML-100K) while the towers were checked ended on the spot
without a word, status -15, and left `.exp.tmp-...` (the half-written export) beside the earlier exp.
"""
from __future__ import annotations

import signal
from pathlib import Path

import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

import twotower.export.onnx as onnx_export  # noqa: E402
from tests.real_sigterm import send_sigterm, files_of  # noqa: E402
from tests.serving.tiny_run import build_tiny_run  # noqa: E402
from twotower.cli.main import main  # noqa: E402


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_run(tmp_path_factory.mktemp("export_sigterm"))


def test_sigterm_mid_export_keeps_the_previous_export_and_says_so(run_dir, tmp_path, monkeypatch, capsys):
    out = tmp_path / "exp"
    argv = ["-q", "export", "--run", str(run_dir), "--out", str(out), "--check-users", "5", "--threads", "1"]
    assert main(argv) == 0
    before = files_of(out)
    monkeypatch.setattr(onnx_export, "_export_towers", send_sigterm)
    capsys.readouterr()
    assert main(argv) == 143  # the shell's status for death by SIGTERM, which schedulers read
    assert (f"terminated (SIGTERM): it stopped before {out} was written; the previous output there is kept, intact, "
            "as it was; run the command again to replace it") in capsys.readouterr().err
    assert files_of(out) == before
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")) == ["exp"]  # no .exp.tmp-...
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # the handler does not outlive the command


def test_sigterm_mid_a_first_export_says_nothing_was_saved(run_dir, tmp_path, monkeypatch, capsys):
    out = tmp_path / "exp"
    monkeypatch.setattr(onnx_export, "_export_towers", send_sigterm)
    assert main(["-q", "export", "--run", str(run_dir), "--out", str(out), "--threads", "1"]) == 143
    assert f"terminated (SIGTERM): it stopped before {out} was written, so nothing was saved there" in (
        capsys.readouterr().err)
    assert not out.exists() and not [p for p in tmp_path.iterdir() if ".tmp" in p.name]
