"""`twotower --help` and the CLI's start-up import only what the command needs: building the parser read
EvalConfig's defaults, whose metric check imported twotower.evaluation and with it scipy (every baseline), and
the search and text packages imported all their modules for one settings class each. A wrong --run was then
refused after pandas and scipy too (`refuse_missing_inputs` read a message constant from the data readers)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("torch", "scipy", "faiss", "pandas")
CODE = ("import json, sys; from twotower.cli.main import main\n"
        "try:\n    rc = main(json.loads(sys.argv[1]))\nexcept SystemExit as e:\n    rc = e.code\n"
        f"print(rc, sorted(m for m in {HEAVY!r} if m in sys.modules))")


@pytest.mark.parametrize("argv", [["--help"], ["evaluate", "--help"], ["recommend", "--run", "{tmp}/nope", "--user", "1"]],
                         ids=["help", "evaluate-help", "recommend-bad-run"])
def test_the_cli_starts_without_torch_scipy_faiss_or_pandas(argv, tmp_path):
    argv = [a.format(tmp=tmp_path) for a in argv]
    out = subprocess.run([sys.executable, "-c", CODE, json.dumps(argv)], capture_output=True, text=True, timeout=120)
    rc, loaded = out.stdout.strip().splitlines()[-1].split(" ", 1)
    assert loaded == "[]", (loaded, out.stderr)
    assert rc == ("2" if "--run" in argv else "0"), out.stderr


def test_the_metric_names_the_config_checks_are_the_ones_evaluated():
    from twotower.evaluation.metric_names import PER_USER_METRICS
    from twotower.evaluation.metrics import FROM_HITS

    assert PER_USER_METRICS == tuple(FROM_HITS)  # named twice: once without scipy, for EvalConfig's check
