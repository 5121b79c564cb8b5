"""`twotower serve --run X` refuses a folder without run.json before importing torch, uvicorn or the service: it
took about 5 s to say "unknown run", the time of those imports."""
from __future__ import annotations

import subprocess
import sys


def test_serve_refuses_a_folder_without_run_json_before_importing_torch(tmp_path):
    (tmp_path / "runs" / "ml").mkdir(parents=True)
    (tmp_path / "runs" / "ml" / "run.json").write_text("{}")
    code = ("import sys; from twotower.cli.main import main; rc = main(['serve', '--run', sys.argv[1], '--port', '1']);"
            " print(rc, sorted(m for m in ('torch', 'uvicorn', 'twotower.serving.service') if m in sys.modules))")
    for bad, hint in ((tmp_path / "nope", "train one with `twotower train --out DIR`"),
                      (tmp_path / "runs", "the folder holds runs")):
        out = subprocess.run([sys.executable, "-c", code, str(bad)], capture_output=True, text=True, timeout=120)
        assert out.stdout.strip() == "2 []", (out.stdout, out.stderr)
        assert f"unknown run '{bad}' (no run.json there; " in out.stderr and hint in out.stderr, out.stderr
