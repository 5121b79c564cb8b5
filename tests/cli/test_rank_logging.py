"""Under torchrun, rank 0 logs for all: the other ranks read the same data and would repeat every line."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.synthetic import write_dataset

ROOT = Path(__file__).resolve().parents[2]


def _split(tmp_path: Path, rank: str | None, source: Path, status: int) -> str:
    """stderr of `twotower data split --input source` as torchrun's rank ``rank`` of 2 (None: alone)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("RANK", None)
    env.pop("WORLD_SIZE", None)
    if rank is not None:
        env.update(RANK=rank, WORLD_SIZE="2")
    cmd = [sys.executable, "-m", "twotower", "data", "split", "--input", str(source),
           "--out", str(tmp_path / f"split{rank}")]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == status, proc.stderr
    return proc.stderr


def _split_stderr(tmp_path: Path, rank: str | None) -> str:
    return _split(tmp_path, rank, write_dataset(tmp_path / f"data{rank}")["train"], 0)


def test_only_rank_0_logs_info_lines(tmp_path):
    alone, rank0, rank1 = (_split_stderr(tmp_path, r) for r in (None, "0", "1"))
    assert " INFO " in alone and " INFO " in rank0
    assert " INFO " not in rank1 and " WARNING " not in rank1


def _failing_stderr(tmp_path: Path, rank: str | None) -> str:
    return _split(tmp_path, rank, tmp_path / "missing.csv", 2)


def test_an_error_names_the_rank_that_failed(tmp_path):
    # a rank > 0 may fail alone (its node lacks the data file): its line must not read as rank 0's
    alone, rank0, rank1 = (_failing_stderr(tmp_path, r) for r in (None, "0", "1"))
    assert alone.startswith("error: ") and "missing.csv" in alone
    assert rank0 == alone
    assert rank1 == "[rank 1] " + alone
