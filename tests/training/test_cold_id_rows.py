"""Items without training interactions keep their zero ID rows under every loss, not only the in-batch one.

BPR's uniform negatives, ``loss.kind=sampled`` / ``full`` and ``loss.uniform_negatives`` draw cold items as
negatives, and their ID rows were pushed (mean norm 0.56 after 2 BPR epochs on MovieLens-100K, warm 0.51), so a
cold item's vector no longer came from its features alone (cold-test Recall@100 0 -> 0.04 once they stay zero).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from twotower.config import EvalConfig, LossConfig, ModelConfig, TowerConfig, TrainConfig
from twotower.models.history import UserSequences
from twotower.models.two_tower import TwoTowerModel
from twotower.training import cold_rows
from twotower.training.trainer import Trainer

N_ITEMS = 30

LOSSES = {
    "bpr": LossConfig(kind="bpr"),
    "full": LossConfig(kind="full"),
    "sampled": LossConfig(kind="sampled", sampled_negatives=16),
    "inbatch+uniform": LossConfig(uniform_negatives=16),
}


def _data() -> tuple[UserSequences, np.ndarray]:
    """8 users x 6 items drawn from the first 20: the training sequences and the cold items (no interactions)."""
    rng = np.random.default_rng(0)
    users = np.repeat(np.arange(8), 6)
    seqs = UserSequences.from_arrays(users, rng.integers(0, 20, size=users.size), np.arange(users.size), 8)
    return seqs, np.bincount(seqs.items, minlength=N_ITEMS) == 0


COLD = _data()[1]  # items 20..29 and the few of the first 20 never drawn


def _trainer(loss: LossConfig, *, sparse: bool = False, epochs: int = 2, out=None, ema: float | None = None) -> Trainer:
    seqs, _ = _data()
    torch.manual_seed(0)
    model = TwoTowerModel(ModelConfig(user=TowerConfig(history="mean", history_len=4, out_dim=8, hidden=()),
                                      item=TowerConfig(out_dim=8, hidden=(16,))), 8, N_ITEMS, sparse=sparse)
    with torch.no_grad():  # as the pipeline builds it (pipeline.experiment.build_model_for)
        model.item_tower.id_emb.weight[torch.as_tensor(COLD)] = 0.0
    cfg = TrainConfig(epochs=epochs, batch_size=8, progress=False, threads=1, weight_decay=0.1, patience=100,
                      optimizer="sparse_adam" if sparse else "adamw", ema_decay=ema)
    return Trainer(model, seqs, loss=loss, train=cfg, eval=EvalConfig(baselines=()), out_dir=out)


def _rows(tr: Trainer) -> torch.Tensor:
    return tr.model.item_tower.id_emb.weight.detach().clone()


@pytest.mark.parametrize("sparse", [False, True], ids=["adamw", "sparse_adam"])
@pytest.mark.parametrize("kind", list(LOSSES))
def test_cold_id_rows_stay_exactly_zero_and_warm_rows_train(kind, sparse):
    tr = _trainer(LOSSES[kind], sparse=sparse)
    before = _rows(tr)
    tr.fit(curves=False)
    after = _rows(tr)
    assert torch.count_nonzero(after[COLD]) == 0
    warm_moved = (after[~COLD] != before[~COLD]).any(dim=1)
    assert bool(warm_moved.all())


def test_the_in_batch_run_is_bit_identical_with_the_mask(monkeypatch):
    """The default loss never reaches a cold row: masking them changes no number of its run."""
    masked = _trainer(LossConfig())
    masked.fit(curves=False)
    monkeypatch.setattr(cold_rows.ColdRows, "mask_grads", lambda self: None)
    plain = _trainer(LossConfig())
    plain.fit(curves=False)
    for (name, a), b in zip(masked.model.state_dict().items(), plain.model.state_dict().values()):
        assert torch.equal(a, b), name
    assert [r["loss"] for r in masked.history] == [r["loss"] for r in plain.history]


def test_a_resumed_bpr_run_keeps_cold_rows_zero(tmp_path):
    _trainer(LOSSES["bpr"], epochs=1, out=tmp_path).fit(curves=False)
    resumed = _trainer(LOSSES["bpr"], epochs=3, out=tmp_path)
    resumed.fit(resume=True, curves=False)
    assert torch.count_nonzero(_rows(resumed)[COLD]) == 0
    state = resumed.optimizers[0].state[resumed.model.item_tower.id_emb.weight]
    assert torch.count_nonzero(state["exp_avg"][COLD]) == 0  # no momentum left to move them later


def test_a_hand_built_models_random_cold_rows_train_as_before():
    # only rows built as zero are held: a model built in Python keeps random cold rows, which frozen would leave
    # those items scored at random for ever (the pipeline zeroes them; a hand-built model never did)
    seqs, _ = _data()
    torch.manual_seed(0)
    model = TwoTowerModel(ModelConfig(user=TowerConfig(history="mean", history_len=4, out_dim=8, hidden=()),
                                      item=TowerConfig(out_dim=8, hidden=(16,))), 8, N_ITEMS)
    before = model.item_tower.id_emb.weight.detach().clone()
    cfg = TrainConfig(epochs=1, batch_size=8, progress=False, threads=1, patience=100, ema_decay=None,
                      weight_decay=0.0)  # no decay: only a gradient can move a row
    tr = Trainer(model, seqs, loss=LOSSES["full"], train=cfg, eval=EvalConfig(baselines=()), out_dir=None)
    tr.fit()
    cold = torch.as_tensor(COLD)
    assert not torch.equal(_rows(tr)[cold], before[cold])  # pushed as negatives, as the full softmax does


@pytest.mark.parametrize("sparse", [False, True], ids=["adamw", "sparse_adam"])
def test_resuming_a_checkpoint_of_the_old_behaviour_zeroes_the_trained_cold_rows(tmp_path, monkeypatch, caplog, sparse):
    """A checkpoint written before the mask: cold rows trained as negatives, with Adam moments that would keep
    moving them. The resume zeroes the rows and their moments, and says so once."""
    with monkeypatch.context() as m:  # the old behaviour: no mask
        m.setattr(cold_rows.ColdRows, "mask_grads", lambda self: None)
        _trainer(LOSSES["bpr"], sparse=sparse, epochs=1, out=tmp_path).fit(curves=False)
    resumed = _trainer(LOSSES["bpr"], sparse=sparse, epochs=3, out=tmp_path)
    with caplog.at_level("WARNING", logger="twotower.training.cold_rows"):
        resumed.restore()
    lines = [r.getMessage() for r in caplog.records if "cold items" in r.getMessage()]
    assert len(lines) == 1
    assert f"of the {int(COLD.sum())} cold items" in lines[0] and "are now zero" in lines[0]
    resumed.fit(resume=True, curves=False)
    assert torch.count_nonzero(_rows(resumed)[COLD]) == 0
    state = resumed.optimizers[-1].state[resumed.model.item_tower.id_emb.weight]
    assert torch.count_nonzero(state["exp_avg"][COLD]) == 0
    assert torch.count_nonzero(state["exp_avg_sq"][COLD]) == 0


def test_the_resume_zeroes_the_weight_average_of_the_trained_cold_rows(tmp_path, monkeypatch):
    """train.ema_decay: the saved model is the average, which must not bring the old rows back."""
    with monkeypatch.context() as m:
        m.setattr(cold_rows.ColdRows, "mask_grads", lambda self: None)
        _trainer(LOSSES["bpr"], epochs=1, out=tmp_path, ema=0.9).fit(curves=False)
    resumed = _trainer(LOSSES["bpr"], epochs=2, out=tmp_path, ema=0.9)
    resumed.fit(resume=True, curves=False)
    with resumed.average.swapped():
        assert torch.count_nonzero(_rows(resumed)[COLD]) == 0
