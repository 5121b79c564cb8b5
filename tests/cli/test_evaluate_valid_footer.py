"""The footer under `twotower evaluate --split valid`: those figures are on the split the run chose its settings on."""

from __future__ import annotations

import pytest

from tests.synthetic import write_dataset
from twotower.cli.main import main

FAST = ["train.batch_size=32", "model.user.hidden=[16]", "model.item.hidden=[16]", "model.user.out_dim=8",
        "model.item.out_dim=8", "model.user.history_len=4", "train.threads=1", "--no-progress", "--no-eval"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("eval-footer")
    paths = write_dataset(d / "data", n_users=30, n_items=24, per_user=10)
    out = d / "run"
    assert main(["-q", "train", "--train", str(paths["train"]), "--valid", str(paths["valid"]), "--test",
                 str(paths["test"]), "--out", str(out), "--epochs", "1", *FAST]) == 0
    return out


@pytest.mark.parametrize("extra", [[], ["--history-from", "TRAIN"]])
def test_a_valid_table_says_its_figures_are_not_held_out(run_dir, capsys, extra):
    """`--split valid` printed "valid only for selection / early stopping" under a table of valid figures, as if
    they were held-out estimates; the early stop and the baselines' λ / k were chosen on those very users."""
    extra = [str(run_dir / "data" / "train.csv") if a == "TRAIN" else a for a in extra]
    assert main(["-q", "evaluate", "--run", str(run_dir), "--split", "valid", "--ks", "5", *extra]) == 0
    footer = capsys.readouterr().out.strip().splitlines()[-1]
    assert footer.startswith("protocol:")
    assert "valid only for selection" not in footer
    assert "not held out" in footer and "--split test" in footer


def test_a_test_table_keeps_its_footer(run_dir, capsys):
    assert main(["-q", "evaluate", "--run", str(run_dir), "--ks", "5", "--baselines", "popularity"]) == 0
    footer = capsys.readouterr().out.strip().splitlines()[-1]
    assert "valid only for selection / early stopping" in footer and "not held out" not in footer


def test_json_rows_and_a_stdout_csv_name_their_split(run_dir, capsys):
    """`--json` rows (and `--csv -`, which gets no record) did not say which split their figures are on: a saved
    valid table read like a test one."""
    import csv
    import io
    import json

    for split in ("valid", "test"):
        assert main(["-q", "evaluate", "--run", str(run_dir), "--split", split, "--ks", "5", "--json"]) == 0
        rows = json.loads(capsys.readouterr().out)
        assert rows and all(r["split"] == split for r in rows)
        assert main(["-q", "evaluate", "--run", str(run_dir), "--split", split, "--ks", "5", "--csv", "-"]) == 0
        lines = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
        assert lines and all(r["split"] == split for r in lines)
