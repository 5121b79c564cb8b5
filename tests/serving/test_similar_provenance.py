"""`similar --items ... --out FILE` writes FILE.json, as `recommend --users ... --out FILE` does (cli/provenance.py).

Review: `recommend`'s CSV said where it came from (run, index, k, selection) in a record beside it; `similar`'s CSV
of the same shape said nothing, so two similar-item files could not be told apart.
"""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from twotower.cli.main import main


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _record(out: Path) -> dict:
    return json.loads(Path(f"{out}.json").read_text(encoding="utf-8"))


def test_the_record_names_run_index_k_selection_and_output(run_dir, tmp_path) -> None:
    from twotower import __version__
    from twotower.pipeline.artifacts import TrainedRun

    out = tmp_path / "similar.csv"
    assert main(["-q", "similar", "--run", str(run_dir), "--items", "all", "--k", "4", "--out", str(out)]) == 0
    rec = _record(out)
    assert rec["format"] == 1 and rec["command"] == "twotower similar"
    assert rec["twotower_version"] == __version__ and rec["created"].endswith("+00:00")
    assert rec["run"] == {"path": str(run_dir.resolve()), "fingerprint": TrainedRun.load(run_dir).fingerprint()}
    assert rec["index"]["kind"] == "exact" and rec["index"]["path"] is None
    assert rec["k"] == 4 and rec["items"] == {"given": "all"} and rec["cold_similar"] == "semantic"
    assert rec["output"] == {"path": str(out), "sha256": _sha(out), "rows": 240, "items": 60}


def test_a_list_of_ids_is_its_count_and_digest_and_the_csv_is_what_stdout_gets(run_dir, tmp_path, capsys,
                                                                                 monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    argv = ["-q", "similar", "--run", str(run_dir), "--items", "i3,i1,i3", "--k", "2", "--exact",
            "--cold-similar", "item"]
    capsys.readouterr()
    assert main([*argv, "--out", "-"]) == 0
    printed = capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []  # `--out -`: no record
    assert main([*argv, "--out", "sim.csv"]) == 0
    assert (tmp_path / "sim.csv").read_text(encoding="utf-8") == printed
    rec = _record(tmp_path / "sim.csv")
    digest = hashlib.sha256(b'["i3","i1"]').hexdigest()  # the distinct ids, in order, as a compact JSON array
    assert rec["items"] == {"count": 2, "sha256": digest} and rec["cold_similar"] == "item"
    assert rec["index"] == {"kind": "exact", "path": None, "used": "exact search over 60 items (--exact)"}
    assert rec["output"]["rows"] == 4 and rec["output"]["items"] == 2


def test_an_approximate_index_is_named(run_dir, tmp_path) -> None:
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    assert main(["-q", "index", "build", "--run", str(run), "--index", "hnsw", "--ef-search", "24"]) == 0
    out = tmp_path / "ann.csv"
    assert main(["-q", "similar", "--run", str(run), "--items", "all", "--k", "3", "--out", str(out)]) == 0
    index = _record(out)["index"]
    assert index["kind"] == "approximate" and index["path"] == str(run / "index") and index["params"] == {"efSearch": 24}


def test_a_record_that_would_replace_a_file_of_the_run_is_refused_before_any_work(run_dir, capsys) -> None:
    before = (run_dir / "config.json").read_bytes()
    assert main(["similar", "--run", str(run_dir), "--items", "all", "--out", str(run_dir / "config")]) == 2
    err = capsys.readouterr().err
    assert f"--out's record {run_dir / 'config.json'}: is a file of the run" in err
    assert (run_dir / "config.json").read_bytes() == before and not (run_dir / "config").exists()


def test_a_failed_record_leaves_the_old_csv_and_record(run_dir, tmp_path, monkeypatch) -> None:
    """Both are written before either is moved: a failure while making the record replaces neither."""
    import twotower.cli.provenance as provenance

    out = tmp_path / "sim.csv"
    assert main(["-q", "similar", "--run", str(run_dir), "--items", "i1", "--k", "2", "--out", str(out)]) == 0
    old_csv, old_record = out.read_bytes(), Path(f"{out}.json").read_bytes()

    def boom(*a, **kw):  # noqa: ANN002, ANN003, ANN202
        raise RuntimeError("boom")

    monkeypatch.setattr(provenance, "similar_record", boom)
    with pytest.raises(RuntimeError, match="boom"):
        main(["-q", "similar", "--run", str(run_dir), "--items", "all", "--k", "3", "--out", str(out)])
    assert out.read_bytes() == old_csv and Path(f"{out}.json").read_bytes() == old_record
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sim.csv", "sim.csv.json"]  # no temporaries left
