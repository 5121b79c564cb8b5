"""``new_user_tower.onnx`` (a new user's feature values and history, no user ID) on the histories a caller without
twotower sends for a user with no items yet and with one: all padding (at the tower's width, narrower, wider, zero
columns) and one item (alone, or right-aligned among padding). onnxruntime must give the PyTorch tower's vector for
each: a pooled tower's empty history pools to zeros, a sequence tower's reads its fitted ``empty`` state, and the
item-item term reads no padding."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

import torch  # noqa: E402

import twotower as tt  # noqa: E402
from tests.export.test_onnx_export import _train  # noqa: E402


@pytest.mark.parametrize("history,extra", [
    ("mean", ("model.item_item.weights=[0.5]",)),  # pooled, with the item-item term (it reads the history too)
    ("transformer", ()),  # a sequence tower: an all-padding row reads the `empty` state fitted after training
])
def test_new_user_tower_onnx_equals_pytorch_for_an_empty_and_a_one_item_history(tmp_path, history, extra) -> None:
    import onnxruntime as ort

    from twotower.export import export_onnx

    run = tt.TrainedRun.load(_train(tmp_path / "run", history, user_features=True,
                                    extra=("model.user.use_id=false", *extra)))
    tower = run.model.eval().user_tower
    if history == "transformer":
        assert torch.count_nonzero(tower.empty) > 0  # the premise: the empty row has a state of its own
    else:
        assert tower.item_item is not None and float(tower.item_item.weight) == 0.5
    export_onnx(run, tmp_path / "onnx", check_users=10)
    sess = ort.InferenceSession(str(tmp_path / "onnx" / "new_user_tower.onnx"), providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    assert names == ["user_numeric", "history"]
    L, pad = int(run.model.history_len), int(run.model.pad_item)
    one = np.array([[3], [5], [3]], np.int64)  # [B, 1]
    B = len(one)
    padded = np.pad(one, ((0, 0), (L - 1, 0)), constant_values=pad)  # [B, L] right-aligned, as user_tower.onnx's
    empty = np.full((B, L), pad, np.int64)
    histories = {  # what is fed -> the window PyTorch reads
        "zero columns": (np.zeros((B, 0), np.int64), empty), "all padding": (empty, empty),
        "one padding column": (empty[:, :1], empty), "all padding, wider": (np.full((B, L + 3), pad, np.int64), empty),
        "one item": (one, padded), "one item among padding": (padded, padded),
    }
    # a row's features (age given) and every feature missing
    for cat, multi, num in (tower.features.rows(torch.as_tensor([0, 1, 2])), tower.features.missing_rows(B)):
        vectors = {}
        for what, (fed, window) in histories.items():
            with torch.no_grad():
                ref = tower(None, torch.as_tensor(window), features=(cat, multi, num)).numpy()
            got = sess.run(None, {"user_numeric": num.numpy().astype(np.float32), "history": fed})[0]
            np.testing.assert_allclose(got, ref, atol=1e-5, rtol=0, err_msg=what)
            vectors[what] = got
        assert np.abs(vectors["one item"] - vectors["all padding"]).max() > 1e-3  # the history is read
