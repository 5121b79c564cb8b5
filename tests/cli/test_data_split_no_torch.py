"""`twotower data split` reads, splits and writes CSVs: it must not import torch (seconds on every split)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import twotower


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_data_split_never_imports_torch(tmp_path, suffix):
    df = pd.DataFrame({"user_id": [f"u{i % 5}" for i in range(40)], "item_id": [f"i{i % 7}" for i in range(40)],
                       "timestamp": range(40), "rating": 1.0})
    path = tmp_path / f"in{suffix}"
    if suffix == ".csv":
        df.to_csv(path, index=False)
    elif suffix == ".jsonl":
        df.to_json(path, orient="records", lines=True)
    else:
        df.to_parquet(path)
    out = tmp_path / "split"
    code = ("import json, sys; from twotower.cli.main import main; "
            f"rc = main(['-q', 'data', 'split', '--input', {str(path)!r}, '--out', {str(out)!r}]); "
            "print(json.dumps([rc, 'torch' in sys.modules]))")
    src = str(Path(twotower.__file__).resolve().parents[1])  # this checkout's code, not an installed copy
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")]))}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    rc, torch_loaded = json.loads(run.stdout.strip().splitlines()[-1])
    assert rc == 0 and (out / "train.csv").is_file()
    assert not torch_loaded
