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


def test_a_run_without_a_valid_split_is_not_said_to_have_one(tmp_path, capsys):
    """A run trained without --valid (a time split with equal cut-offs has none) was footed, under train's table and
    `evaluate`'s, "valid only for selection / early stopping; test ranks the full catalogue excluding each user's
    train+valid items", of a valid split it never had."""
    paths = write_dataset(tmp_path / "data", n_users=30, n_items=24, per_user=10)
    out = tmp_path / "run"
    fast = [a for a in FAST if a != "--no-eval"]
    assert main(["-q", "train", "--train", str(paths["train"]), "--test", str(paths["test"]), "--out", str(out),
                 "--epochs", "1", "eval.ks=[5]", "eval.baselines=[\"popularity\"]", *fast]) == 0
    assert main(["-q", "evaluate", "--run", str(out), "--ks", "5", "--baselines", "popularity"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    footers = [line for line in lines if line.startswith("protocol:")]
    assert len(footers) == 2  # train's closing table, then evaluate's
    for footer in footers:
        assert "valid only for selection" not in footer and "train+valid" not in footer
        assert "no valid split" in footer and "excluding each user's train items" in footer
