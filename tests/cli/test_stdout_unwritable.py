"""Output that cannot be written to stdout (``> /dev/full``, ``>&-``) is one error line on stderr and status 2.

`recommend > /dev/full` said "error: No space left on device; free space there ..." and then the interpreter's own
"Exception ignored ... OSError: [Errno 28]" with status 120; `--help > /dev/full` the same, `serve --help > /dev/full`
status 0 with the help lost, and with stdout closed (``>&-``) recommend ended in an AttributeError traceback. With
stderr closed (``2>&-``) the error lines went to stdout, into the output.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serving"))
from tiny_run import build_tiny_run  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return build_tiny_run(tmp_path_factory.mktemp("stdout"))


def _run(argv: list[str], *, stdout=None, close: int | None = None) -> subprocess.CompletedProcess:  # noqa: ANN001
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), OMP_NUM_THREADS="1")
    env.pop("PYTHONUNBUFFERED", None)  # as a shell runs it: stdout buffered
    return subprocess.run([sys.executable, "-m", "twotower", *argv], stdout=stdout, stderr=subprocess.PIPE,
                          env=env, text=True, timeout=120, preexec_fn=(lambda: os.close(close)) if close else None)


def _one_error_line(err: str) -> str:
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


@pytest.mark.parametrize("argv", [
    ["-q", "recommend", "--run", "RUN", "--user", "u1", "--k", "2"],
    ["-q", "recommend", "--run", "RUN", "--users", "all", "--k", "5", "--out", "-"],  # the CSV, written in one piece
    ["--help"], ["serve", "--help"], ["--version"],
])
def test_output_to_a_full_device_is_one_error_line_and_status_2(run_dir, argv):
    with open("/dev/full", "w") as full:
        done = _run([str(run_dir) if a == "RUN" else a for a in argv], stdout=full)
    assert done.returncode == 2, done.stderr
    assert "standard output" in _one_error_line(done.stderr)


def test_a_closed_stdout_is_one_error_line_and_status_2(run_dir):
    done = _run(["-q", "recommend", "--run", str(run_dir), "--user", "u1", "--k", "2"], close=1)
    assert done.returncode == 2, done.stderr
    assert "standard output is closed" in _one_error_line(done.stderr)


def test_with_stderr_closed_errors_stay_out_of_stdout(run_dir):
    done = subprocess.run(
        [sys.executable, "-m", "twotower", "-q", "recommend", "--run", str(run_dir), "--user", "nobody"],
        stdout=subprocess.PIPE, env=dict(os.environ, PYTHONPATH=str(ROOT / "src"), OMP_NUM_THREADS="1"), text=True,
        timeout=120, preexec_fn=lambda: os.close(2))
    assert (done.returncode, done.stdout) == (2, "")
