"""A user tower that reads no history (``model.user.history=none``) exports no ``history`` input, yet export.json
gave ``history_len`` 50 and a ``pad_item``, as if the graph took a window padded with that row; they are null now,
and stay numbers for a tower that reads a history."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("onnxruntime")

import twotower as tt  # noqa: E402
from tests.export.test_onnx_export import N_ITEMS, _train  # noqa: E402


@pytest.mark.parametrize("history, reads", [("none", False), ("mean", True)])
def test_history_fields_only_for_a_history_input(tmp_path, history, reads) -> None:
    from twotower.export import export_onnx

    run = tt.TrainedRun.load(_train(tmp_path / "run", history, user_features=True))
    export_onnx(run, tmp_path / "onnx", check_users=10)
    meta = json.loads((tmp_path / "onnx" / "export.json").read_text())
    assert ("history" in meta["user_tower"]["inputs"]) is reads
    if reads:
        assert meta["history_len"] == 8 and meta["pad_item"] == N_ITEMS
    else:
        assert meta["user_tower"]["inputs"] == ["user_rows"]
        assert meta["history_len"] is None and meta["pad_item"] is None
