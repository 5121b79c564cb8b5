"""``recommend --out``: ``-`` is standard output, symlinks are written through, devices are written into.

Regression for a user walkthrough: ``--out /dev/stdout`` replaced the link with a 0600 file and
``--out -`` created a file named ``-``. Device cases go through a symlink in tmp_path, so a
regression replaces that link, never /dev itself.
"""
from __future__ import annotations

import csv
import io
import os
import re
import stat
import sys
from pathlib import Path

import pytest

from twotower.cli.main import main
from twotower.cli.paths import check_output_file
from twotower.errors import ConfigError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serving"))
from tiny_run import build_tiny_run  # noqa: E402

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX symlinks and /dev")

HEADER = ["user_id", "item_id", "rank", "score"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return build_tiny_run(tmp_path_factory.mktemp("recommend_out"))


def _recommend(run_dir: Path, out: str | Path, *quiet: str) -> int:
    """``quiet``: ``"-q"``, which also leaves out the "wrote N rows" line (tests/cli/test_quiet_lines.py)."""
    return main([*quiet, "recommend", "--run", str(run_dir), "--users", "u1,u2", "--k", "3", "--out", str(out)])


def _rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def test_out_dash_puts_the_csv_alone_on_stdout(run_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert _recommend(run_dir, "-") == 0
    captured = capsys.readouterr()
    rows = _rows(captured.out)
    assert rows[0] == HEADER and len(rows) == 1 + 2 * 3
    assert "wrote 6 rows for 2 users to standard output" in captured.err
    assert not (tmp_path / "-").exists()


def test_out_through_a_symlink_replaces_the_real_file_and_keeps_the_link(run_dir, tmp_path, capsys):
    real = tmp_path / "real.csv"
    real.write_text("old\n")
    os.chmod(real, 0o640)
    link = tmp_path / "recs.csv"
    link.symlink_to("real.csv")
    assert _recommend(run_dir, link) == 0
    assert link.is_symlink() and os.readlink(link) == "real.csv"
    assert _rows(real.read_text())[0] == HEADER
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    assert capsys.readouterr().out == ""


def test_a_new_out_file_is_readable_by_others_under_the_usual_umask(run_dir, tmp_path):
    old = os.umask(0o022)
    try:
        assert _recommend(run_dir, tmp_path / "recs.csv") == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "recs.csv").stat().st_mode) == 0o644


@pytest.mark.skipif(not Path("/dev/stdout").exists(), reason="needs /dev/stdout")
def test_out_to_a_link_to_dev_stdout_writes_to_stdout(run_dir, tmp_path, capfd):
    link = tmp_path / "stdout"
    link.symlink_to("/dev/stdout")
    assert _recommend(run_dir, link) == 0
    assert link.is_symlink() and [p.name for p in tmp_path.iterdir()] == ["stdout"]
    assert _rows(capfd.readouterr().out)[0] == HEADER


# ---------------------------------------------------------------- the up-front check
def test_check_accepts_dash_and_devices(tmp_path):
    assert check_output_file("-") == Path("-")
    if Path("/dev/null").is_char_device():
        assert check_output_file("/dev/null") == Path("/dev/null")  # /dev itself need not be writable


def test_check_refuses_a_link_to_a_folder_and_a_link_loop_naming_the_path(tmp_path):
    folder_link = tmp_path / "to_folder"
    folder_link.symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(ConfigError, match="is a folder"):
        check_output_file(folder_link)
    loop = tmp_path / "loop"
    loop.symlink_to("loop")
    with pytest.raises(ConfigError, match=re.escape(f"--out {loop}: a symbolic link loop")):
        check_output_file(loop)


@pytest.mark.parametrize("who", [["--user", "u1"], ["--history", "i1"]])
def test_out_without_users_is_refused_not_ignored(run_dir, tmp_path, who, capsys):
    # a README walkthrough: `recommend --user 42 --out recs.csv` printed the list and wrote no file
    out = tmp_path / "recs.csv"
    code = main(["-q", "recommend", "--run", str(run_dir), *who, "--out", str(out)])
    assert code == 2
    err = capsys.readouterr().err
    assert "--out writes the CSV of --users" in err
    if who[0] == "--user":
        assert "--users u1 --out" in err
    assert not out.exists()


@pytest.mark.parametrize("out", ["recs.json", "-"])
def test_json_with_out_is_refused_as_similar_refuses_it(run_dir, tmp_path, out, capsys):
    # `--users u1,u2 --json --out recs.json` wrote CSV into recs.json, --json ignored without a word
    target = out if out == "-" else str(tmp_path / out)
    code = main(["-q", "recommend", "--run", str(run_dir), "--users", "u1,u2", "--json", "--out", target])
    assert code == 2
    cap = capsys.readouterr()
    assert cap.err.strip().splitlines()[-1] == (
        "error: --json prints the lists of --users as JSON records and --out writes them as CSV: pass one of them "
        "(JSON in a file: --json > FILE)")
    assert cap.out == "" and not list(tmp_path.iterdir())


@pytest.mark.parametrize(("flag", "value", "said"), [
    ("--history", "i1 i2", "--history takes a comma list, e.g. --history i1,i2"),
    ("--users", "u1;u2", "--users takes a comma list, e.g. --users u1,u2"),
])
def test_a_space_or_semicolon_list_is_told_to_use_commas(run_dir, flag, value, said, capsys):
    # `--history '50 181'` was one unknown item '50 181', with no word on the list syntax
    assert main(["-q", "recommend", "--run", str(run_dir), flag, value, "--k", "2"]) == 2
    err = capsys.readouterr().err
    assert f"unknown {'item' if flag == '--history' else 'user'} {value!r}" in err and said in err


def test_a_spaced_id_that_differs_from_a_known_one_in_case_is_not_told_to_use_commas():
    # 'I1 i2' is no list where a known id differs from it in case alone: the comma hint split it into two ids
    from twotower.errors import NotFoundError
    from twotower.cli.flags import flag_named

    with pytest.raises(NotFoundError) as e, flag_named("--history"):
        raise NotFoundError.not_among("item", "Cafe creme", 3, near=["cafe creme"])
    assert "comma list" not in str(e.value) and "'cafe creme' is known" in str(e.value)
    with pytest.raises(NotFoundError) as e, flag_named("--history"):
        raise NotFoundError.not_among("item", "i1 i2", 3)
    assert str(e.value).endswith("; --history takes a comma list, e.g. --history i1,i2")


def test_a_users_file_without_the_user_column_lists_its_columns(run_dir, tmp_path, capsys):
    # said "needs a 'user_id' column (the run's users) or 'user_id'": one name twice, no columns shown
    users = tmp_path / "people.csv"
    users.write_text("customer,age\nu1,30\n")
    assert main(["-q", "recommend", "--run", str(run_dir), "--users", str(users), "--k", "2"]) == 2
    err = capsys.readouterr().err
    assert "needs a 'user_id' column with the run's user ids; columns present: ['customer', 'age']" in err
    assert "or 'user_id'" not in err


def test_a_users_file_without_a_header_line_is_told_to_add_one(run_dir, tmp_path, capsys):
    # `cut -d, -f1 > users.txt`: the first id was read as the column's name, and the error listed "columns
    # present: ['u1']" without saying that u1 is one of the run's users
    users = tmp_path / "users.txt"
    users.write_text("u1\nu2\n")
    assert main(["-q", "recommend", "--run", str(run_dir), "--users", str(users), "--k", "2"]) == 2
    err = capsys.readouterr().err
    assert ("the file has no header line: its first line 'u1' is one of the run's users; add the line 'user_id' "
            "above the ids") in err
    other = tmp_path / "other.txt"  # a one-column header that is no user: the rename hint as before
    other.write_text("who\nu1\n")
    assert main(["-q", "recommend", "--run", str(run_dir), "--users", str(other), "--k", "2"]) == 2
    err = capsys.readouterr().err
    assert "rename the one that holds the user ids to 'user_id'" in err and "no header line" not in err


def test_a_users_file_with_a_header_and_no_ids_is_refused_and_writes_nothing(run_dir, tmp_path, capsys):
    # printed the CSV header alone and exited 0, as `--users ','` did before it was refused
    users = tmp_path / "users.csv"
    users.write_text("user_id\n")
    out = tmp_path / "recs.csv"
    assert main(["-q", "recommend", "--run", str(run_dir), "--users", str(users), "--k", "2", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"file {users}: no data rows (only a header): no user ids to rank for" in err
    assert not out.exists()


def test_exclude_files_with_a_new_users_history_are_refused(run_dir, tmp_path, capsys):
    # the files hold known users' items; for a new user (--history) they excluded nothing, silently
    seen = tmp_path / "seen.csv"
    seen.write_text("user_id,item_id\nu1,i1\n")
    code = main(["-q", "recommend", "--run", str(run_dir), "--history", "i1", "--exclude", str(seen), "--k", "2"])
    assert code == 2
    assert "--exclude reads known users' items from files" in capsys.readouterr().err


@pytest.mark.parametrize("rel", ["model.safetensors", "vocab/items.json", "data/train.csv", "manifest.json"])
def test_out_onto_a_file_of_the_run_is_refused_and_the_run_still_loads(run_dir, rel, capsys):
    """`recommend --out RUN/model.safetensors` replaced the weights with the CSV: every later load failed its
    checksum. A run's own files (and an index's or an export's) are refused; a new file beside them is not."""
    from twotower.pipeline.artifacts import TrainedRun

    before = (run_dir / rel).read_bytes()
    assert _recommend(run_dir, run_dir / rel) == 2
    assert (f"--out {run_dir / rel}: is a file of the run {str(run_dir)!r}, which writing there would damage; "
            "choose another file name") in capsys.readouterr().err
    assert (run_dir / rel).read_bytes() == before
    TrainedRun.load(run_dir)  # checksums verified
    assert _recommend(run_dir, run_dir / "recs.csv") == 0
    (run_dir / "recs.csv").unlink()


def test_out_onto_a_file_of_an_index_or_an_export_is_refused(tmp_path):
    index = tmp_path / "index"
    index.mkdir()
    (index / "meta.json").write_text('{"meta_sha256": "x", "backend": "faiss"}')
    (index / "ids.npy").write_bytes(b"x")
    export = tmp_path / "onnx"
    export.mkdir()
    (export / "export.json").write_text("{}")
    (export / "item_ids.json").write_text("[]")
    with pytest.raises(ConfigError, match=f"is a file of the index {str(index)!r}"):
        check_output_file(index / "ids.npy")
    with pytest.raises(ConfigError, match=f"is a file of the ONNX export {str(export)!r}"):
        check_output_file(export / "item_ids.json")
    assert check_output_file(export / "recs.csv") == export / "recs.csv"


@pytest.mark.parametrize("name", ["vectors.npy", "ids.npy", "index.faiss"])
def test_out_onto_a_file_of_an_index_in_a_folder_of_any_name_is_refused(tmp_path, name):
    # `index build --out idx1`, then `recommend --index idx1 --out idx1/vectors.npy` replaced the index's vectors
    # with the CSV (exit 0), and every later load said "idx1/vectors.npy: sha256 mismatch": only a folder named
    # `index` had its data files protected
    index = tmp_path / "idx1"
    index.mkdir()
    (index / "meta.json").write_text('{"meta_sha256": "x", "backend": "exact"}')
    (index / name).write_bytes(b"x")
    with pytest.raises(ConfigError, match=f"is a file of the index {str(index)!r}"):
        check_output_file(index / name)
    assert check_output_file(index / "recs.csv") == index / "recs.csv"


def test_out_onto_a_file_of_a_data_split_is_refused(run_dir, tmp_path, capsys):
    # `recommend --users all --history-from data/loo/train.csv data/loo/valid.csv --out data/loo/valid.csv`
    # replaced the split's validation file with the recommendations
    split = tmp_path / "loo"
    split.mkdir()
    (split / "split_report.json").write_text("{}")
    (split / "valid.csv").write_text("user_id,item_id\nu1,i1\n")
    assert _recommend(run_dir, split / "valid.csv") == 2
    assert (f"--out {split / 'valid.csv'}: is a file of the split {str(split)!r}, which writing there would "
            "damage; choose another file name") in capsys.readouterr().err
    assert (split / "valid.csv").read_text() == "user_id,item_id\nu1,i1\n"
    assert _recommend(run_dir, split / "recs.csv") == 0


def test_out_onto_an_earlier_file_replaces_it_atomically_and_says_so(run_dir, tmp_path, capsys):
    # a rerun onto the same FILE replaced it without a word; scripts rely on the replacing, so it stays
    out = tmp_path / "recs.csv"
    assert _recommend(run_dir, out) == 0
    assert "earlier file" not in capsys.readouterr().err  # a new file: nothing replaced
    inode = out.stat().st_ino
    out.write_text("old\n")
    assert _recommend(run_dir, out) == 0
    err = capsys.readouterr().err
    assert f"{out} held an earlier file: replaced it and its record {out}.json\n" in err
    assert _rows(out.read_text())[0] == HEADER
    assert out.stat().st_ino != inode  # a temporary renamed over it, never the old file truncated in place
    assert _recommend(run_dir, out, "-q") == 0
    assert capsys.readouterr().err == ""  # an information line: -q leaves it out
