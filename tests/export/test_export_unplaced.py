"""ONNX export of a run with items the model cannot place: export.json names them.

Items x0..x3 of the tiny run are never in training and its item tower reads only the item ID: their rows of
item_embeddings.npy are the zeroed ID embedding's tower vector. POST /similar-items answers none for them, with a
warning; the export said nothing, so its consumer searched by those rows and got lists ranked by nothing learnt.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from tests.serving.tiny_run import build_tiny_run  # noqa: E402
from twotower.export.onnx import export_onnx  # noqa: E402
from twotower.pipeline.artifacts import TrainedRun  # noqa: E402

UNPLACED = ["x0", "x1", "x2", "x3"]


@pytest.fixture(scope="module")
def unplaced_export(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("unplaced_export")
    run = TrainedRun.load(build_tiny_run(tmp / "tiny", unplaced=4))
    export_onnx(run, tmp / "onnx", check_users=5)
    return run, tmp / "onnx"


def test_export_json_names_the_items_the_model_cannot_place(unplaced_export) -> None:
    _, out = unplaced_export
    meta = json.loads((out / "export.json").read_text())
    ids = json.loads((out / "item_ids.json").read_text())
    assert [ids[r] for r in meta["unplaced"]["item_rows"]] == UNPLACED
    assert "cannot place them" in meta["unplaced"]["meaning"]


def test_onnx_item_tower_gives_them_the_served_vector(unplaced_export) -> None:
    import onnxruntime as ort

    run, out = unplaced_export
    rows = np.asarray(json.loads((out / "export.json").read_text())["unplaced"]["item_rows"], np.int64)
    got = ort.InferenceSession(str(out / "item_tower.onnx"), providers=["CPUExecutionProvider"]).run(
        None, {"item_rows": rows})[0]
    served = run.item_embeddings()[rows]
    assert np.abs(got - served).max() <= 1e-5


def test_a_run_without_them_has_no_entry(tmp_path) -> None:
    run = TrainedRun.load(build_tiny_run(tmp_path / "tiny"))
    export_onnx(run, tmp_path / "onnx", check_users=5)
    meta = json.loads((tmp_path / "onnx" / "export.json").read_text())
    assert "unplaced" not in meta and "untrained_history" not in meta


def test_export_json_names_the_history_items_to_leave_out(unplaced_export) -> None:
    """The exported user tower reads a history row as given, and x0..x3's rows of its history table were never
    trained: `recommend --history` leaves them out, and export.json's untrained_history lists them so that a
    consumer does the same (the graph fed the history without them gives the CLI's vector for the history with
    them)."""
    import onnxruntime as ort

    run, out = unplaced_export
    meta = json.loads((out / "export.json").read_text())
    ids = json.loads((out / "item_ids.json").read_text())
    left_out = meta["untrained_history"]["item_rows"]
    assert [ids[r] for r in left_out] == UNPLACED and "leave them out" in meta["untrained_history"]["meaning"]
    assert "untrained_history" in meta["user_tower"]["input_meaning"]["history"]
    given = [run.item_vocab.index(i) for i in ("x0", "i1", "x2", "i2")]
    feed = {"history": np.asarray([[r for r in given if r not in set(left_out)]], np.int64)}
    if "user_rows" in meta["user_tower"]["inputs"]:
        feed["user_rows"] = np.asarray([meta["user_tower"]["new_user_row"]], np.int64)
    got = ort.InferenceSession(str(out / "user_tower.onnx"), providers=["CPUExecutionProvider"]).run(None, feed)[0]
    assert np.abs(got - run.history_vectors([np.asarray(given, np.int64)])).max() <= 1e-5
