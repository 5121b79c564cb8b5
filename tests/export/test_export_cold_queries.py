"""ONNX export of a dual-head run: its cold items' similar-items queries (semantic head) travel with it.

item_embeddings.npy holds a cold item's mixed vector, whose collaborative half every cold item shares; searched
with it, the export's consumer got other lists than POST /similar-items, which queries by the semantic head.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from tests.serving.cold_runs import dual_head_with_cold  # noqa: E402
from tests.serving.tiny_run import build_tiny_run  # noqa: E402
from twotower.export.onnx import export_onnx  # noqa: E402
from twotower.pipeline.similar import similar  # noqa: E402

COLD = ("i7", "i11", "i12")


def _dual_cold_run(run_dir):
    return dual_head_with_cold(run_dir, COLD)


def test_cold_items_similar_lists_from_the_export_equal_the_service(tmp_path) -> None:
    run = _dual_cold_run(build_tiny_run(tmp_path / "tiny"))
    out = tmp_path / "onnx"
    export_onnx(run, out, check_users=5)
    meta = json.loads((out / "export.json").read_text())["cold_similar"]
    ids = json.loads((out / "item_ids.json").read_text())
    assert sorted(ids[r] for r in meta["item_rows"]) == sorted(COLD)
    queries = np.load(out / meta["file"])
    vectors = np.load(out / "item_embeddings.npy")
    expected = similar(run, list(COLD), k=5)
    for j, row in enumerate(meta["item_rows"]):
        s = vectors @ queries[j]
        s[row] = -np.inf
        got = [ids[int(t)] for t in np.argsort(-s, kind="stable")[:5]]
        assert got == [it["item_id"] for it in expected[list(COLD).index(ids[row])]]


def test_export_command_names_the_cold_queries_file_it_wrote(tmp_path, monkeypatch, capsys) -> None:
    """The summary line and --help named item_embeddings.npy only: a reader of them searched a cold item by its row
    there (the shared collaborative half) instead of by its query in cold_similar_queries.npy."""
    from twotower.cli.main import main
    from twotower.pipeline.artifacts import TrainedRun

    run_dir = build_tiny_run(tmp_path / "tiny")
    run = _dual_cold_run(run_dir)
    monkeypatch.setattr(TrainedRun, "load", classmethod(lambda cls, d, **kw: run))
    assert main(["export", "--run", str(run_dir), "--out", str(tmp_path / "onnx"), "--check-users", "5"]) == 0
    said = capsys.readouterr().out
    assert f"cold_similar_queries.npy holds the similar-items queries of {len(COLD)} items" in said
    main(["export", "--help"])
    assert "cold_similar_queries.npy" in capsys.readouterr().out
