"""`-q` (warnings, errors and the command's output only) leaves out the commands' printed information lines, as it leaves out the INFO log lines:
`recommend` and `similar` said "ranking with index ..." and "wrote N rows ..." under it."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from twotower.cli.main import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serving"))
from tiny_run import build_tiny_run  # noqa: E402


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return build_tiny_run(tmp_path_factory.mktemp("quiet"))


def test_recommend_and_similar_under_q_print_the_list_alone(run_dir, capsys):
    assert main(["-q", "recommend", "--run", str(run_dir), "--user", "u1", "--k", "3"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("top 3 for user u1") and err == ""
    assert main(["-q", "similar", "--run", str(run_dir), "--item", "i1", "--k", "3"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("top 3 similar to") and err == ""


def test_the_lines_written_to_files_are_left_out_under_q(run_dir, tmp_path, capsys):
    users = tmp_path / "users.txt"
    users.write_text("user_id\nu1\nu2\n")
    assert main(["-q", "recommend", "--run", str(run_dir), "--users", str(users), "--k", "2",
                 "--out", str(tmp_path / "recs.csv")]) == 0
    assert capsys.readouterr().err == ""
    assert main(["-q", "similar", "--run", str(run_dir), "--items", "i1,i2", "--k", "2",
                 "--out", str(tmp_path / "sim.csv")]) == 0
    assert capsys.readouterr().err == ""
    assert (tmp_path / "recs.csv").is_file() and (tmp_path / "sim.csv").is_file()


def test_without_q_the_lines_stay_and_a_q_command_does_not_silence_the_next(run_dir, tmp_path, capsys):
    assert main(["-q", "recommend", "--run", str(run_dir), "--user", "u1", "--k", "2"]) == 0
    capsys.readouterr()
    users = tmp_path / "users.txt"
    users.write_text("user_id\nu1\n")
    assert main(["recommend", "--run", str(run_dir), "--users", str(users), "--k", "2",
                 "--out", str(tmp_path / "recs.csv")]) == 0
    err = capsys.readouterr().err
    assert "ranking with " in err and f"wrote 2 rows for 1 users to {tmp_path / 'recs.csv'}" in err


def test_say_is_silent_only_inside_quiet_lines(capsys):
    from twotower.cli.printing import quiet_lines, say

    with quiet_lines(True):
        say("left out")
    say("printed")
    with quiet_lines(False):
        say("printed too")
    assert capsys.readouterr().err == "printed\nprinted too\n"


def test_the_help_says_q_keeps_errors_and_the_output():
    """`twotower --help` said -q meant "warnings only", while it prints the errors and the results as well."""
    from twotower.cli.main import build_parser

    help_text = " ".join(build_parser().format_help().split())
    assert "warnings only" not in help_text
    assert "print only warnings, errors and the command's own output (its results)" in help_text


def test_train_under_q_prints_its_summary_and_table_not_the_pointer_below_it(tmp_path, capsys):
    # `-q train` printed "k=50,100 (eval.ks) are in .../metrics.json; `twotower evaluate ...` prints every k" under
    # its table: a pointer, not the result. eval.txt keeps it, and so does stdout without -q
    from tests.synthetic import write_dataset

    paths = write_dataset(tmp_path / "data", n_users=30, n_items=24, per_user=10)
    fast = ["train.batch_size=32", "model.user.hidden=[16]", "model.item.hidden=[16]", "model.user.out_dim=8",
            "model.item.out_dim=8", "model.user.history_len=4", "train.threads=1", "--no-progress", "--epochs", "1",
            "eval.ks=10,15", "eval.baselines="]
    files = ["--train", str(paths["train"]), "--valid", str(paths["valid"]), "--test", str(paths["test"])]
    pointer = "k=15 (eval.ks) is in "
    assert main(["-q", "train", *files, "--out", str(tmp_path / "q"), *fast]) == 0
    out = capsys.readouterr().out
    assert out.startswith("trained: ") and "two-tower  10" in out and "protocol: " in out
    assert pointer not in out and pointer in (tmp_path / "q" / "eval.txt").read_text()
    assert main(["train", *files, "--out", str(tmp_path / "loud"), *fast]) == 0
    out = capsys.readouterr().out
    assert pointer in out and out.endswith("prints every k\n\n")  # without -q: stdout as it was


def test_index_build_under_q_prints_its_report_not_its_opening_line(run_dir, tmp_path, capsys):
    # "index build: 60 items of dim ..., k=10, target recall 0.95" opens the build, before the measuring: not the result
    opening = "index build: 60 items of dim "
    assert main(["-q", "index", "build", "--run", str(run_dir), "--index", "exact", "--out", str(tmp_path / "q")]) == 0
    out, err = capsys.readouterr()
    assert opening not in out and out.startswith(f"saved exact index to {tmp_path / 'q'}") and err == ""
    assert main(["index", "build", "--run", str(run_dir), "--index", "exact", "--out", str(tmp_path / "loud")]) == 0
    assert capsys.readouterr().out.startswith(opening)  # without -q: stdout as it was


def test_each_command_logs_at_its_own_level_and_leaves_the_callers_after(tmp_path, caplog):
    # logging.basicConfig sets the level only while the root logger has no handler: a second main() in one process
    # (a notebook, a test) logged at the first one's level, so a `-q` command silenced the next one's INFO lines
    import logging

    from tests.synthetic import write_dataset

    paths = write_dataset(tmp_path / "src")
    root = logging.getLogger()
    before = root.level
    assert main(["-q", "data", "split", "--input", str(paths["all"]), "--out", str(tmp_path / "a")]) == 0
    assert not [r for r in caplog.records if r.levelno < logging.WARNING]
    assert main(["data", "split", "--input", str(paths["all"]), "--out", str(tmp_path / "b")]) == 0
    assert any("data split: saving" in r.getMessage() for r in caplog.records)
    assert root.level == before
