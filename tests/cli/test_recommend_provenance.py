"""`recommend --users ... --out FILE` writes FILE.json: what produced the recommendations.

Review: two recommendation files could not be told apart: nothing said which run, which index (exact, or which
ANN kind at which search setting), k, or which --exclude / --history-from files made them. The record beside the
CSV says so, with the sha256 of the CSV and of each input file; the CSV's bytes are those written before.
"""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from tests.serving.tiny_run import build_tiny_run
from twotower.cli.main import main


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_run(tmp_path_factory.mktemp("provenance"))


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _record(out: Path) -> dict:
    return json.loads(Path(f"{out}.json").read_text(encoding="utf-8"))


def test_the_record_names_run_index_k_selection_and_input_files(run_dir, tmp_path, capsys):
    from twotower import __version__
    from twotower.pipeline.artifacts import TrainedRun

    data = run_dir.parent / "data" / "interactions.csv"
    users = tmp_path / "users.csv"
    users.write_text("user_id\nu1\nu2\n")
    out = tmp_path / "recs.csv"
    assert main(["-q", "recommend", "--run", str(run_dir), "--users", str(users), "--k", "3", "--exclude", str(data),
                 "--history-from", str(data), "--out", str(out)]) == 0
    rec = _record(out)
    assert rec["run"] == {"path": str(run_dir.resolve()), "fingerprint": TrainedRun.load(run_dir).fingerprint()}
    assert rec["index"]["kind"] == "exact" and rec["index"]["path"] is None
    assert "no index built" in rec["index"]["used"]
    assert rec["k"] == 3 and rec["exclude_seen"] is True
    assert rec["users"] == {"file": {"path": str(users), "sha256": _sha(users)}}
    assert rec["exclude"] == rec["history_from"] == [{"path": str(data), "sha256": _sha(data)}]
    assert rec["output"] == {"path": str(out), "sha256": _sha(out), "rows": 6, "users": 2}
    assert rec["twotower_version"] == __version__ and rec["created"].endswith("+00:00")
    assert rec["format"] == 1 and rec["command"] == "twotower recommend"


def test_the_csv_is_unchanged_by_the_record(run_dir, tmp_path, capsys, monkeypatch):
    """The file's bytes are what `--out -` prints (users' scripts read them), and `-` leaves no record."""
    monkeypatch.chdir(tmp_path)
    argv = ["-q", "recommend", "--run", str(run_dir), "--users", "u1,u2,u3", "--k", "4", "--no-exclude-seen"]
    capsys.readouterr()
    assert main([*argv, "--out", "-"]) == 0
    printed = capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []
    assert main([*argv, "--out", "recs.csv"]) == 0
    assert (tmp_path / "recs.csv").read_text(encoding="utf-8") == printed
    rec = _record(tmp_path / "recs.csv")
    assert rec["users"] == {"given": "u1,u2,u3"} and rec["exclude"] == [] and rec["history_from"] is None
    assert rec["exclude_seen"] is False


def test_an_approximate_index_is_named_with_its_search_setting_and_exact_says_so(run_dir, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    assert main(["-q", "index", "build", "--run", str(run), "--index", "hnsw", "--ef-search", "24"]) == 0
    meta = json.loads((run / "index" / "meta.json").read_text())
    out = tmp_path / "ann.csv"
    assert main(["-q", "recommend", "--run", str(run), "--users", "all", "--k", "5", "--out", str(out)]) == 0
    index = _record(out)["index"]
    assert index["kind"] == "approximate" and index["path"] == str(run / "index")
    assert index["backend"] == "faiss" and index["factory"].startswith("HNSW") and index["params"] == {"efSearch": 24}
    assert index["meta_sha256"] == meta["meta_sha256"] and index["created"] == meta["created"]
    exact = tmp_path / "exact.csv"
    assert main(["-q", "recommend", "--run", str(run), "--users", "all", "--k", "5", "--exact", "--out", str(exact)]) == 0
    assert _record(exact)["index"] == {"kind": "exact", "path": None, "used": "exact search over 60 items (--exact)"}
    assert _record(out)["output"]["users"] == 40


def test_a_record_that_would_replace_a_file_of_the_run_is_refused_before_any_work(run_dir, capsys):
    before = (run_dir / "config.json").read_bytes()
    assert main(["recommend", "--run", str(run_dir), "--users", "u1", "--out", str(run_dir / "config")]) == 2
    err = capsys.readouterr().err
    assert f"--out's record {run_dir / 'config.json'}: is a file of the run" in err
    assert (run_dir / "config.json").read_bytes() == before and not (run_dir / "config").exists()


def test_a_long_comma_list_of_users_over_an_existing_output_is_no_crash(run_dir, tmp_path):
    # the --out checks asked Path(users).is_file() of the id list: ENAMETOOLONG, a traceback
    out = tmp_path / "recs.csv"
    out.write_text("old\n")
    users = ",".join(["u1", "u2"] * 300)  # 1,799 characters: longer than any file name
    assert main(["-q", "recommend", "--run", str(run_dir), "--users", users, "--k", "2", "--out", str(out)]) == 0
    assert _record(out)["users"] == {"given": users}
    assert out.read_text().startswith("user_id,")
