"""bench/recbole_gru4rec.py's harness around RecBole's model: RecBole's prefix augmentation, train-only input
histories at scoring time with RecBole's padding column dropped, early stopping on validation, arguments
checked before any work. RecBole itself is not a dependency: a stand-in with its model interface is used."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from twotower.models.history import UserSequences

@pytest.fixture
def rb(bench: Any) -> Any:
    return bench("recbole_gru4rec")


def _seqs(rows: list[list[int]]) -> UserSequences:
    users = np.concatenate([np.full(len(r), u) for u, r in enumerate(rows)])
    items = np.concatenate([np.asarray(r) for r in rows])
    return UserSequences.from_arrays(users, items, np.arange(len(items)), len(rows))


def test_prefix_examples_are_recboles_augmentation(rb: Any) -> None:
    seqs = _seqs([[4, 2, 7, 1], [3], [5, 6]])
    x, lens, y = rb.prefix_examples(seqs, 3, max_len=2)
    # user 0: [4]->2, [4,2]->7, [2,7]->1 (the last 2 only); user 1 none; user 2: [5]->6; ids shifted by one
    assert x.tolist() == [[5, 0], [5, 3], [3, 8], [6, 0]]
    assert lens.tolist() == [1, 2, 2, 1]
    assert y.tolist() == [3, 8, 2, 7]


class _Interaction(dict):
    pass


class _StandIn(torch.nn.Module):
    """RecBole's sequential-model interface over a mean of item embeddings (row 0: padding)."""

    def __init__(self, config: dict, dataset: Any) -> None:
        super().__init__()
        self.n = dataset.num(config["ITEM_ID_FIELD"])
        self.emb = torch.nn.Embedding(self.n, config["embedding_size"], padding_idx=0)
        self.seen: list[tuple[list[list[int]], list[int]]] = []

    def _user(self, inter: dict) -> torch.Tensor:
        seq, lens = inter["item_id_list"], inter["item_length"]
        return self.emb(seq).sum(1) / lens.unsqueeze(1)

    def calculate_loss(self, inter: dict) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(self._user(inter) @ self.emb.weight.T, inter["item_id"])

    def full_sort_predict(self, inter: dict) -> torch.Tensor:
        self.seen.append((inter["item_id_list"].tolist(), inter["item_length"].tolist()))
        return self._user(inter) @ self.emb.weight.T  # [U, n_items + 1]


class _Prep:
    def __init__(self, seqs: UserSequences, n_items: int) -> None:
        self.train_seqs, self.n_users, self.n_items = seqs, seqs.n_users, n_items


def test_fit_scores_train_histories_and_keeps_the_best_validation_epoch(rb: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import twotower.pipeline.experiment as experiment

    seqs = _seqs([[0, 1, 2, 0, 1, 2], [2, 1, 0, 2, 1], [1, 2]])
    prep = _Prep(seqs, n_items=3)
    curve = iter([0.1, 0.3, 0.2, 0.25, 0.2, 0.9])  # best at epoch 2, then 3 epochs without a better one
    scored: list[np.ndarray] = []

    def fake_eval(prep_: Any, scorers: dict, *, split: str = "test", ks: tuple = (10,)) -> dict:
        (name, scorer), = scorers.items()
        scored.append(scorer.score(np.arange(3)))
        return {name: {"NDCG@10": next(curve)}}

    monkeypatch.setattr(experiment, "evaluate_scorers", fake_eval)
    settings = {**rb.RECBOLE_DEFAULTS, "embedding_size": 4, "stopping_step": 3, "MAX_ITEM_LIST_LENGTH": 3,
                "train_batch_size": 4}
    scorer, info = rb.fit_gru4rec(prep, settings, 0, _StandIn, _Interaction)
    assert info["best_epoch"] == 2 and info["valid"] == 0.3 and len(info["history"]) == 5  # stopped after epoch 5
    assert info["examples"] == 5 + 4 + 1
    assert scored[0].shape == (3, 3)  # RecBole's padding column dropped: one column per item
    seq, lens = scorer.model.seen[0]
    assert seq == [[1, 2, 3], [1, 3, 2], [2, 3, 0]] and lens == [3, 3, 2]  # the last 3 train items, ids + 1
    # the model handed back is the best epoch's, not the last one's
    final = scorer.score(np.arange(3))
    assert not np.allclose(final, scored[-1]) and np.allclose(final, scored[1])


def test_arguments_are_checked_before_recbole_or_the_data(rb: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_work(*_: object) -> None:
        raise AssertionError("work started before the arguments were checked")

    monkeypatch.setattr(rb, "_import_recbole", no_work)
    for argv, msg in ((["--set", "hiden_size=256"], "KEY one of"), (["--set", "hidden_size=wide"], "takes an integer"),
                      (["--seeds", "4,x"], "a comma list of integers"),
                      (["--set", "epochs=0"], r"^error: --set epochs: must be more than 0, got 0$"),
                      (["--set", "epochs=0.5"], "epochs takes an integer"),  # was taken as 0
                      (["--set", "dropout_prob=1"], r"^error: --set dropout_prob: must be at least 0 and less than 1, got 1$"),
                      (["--set", "loss_type=BPR"], "only CE"), (["--json", str(tmp_path)], "is a folder")):
        with pytest.raises(SystemExit, match=msg):
            rb.main(argv)


@pytest.mark.parametrize("setting, msg", [
    ("learning_rate=inf", "--set learning_rate: must be a finite number, got inf"),  # was taken: NaN weights
    ("weight_decay=inf", "--set weight_decay: must be a finite number, got inf"),  # was taken
    ("epochs=inf", "--set epochs: must be a finite number, got inf"),  # was an OverflowError traceback
    ("learning_rate=nan", "--set learning_rate: must be more than 0, got nan"),
])
def test_a_setting_that_is_not_finite_is_refused_as_every_bench_flag(rb: Any, monkeypatch: pytest.MonkeyPatch,
                                                                     setting: str, msg: str) -> None:
    monkeypatch.setattr(rb, "_import_recbole", lambda *_: pytest.fail("work started before the arguments were checked"))
    with pytest.raises(SystemExit) as exited:
        rb.main(["--set", setting])
    assert exited.value.code == f"error: {msg}"


def test_missing_recbole_is_one_line_naming_the_install(rb: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "recbole", None)  # import of it fails as if not installed
    with pytest.raises(SystemExit, match="--recbole-path"):
        rb._import_recbole(None)
