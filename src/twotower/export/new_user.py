"""``new_user_tower.onnx``: the user tower of a feature run (user features, no user ID) with a new user's encoded
feature values as inputs, and in export.json the vocabularies and scaling that encode them.

``user_tower.onnx`` reads the features of the users of training from its own table by ``user_rows``; a user not in
training (``new_user_row``) is read with every feature missing, so ``recommend --history H --user-features
'{"age": 25}'`` had no ONNX equivalent. This graph takes the feature values instead of a row::

    user_categorical  int64 [B, C]      per categorical column: 1 + the value's position in its vocabulary, 0 missing
                                        or unknown
    user_multi_<j>    int64 [B, M_j]    per multi-valued column j: the values' codes (as above), padded with 0
    user_numeric      float32 [B, 2N]   (value - mean) / std per numeric column (0 when missing), then one missing
                                        flag per column (1 missing, 0 present)
    history           int64 [B, L]      as user_tower.onnx's (towers that read a history)

each only when the tower has such columns. export.json's ``new_user_tower.encoding`` holds what encodes them (the
run's ``features/users.json``, the encoder ``recommend --user-features`` and ``POST /recommend`` use).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

__all__ = ["NEW_USER_FILE", "export_new_user_tower", "check_new_user_tower", "new_user_tower_meta"]

NEW_USER_FILE = "new_user_tower.onnx"

_ENCODING_MEANING = {
    "categorical": "user_categorical[:, j] is the j-th column of categorical: 1 + the position of the value in its "
                   "list (the value as text, stripped; an integral number without '.0'), 0 for a missing value or "
                   "one not in the list",
    "multi": "user_multi_<j> is the j-th column of multi: the codes (1 + position in values) of the value's parts "
             "(a list, or one string split at separator; parts stripped, repeats and parts not in values left out), "
             "every one of them (the width is free: max_len is only the training table's longest list), padded on "
             "the right with 0 to the batch's longest; all 0 for none",
    "numeric": "user_numeric[:, j] is (value - mean) / std of the j-th column of numeric (0 when missing or not a "
               "number) and user_numeric[:, N + j] its missing flag (1.0 missing, 0.0 given), N columns",
}


def _input_names(block: Any, uses_history: bool) -> list[str]:
    names = ["user_categorical"] if len(block.cat_embs) else []
    names += [f"user_multi_{j}" for j in range(len(block.multi_embs))]
    names += ["user_numeric"] if block.n_numeric else []
    return names + (["history"] if uses_history else [])


class _NewUserExport(nn.Module):
    """``UserTower.forward(None, history, features=...)`` with the feature tensors as graph inputs; the history read
    as ``_UserExport`` reads it (a padding column in front, cut to the newest ``max_len``)."""

    def __init__(self, tower: nn.Module, names: list[str], max_len: int) -> None:
        super().__init__()
        self.tower = tower
        self.names = names
        self.max_len = max_len

    def forward(self, *inputs: Tensor) -> Tensor:
        from twotower.export.onnx import _refuse_negative

        given = dict(zip(self.names, inputs))
        block = self.tower.features
        first = inputs[0]
        B = first.shape[0]
        cat = _refuse_negative(given["user_categorical"]) if "user_categorical" in given else \
            torch.zeros((B, 0), dtype=torch.long)
        multi = [_refuse_negative(given[f"user_multi_{j}"]) for j in range(len(block.multi_embs))]
        num = given["user_numeric"] if "user_numeric" in given else torch.zeros((B, 0))
        history = None
        if self.tower.uses_history:
            history = nn.functional.pad(_refuse_negative(given["history"]), (1, 0), value=int(self.tower.n_items))
            history = history[:, -self.max_len :]
        return self.tower(None, history, features=(cat, multi, num))


def export_new_user_tower(out: Path, tower: nn.Module, max_len: int, history: Tensor) -> list[str]:
    """Write ``new_user_tower.onnx`` for ``tower`` (an exportable copy: no EmbeddingBag); its input names."""
    from twotower.export.onnx import _bool_eyelike_to_float, _onnx_export

    block = tower.features
    names = _input_names(block, tower.uses_history)
    cat, multi, num = block.missing_rows(2)
    sample = {"user_categorical": cat, "user_numeric": num, "history": history[:2],
              **{f"user_multi_{j}": torch.ones((2, 2), dtype=torch.long) for j in range(len(multi))}}
    dynamic: dict[str, Any] = {"_out": "user_vectors", "user_vectors": {0: "batch"}}
    for n in names:
        dynamic[n] = {0: "batch", 1: "history_len"} if n == "history" else \
            {0: "batch", 1: f"{n}_len"} if n.startswith("user_multi_") else {0: "batch"}
    with torch.no_grad():
        _onnx_export(_NewUserExport(tower, names, max_len), tuple(sample[n] for n in names), out / NEW_USER_FILE,
                     names, dynamic)
    _bool_eyelike_to_float(out / NEW_USER_FILE)  # a transformer's causal mask, as in user_tower.onnx
    return names


def new_user_tower_meta(run: Any, names: list[str]) -> dict[str, Any]:
    """export.json's ``new_user_tower``: the file, its inputs and the encoding of a new user's feature values."""
    enc = run.user_encoder.to_dict()
    spec = run.user_encoder.spec
    meaning = {
        "user_categorical": "int64 [batch, C]: the categorical columns' codes (encoding.categorical, in its order)",
        "user_numeric": "float32 [batch, 2N]: scaled numeric columns then their missing flags (encoding.numeric)",
        "history": "as user_tower.input_meaning.history (an empty history: 0 columns)",
    }
    for j, c in enumerate(spec.multi):
        meaning[f"user_multi_{j}"] = f"int64 [batch, length]: the codes of multi-valued column {c!r} (encoding.multi)"
    return {
        "file": NEW_USER_FILE, "inputs": names, "output": "user_vectors",
        "input_meaning": {n: meaning[n] for n in names},
        "encoding": {
            "categorical": {c: enc["categorical"][c] for c in spec.categorical},
            "multi": {c: enc["multi"][c] for c in spec.multi},
            "separator": spec.separator,
            "numeric": {c: enc["numeric"][c] for c in spec.numeric},
            "meaning": {k: v for k, v in _ENCODING_MEANING.items() if getattr(spec, k)},
        },
    }


def check_new_user_tower(run: Any, out: Path, users: np.ndarray) -> float:
    """The largest difference between onnxruntime's ``new_user_tower.onnx`` and PyTorch's tower given the same
    feature values (the feature rows of ``users``, and every feature missing), on their histories (full, half,
    empty)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(out / NEW_USER_FILE), opts, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    model = run.model.eval()
    tower = model.user_tower
    L, pad = int(model.history_len), int(model.pad_item)
    rows = torch.as_tensor(users, dtype=torch.long)
    worst = 0.0
    for cat, multi, num in (tower.features.rows(rows), tower.features.missing_rows(len(users))):
        for length in (L, max(1, L // 2), 0):
            hist = run.history.last_windows(users, length, pad).astype(np.int64) if length else \
                np.zeros((len(users), 0), np.int64)
            window = np.pad(hist, ((0, 0), (max(0, L - length), 0)), constant_values=pad)[:, -L:]
            feed = {"user_categorical": cat.numpy(), "user_numeric": num.numpy().astype(np.float32), "history": hist,
                    **{f"user_multi_{j}": m.numpy() for j, m in enumerate(multi)}}
            with torch.no_grad():
                ref = tower(None, torch.as_tensor(window) if tower.uses_history else None,
                            features=(cat, multi, num)).numpy()
            got = sess.run(None, {n: feed[n] for n in names})[0]
            worst = max(worst, float(np.abs(got - ref).max()))
    return worst
