"""Every command that takes `--run` refuses a folder without run.json before importing torch (as `serve` does,
tests/cli/test_serve_refuses_early.py): `recommend --run /tmp/nope --user 1` imported torch and the pipeline first
and took about 6 s to say "unknown run"."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

COMMANDS = {  # {run}: the folder without run.json
    "recommend": ["recommend", "--run", "{run}", "--user", "1"],
    "similar": ["similar", "--run", "{run}", "--item", "1"],
    "evaluate": ["evaluate", "--run", "{run}"],
    "explain": ["explain", "--run", "{run}", "--user", "1", "--item", "2"],
    "index build": ["index", "build", "--run", "{run}"],
    "index info": ["index", "info", "--run", "{run}"],
    "export": ["export", "--run", "{run}", "--out", "{tmp}/onnx"],
}

CODE = ("import json, sys; from twotower.cli.main import main; rc = main(json.loads(sys.argv[1]));"
        " print(rc, sorted(m for m in ('torch', 'twotower.pipeline.artifacts') if m in sys.modules))")


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_folder_without_run_json_is_refused_before_torch_is_imported(command, tmp_path):
    import json

    bad = tmp_path / "nope"
    argv = [a.format(run=bad, tmp=tmp_path) for a in COMMANDS[command]]
    # TWOTOWER_THREADS: the thread count, which imports torch to set it, is set only once the run is found
    env = {**os.environ, "TWOTOWER_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", CODE, json.dumps(argv)], capture_output=True, text=True, timeout=120,
                         env=env)
    assert out.stdout.strip() == "2 []", (out.stdout, out.stderr)
    assert f"error: unknown run '{bad}' (no run.json there; train one with `twotower train --out DIR`)" in out.stderr
