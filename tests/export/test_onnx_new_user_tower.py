"""``new_user_tower.onnx``: a new user's feature values as inputs, encoded with what export.json's
``new_user_tower.encoding`` holds, gives the vector and scores of ``recommend --history H --user-features ...``.

``user_tower.onnx`` reads the features of training's users from its own table by row, and ``new_user_row`` reads
every one as missing, so such a user had no ONNX equivalent. The encoder below is written from export.json alone,
as a caller without twotower would write it."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("onnxruntime")

import twotower as tt  # noqa: E402
from tests.export.test_onnx_export import _train  # noqa: E402


def _encode(enc: dict, user: dict, names: list[str]) -> dict[str, np.ndarray]:
    """One user's feed from export.json's encoding (its meaning lines, followed as written)."""
    def code(values: list[str], v) -> int:
        text = str(int(v)) if isinstance(v, (int, float)) and float(v).is_integer() else str(v).strip()
        return values.index(text) + 1 if text in values else 0

    feed: dict[str, np.ndarray] = {}
    if enc["categorical"]:
        feed["user_categorical"] = np.array([[code(c, user.get(col)) if user.get(col) is not None else 0
                                              for col, c in enc["categorical"].items()]], np.int64)
    for j, (col, m) in enumerate(enc["multi"].items()):
        parts = user.get(col) or []
        parts = parts.split(enc["separator"]) if isinstance(parts, str) else parts
        codes = [c for c in dict.fromkeys(code(m["values"], p) for p in parts) if c]  # every one: the width is free
        feed[f"user_multi_{j}"] = np.array([codes + [0] * (m["max_len"] - len(codes))], np.int64)
    if enc["numeric"]:
        n = len(enc["numeric"])
        row = np.zeros((1, 2 * n), np.float32)
        for j, (col, s) in enumerate(enc["numeric"].items()):
            if user.get(col) is None:
                row[0, n + j] = 1.0
            else:
                row[0, j] = (float(user[col]) - s["mean"]) / s["std"]
        feed["user_numeric"] = row
    return {k: v for k, v in feed.items() if k in names}


@pytest.fixture(scope="module")
def featured_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("new_user_tower")
    users = pd.DataFrame({"user_id": [f"u{u}" for u in range(1100)],
                          "gender": ["F" if u % 3 else "M" for u in range(1100)],
                          "age": [20 + u % 50 for u in range(1100)],
                          "tags": ["a|b" if u % 2 else ("c" if u % 5 else "") for u in range(1100)]})
    users.to_csv(root / "more_users.csv", index=False)
    path = json.dumps(str(root / "more_users.csv"))
    # gender categorical, tags multi-valued, age numeric
    return _train(root / "run", "recency", user_features=False,
                  extra=(f"data.users={path}", "data.user_categorical=gender", "data.user_multi=tags", "data.user_numeric=age",
                         "train.epochs=1"))


def test_a_new_users_features_fed_to_new_user_tower_give_recommends_scores(featured_run, tmp_path) -> None:
    import onnxruntime as ort

    from twotower.export import export_onnx

    run = tt.TrainedRun.load(featured_run)
    out = tmp_path / "onnx"
    report = export_onnx(run, out, check_users=20)
    meta = json.loads((out / "export.json").read_text())
    tower = meta["new_user_tower"]
    assert tower["file"] == "new_user_tower.onnx" and tuple(tower["inputs"]) == report.new_user_inputs
    assert tower["inputs"] == ["user_categorical", "user_multi_0", "user_numeric", "history"]
    assert meta["check"]["max_abs_diff_new_user"] <= 1e-5
    assert "new_user_tower.onnx" in meta["user_tower"]["new_user_features"]

    sess = ort.InferenceSession(str(out / "new_user_tower.onnx"), providers=["CPUExecutionProvider"])
    row = {x: r for r, x in enumerate(json.loads((out / "item_ids.json").read_text()))}
    items = np.load(out / "item_embeddings.npy")
    history = ["i3", "i7", "i11"]
    # "a|b|c": three values where the table's longest list has two (export.json said "at most max_len", and a deployer
    # who cut them got other scores than recommend, which reads every value)
    assert tower["encoding"]["multi"]["tags"]["max_len"] == 2 and "every one of them" in tower["encoding"]["meaning"]["multi"]
    for user in ({"gender": "M", "tags": "a|c", "age": 25}, {"gender": "F", "tags": ["b", "zz"], "age": 61.5},
                 {"gender": "X"}, {"gender": "M", "tags": "a|b|c"}):
        feed = _encode(tower["encoding"], user, tower["inputs"])
        feed["history"] = np.array([[row[i] for i in history]], np.int64)
        vec = sess.run(None, feed)[0]
        # the PyTorch tower given the run's own encoding of the same values
        import torch

        with torch.no_grad():
            ref = run.model.user_tower(None, torch.as_tensor(feed["history"]),
                                       features=run.encode_user_features([user])).numpy()
        assert np.abs(vec - ref).max() <= 1e-5
        onnx = dict(zip(row, (vec @ items.T)[0].tolist()))
        want = tt.recommend(run, history=history, user_features=user, k=20, exact=True)[0]
        assert all(abs(onnx[r["item_id"]] - r["score"]) <= 1e-4 for r in want)
    # the empty history: zero columns, as user_tower.onnx reads it
    feed = _encode(tower["encoding"], {"gender": "M"}, tower["inputs"]) | {"history": np.zeros((1, 0), np.int64)}
    onnx = dict(zip(row, (sess.run(None, feed)[0] @ items.T)[0].tolist()))
    want = tt.recommend(run, history=[], user_features={"gender": "M"}, k=20, exact=True)[0]
    assert all(abs(onnx[r["item_id"]] - r["score"]) <= 1e-4 for r in want)


def test_a_tower_without_user_features_writes_no_new_user_tower(tmp_path) -> None:
    from twotower.export import export_onnx

    run = tt.TrainedRun.load(_train(tmp_path / "plain", "mean", user_features=False))
    export_onnx(run, tmp_path / "onnx", check_users=10)
    assert "new_user_tower" not in json.loads((tmp_path / "onnx" / "export.json").read_text())
    assert not (tmp_path / "onnx" / "new_user_tower.onnx").exists()
