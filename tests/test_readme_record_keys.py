"""The README names every key of the records `recommend --out`, `similar --out` and `evaluate --csv` write.

A README walkthrough: recs.csv.json held `exclude_items` and `filters`, similar.csv.json `filters` and eval.csv.json
`segments`, `exclude_seen` and the EASE limits, none of which the README's description of those records named, so a
reader of a record could not tell from the docs what those keys meant.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.serving.tiny_run import build_tiny_run
from twotower.cli.main import main

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def _paragraph(start: str, end: str) -> str:
    """The README's text from ``start`` up to ``end``: one record's description."""
    i = README.index(start)
    return README[i:README.index(end, i)]


def _unnamed(record: dict, text: str) -> list[str]:
    """The record's top-level keys that ``text`` names neither as `key` nor as its flag `--key`."""
    return [k for k in record if f"`{k}`" not in text and f"`--{k.replace('_', '-')}`" not in text]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_run(tmp_path_factory.mktemp("readme_records"))


def test_every_key_of_the_recommend_record_is_in_the_readme(run_dir, tmp_path, capsys):
    out = tmp_path / "recs.csv"
    assert main(["-q", "recommend", "--run", str(run_dir), "--users", "all", "--k", "2", "--out", str(out)]) == 0
    record = json.loads(Path(f"{out}.json").read_text(encoding="utf-8"))
    assert {"filters", "exclude_items"} <= set(record)
    assert _unnamed(record, _paragraph("`recs.csv.json`: a record", "`similar --items ... --out similar.csv`")) == []


# what every record holds, described once in the recommend paragraph ("the same way", "too")
SHARED = {"format", "twotower_version", "created"}


def test_every_key_of_the_similar_record_is_in_the_readme(run_dir, tmp_path, capsys):
    out = tmp_path / "similar.csv"
    assert main(["-q", "similar", "--run", str(run_dir), "--items", "all", "--k", "2", "--out", str(out)]) == 0
    record = json.loads(Path(f"{out}.json").read_text(encoding="utf-8"))
    assert "filters" in record
    text = _paragraph("`similar --items ... --out similar.csv` writes", "`evaluate --csv eval.csv` writes")
    assert set(_unnamed(record, text)) <= SHARED


def test_every_key_of_the_evaluate_record_is_in_the_readme(run_dir, tmp_path, capsys):
    out = tmp_path / "eval.csv"
    assert main(["-q", "evaluate", "--run", str(run_dir), "--baselines", "popularity", "--ks", "2",
                 "--csv", str(out)]) == 0
    record = json.loads(Path(f"{out}.json").read_text(encoding="utf-8"))
    assert "segments" in record
    assert set(_unnamed(record, _paragraph("`evaluate --csv eval.csv` writes", "A k not below"))) <= SHARED


def test_every_key_of_a_log_jsonl_row_is_in_the_readme(run_dir):
    """log.jsonl's keys were documented nowhere (collapse_std aside), so `inbatch_accuracy` read as an in-batch
    accuracy under every loss: BPR's pairwise accuracy and the full softmax's over the catalogue included."""
    from twotower.training.epoch_line import ACCURACY_KIND

    rows = [json.loads(line) for line in (run_dir / "log.jsonl").read_text(encoding="utf-8").splitlines() if line]
    text = _paragraph("`log.jsonl` holds", "Training into a folder that holds an earlier run")
    keys = {key for row in rows for key in row if not key.startswith("valid_")}
    assert {"inbatch_accuracy", "accuracy_kind"} <= keys
    assert _unnamed(dict.fromkeys(keys), text) == [] and "`valid_" in text
    assert all(f'`"{kind}"`' in text for kind in ACCURACY_KIND.values())
