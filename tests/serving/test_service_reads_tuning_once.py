"""RecommenderService.load reads the index's tune.json once: the recall /readyz reports is that of the record the
index was checked against (it was read a second time after the index opened, so a rebuild in between could pair
one build's index with the next build's recall)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.serving.tiny_run import build_tiny_run
from twotower.cli.main import main


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = build_tiny_run(tmp_path_factory.mktemp("tuning_once"))
    assert main(["index", "build", "--run", str(run), "--index", "IVF2,Flat", "--target-recall", "1.0",
                 "--queries", "10"]) == 0
    return run


def _count_reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    import twotower.pipeline.recommend as rec

    reads: list[Path] = []
    real = rec.read_tuning
    monkeypatch.setattr(rec, "read_tuning", lambda d: reads.append(Path(d)) or real(d))
    return reads


def test_load_reads_the_tuning_record_once_and_reports_its_recall(run_dir, monkeypatch):
    pytest.importorskip("faiss")
    from twotower.serving import RecommenderService

    reads = _count_reads(monkeypatch)
    service = RecommenderService.load(run_dir, allow_low_recall=True)
    assert reads == [run_dir / "index"]  # was read twice: in open_run_index, then by index_recall
    tune = json.loads((run_dir / "index" / "tune.json").read_text())
    assert service.index_recall == {"recall": tune["chosen"]["recall"], "k": 10, "queries": 10, "target": 1.0,
                                    "met_target": tune["met_target"]}


def test_exact_search_reads_no_tuning_record(run_dir, monkeypatch):
    from twotower.serving import RecommenderService

    reads = _count_reads(monkeypatch)
    assert RecommenderService.load(run_dir, exact=True).index_recall is None and reads == []
