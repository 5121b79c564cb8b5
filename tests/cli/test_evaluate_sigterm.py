"""SIGTERM (a scheduler's preemption, `timeout`, `kill`) during `twotower evaluate --csv FILE --plot FILE.png` stops it
as Ctrl-C does, and one line says what each output holds, as `recommend --out` and `index build` say of theirs.

Walk: `kill -TERM` of `twotower evaluate --run RUN --csv e.csv --plot e.png` (ML-100K) mid-evaluation ended on the spot
without a word, status -15, so the user could not tell whether e.csv and e.png were this evaluation's or an earlier one's.
"""
from __future__ import annotations

import importlib
import signal
from pathlib import Path

import pytest

import twotower.evaluation.plots as plots
from tests.real_sigterm import send_sigterm, files_of
from tests.serving.tiny_run import build_tiny_run
from twotower.cli.main import main


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_run(tmp_path_factory.mktemp("evaluate_sigterm"))


def test_sigterm_while_plotting_says_the_csv_is_new_and_the_plot_the_previous(run_dir, tmp_path, monkeypatch, capsys):
    pytest.importorskip("matplotlib")
    csv, png = tmp_path / "e.csv", tmp_path / "e.png"
    argv = ["-q", "evaluate", "--run", str(run_dir), "--baselines", "popularity", "--threads", "1",
            "--csv", str(csv), "--plot", str(png)]
    assert main(argv) == 0
    before = files_of(tmp_path)
    monkeypatch.setattr(plots, "results_figure", send_sigterm)
    capsys.readouterr()
    assert main(argv) == 143  # the shell's status for death by SIGTERM, which schedulers read
    err = capsys.readouterr().err
    assert (f"terminated (SIGTERM): {csv} (and its record e.csv.json) was written before it stopped: it holds this "
            f"command's output (the previous file was replaced); it stopped before {png} was written; the previous "
            f"{png} and its record e.png.json are kept, intact, as they were") in err
    assert files_of(tmp_path)["e.png"] == before["e.png"]
    assert files_of(tmp_path)["e.png.json"] == before["e.png.json"]
    assert sorted(files_of(tmp_path)) == ["e.csv", "e.csv.json", "e.png", "e.png.json"]  # no temporary file left beside them
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # the handler does not outlive the command


def test_sigterm_mid_evaluation_says_no_file_was_saved(run_dir, tmp_path, monkeypatch, capsys):
    csv, png = tmp_path / "e.csv", tmp_path / "e.png"
    er = importlib.import_module("twotower.pipeline.evaluate_run")  # the package names a function so too
    monkeypatch.setattr(er, "evaluate_run", send_sigterm)
    argv = ["-q", "evaluate", "--run", str(run_dir), "--threads", "1", "--csv", str(csv), "--plot", str(png)]
    assert main(argv) == 143
    assert (f"terminated (SIGTERM): it stopped before {csv} and {png} were written, so no file was saved; run the "
            "command again to write them") in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
