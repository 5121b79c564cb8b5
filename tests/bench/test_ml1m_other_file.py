"""bench/ml1m.py on a small file of another shape than ML-1M: short sequences, a long-tailed catalogue, items
that first occur in a user's last two items (so never in train)."""
from __future__ import annotations

import importlib
import logging
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture
def ml1m(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.syspath_prepend(str(BENCH))
    sys.modules.pop("ml1m", None)
    yield importlib.import_module("ml1m")
    for name in ("ml1m", "_common"):
        sys.modules.pop(name, None)
    logging.getLogger("twotower.training.trainer").setLevel(logging.NOTSET)  # main() raises it to INFO


def _sparse_file(path: Path, users: int = 40, seed: int = 0) -> Path:
    """3-8 items a user from a Zipf-ish catalogue of 60, and for a few users a last item no one else has."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, 61)
    lines = []
    for u in range(1, users + 1):
        items = rng.choice(np.arange(1, 61), size=int(rng.integers(3, 9)), replace=False, p=p / p.sum()).tolist()
        if u % 10 == 0:
            items[-1] = 1000 + u  # only in this user's test item
        lines += [f"{u} {i}" for i in items]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_other_file_runs_end_to_end_with_a_line_per_epoch(ml1m: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    data = _sparse_file(tmp_path / "sparse.txt")
    assert ml1m.main(["--data", str(data), "--rows", "pooled-recency-inbatch", "--seeds", "0", "--epochs", "2",
                      "--threads", "1", "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr()
    assert "sparse.txt leave-one-out" in out.out and "chosen on validation NDCG@10" in out.out
    # the users whose test item is in no train row are counted, not silently dropped
    assert re.search(r"\b\d+ of 40 users are not evaluated", out.err)
    # the catalogue ranked is train's: the items only a test row has are not in it, and the title says so
    title = re.search(r"full catalogue of (\d+) items \(train's, of (\d+) in the file\)", out.out)
    assert title and int(title.group(1)) < int(title.group(2)), out.out
    # a line per epoch: a long row is not silent until it ends
    epochs = [r.getMessage() for r in caplog.records if r.name == "twotower.training.trainer"
              and r.getMessage().startswith("epoch ")]
    assert [m.split(":")[0] for m in epochs] == ["epoch 1/2", "epoch 2/2"]
    assert all("valid NDCG@10" in m for m in epochs)


def test_a_quick_run_counts_its_unevaluated_users_too(ml1m: Any, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    # --quick hid the note, and on sparse data most of a smoke run's users can be the unevaluated ones
    data = _sparse_file(tmp_path / "sparse.txt")
    assert ml1m.main(["--data", str(data), "--rows", "pooled-recency-inbatch", "--quick", "--threads", "1",
                      "--out", str(tmp_path / "out")]) == 0
    assert re.search(r"\b\d+ of 40 users are not evaluated", capsys.readouterr().err)
