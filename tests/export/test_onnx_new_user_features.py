"""What a new user with features can feed an ONNX export: the graph reads the known users' features from its own
table by ``user_rows``, and ``new_user_row`` reads every feature as missing, so a new user's feature values have no
input. export.json said nothing of it: a deployer fed ``new_user_row`` for a user with features and got other
scores than ``recommend --history H --user-features ...``. export.json now names the columns
(``user_tower.user_features``) and says so (``new_user_features``); what it says is checked against ``tt.recommend``."""
from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

import twotower as tt  # noqa: E402
from tests.export.test_onnx_export import _train  # noqa: E402


def _scores(lst: list[dict]) -> dict[str, float]:
    return {r["item_id"]: r["score"] for r in lst}


def test_export_json_says_a_new_users_features_are_no_input(tmp_path) -> None:
    import onnxruntime as ort

    from twotower.export import export_onnx

    run = tt.TrainedRun.load(_train(tmp_path / "pooled", "recency", user_features=True))
    out = tmp_path / "onnx"
    export_onnx(run, out, check_users=10)
    tower = json.loads((out / "export.json").read_text())["user_tower"]
    assert tower["user_features"] == ["age"]
    assert tower["new_user_features"].startswith("not an input") and "age" in tower["new_user_features"]
    assert all(name in ("user_rows", "history") for name in tower["inputs"])  # indeed no feature input

    history = ["i3", "i7", "i11"]
    row = {x: r for r, x in enumerate(json.loads((out / "item_ids.json").read_text()))}
    feed = {"history": np.array([[row[i] for i in history]], np.int64),
            "user_rows": np.array([tower["new_user_row"]], np.int64)}
    user = ort.InferenceSession(str(out / "user_tower.onnx"), providers=["CPUExecutionProvider"]).run(None, feed)[0]
    onnx = dict(zip(row, (user @ np.load(out / "item_embeddings.npy").T)[0].tolist()))

    plain = _scores(tt.recommend(run, history=history, k=20, exact=True)[0])  # as export.json says: these scores
    assert all(abs(onnx[i] - s) <= 1e-4 for i, s in plain.items())
    featured = _scores(tt.recommend(run, history=history, user_features={"age": 25}, k=20, exact=True)[0])
    assert any(abs(onnx[i] - s) > 1e-4 for i, s in featured.items())  # ... and not these: no input carries age


def test_a_tower_without_user_features_says_none(tmp_path) -> None:
    from twotower.export import export_onnx

    run = tt.TrainedRun.load(_train(tmp_path / "plain", "recency", user_features=False))
    export_onnx(run, tmp_path / "onnx", check_users=10)
    tower = json.loads((tmp_path / "onnx" / "export.json").read_text())["user_tower"]
    assert tower["user_features"] == [] and tower["new_user_features"] is None
