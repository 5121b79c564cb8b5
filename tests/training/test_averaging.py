"""train.ema_decay: an exponential moving average of the weights is what validation sees and the run saves."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from twotower.config import EvalConfig, LossConfig, ModelConfig, TowerConfig, TrainConfig
from twotower.errors import ConfigError
from twotower.models.history import UserSequences
from twotower.models.two_tower import TwoTowerModel
from twotower.training.averaging import WeightAverage
from twotower.training.trainer import Trainer

N_USERS, N_ITEMS, L = 6, 20, 5


def test_average_follows_the_formula_and_swaps_back() -> None:
    w = torch.nn.Parameter(torch.zeros(3))
    avg = WeightAverage([w], decay=0.5)
    want = torch.zeros(3)
    for t, value in enumerate([1.0, 2.0, 3.0, 4.0]):
        with torch.no_grad():
            w.fill_(value)
        avg.update()
        d = min(0.5, (1 + t) / (10 + t))
        want = d * want + (1 - d) * value
    torch.testing.assert_close(avg.shadow[0], want)
    with avg.swapped():
        torch.testing.assert_close(w.detach(), want)
    assert (w.detach() == 4.0).all()  # the live weights are back
    fresh = WeightAverage([torch.nn.Parameter(torch.zeros(3))], decay=0.5)
    fresh.load_state_dict(avg.state_dict())
    torch.testing.assert_close(fresh.shadow[0], want)
    assert fresh.updates == 4
    with pytest.raises(ValueError, match="decay"):
        WeightAverage([w], decay=1.0)
    with pytest.raises(ConfigError, match="ema_decay"):
        TrainConfig(ema_decay=1.5)


def _seqs() -> UserSequences:
    rng = np.random.default_rng(0)
    lengths = [6, 3, 5, 7, 9, 4]
    users = np.repeat(np.arange(N_USERS), lengths)
    items = rng.integers(0, N_ITEMS, size=users.size)
    return UserSequences.from_arrays(users, items, np.arange(users.size), N_USERS)


def _trainer(out, epochs: int, ema: float | None = 0.9) -> Trainer:
    torch.manual_seed(0)
    cfg = ModelConfig(user=TowerConfig(use_id=False, history="transformer", history_len=L, history_dim=8, out_dim=8,
                                       hidden=(), head=False, seq_dropout=0.0),
                      item=TowerConfig(id_dim=8, out_dim=8, hidden=(), head=False, use_features=False),
                      share_item_embeddings=True)
    model = TwoTowerModel(cfg, N_USERS, N_ITEMS)
    train = TrainConfig(examples="sequence", epochs=epochs, batch_size=2, lr=5e-2, progress=False, ema_decay=ema,
                        patience=100)
    return Trainer(model, _seqs(), loss=LossConfig(kind="full", temperature=0.1), train=train,
                   eval=EvalConfig(baselines=()), out_dir=out)


def test_trainer_saves_the_average_and_resumes_it(tmp_path) -> None:
    tr = _trainer(tmp_path / "a", epochs=1)
    tr.fit()
    names = [n for n, _ in tr.model.named_parameters()]
    saved = load_file(str(tmp_path / "a" / "model.safetensors"))  # the run's model: its one epoch, averaged
    live = load_file(str(tmp_path / "a" / "checkpoint" / "model.safetensors"))  # what training goes on from
    for name, shadow in zip(names, tr.average.shadow):
        torch.testing.assert_close(saved[name], shadow)
        torch.testing.assert_close(tr.model.state_dict()[name], shadow)  # the trainer hands back the average
    assert not all(torch.allclose(saved[n], live[n]) for n in names)
    # an interrupted run resumed from its checkpoint ends where the uninterrupted one does, average included
    whole = _trainer(tmp_path / "b", epochs=3)
    whole.fit()
    _trainer(tmp_path / "c", epochs=1).fit()
    again = _trainer(tmp_path / "c", epochs=3)
    again.fit(resume=True)
    assert again.average.updates == whole.average.updates > 0
    for a, b in zip(again.average.shadow, whole.average.shadow):
        torch.testing.assert_close(a, b)


def test_sparse_id_tables_stay_out_of_the_average(tmp_path) -> None:
    """With train.optimizer=sparse_adam the ID tables train by rows; averaging them would blend every row each
    step (a million-row table costs more than the step), so the average holds the dense weights only."""
    cfg = ModelConfig(user=TowerConfig(id_dim=8, history="recency", history_len=L, history_dim=8, out_dim=8,
                                       hidden=(8,), use_features=False),
                      item=TowerConfig(id_dim=8, out_dim=8, hidden=(8,), use_features=False))
    model = TwoTowerModel(cfg, N_USERS, N_ITEMS, sparse=True)
    train = TrainConfig(epochs=1, batch_size=4, optimizer="sparse_adam", progress=False, ema_decay=0.9)
    tr = Trainer(model, _seqs(), loss=LossConfig(), train=train, eval=EvalConfig(baselines=()), out_dir=tmp_path)
    sparse = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding) and m.sparse}
    assert sparse, "the model should hold sparse ID tables"
    averaged = {id(p) for p in tr.average.params}
    assert not averaged & sparse
    assert averaged == {id(p) for p in model.parameters() if id(p) not in sparse}
    tr.fit()  # trains and saves with the partial average


def test_the_logged_item_spread_is_the_saved_averaged_models(tmp_path) -> None:
    # item_std was computed from the live weights while the run validated and saved their average
    from twotower.training.diagnostics import embedding_spread

    tr = _trainer(tmp_path / "a", epochs=1)
    row = tr.fit().history[-1]
    with torch.no_grad():  # the trainer hands back the average, the weights model.safetensors holds
        saved = embedding_spread(tr.model.all_item_embeddings())
        live = load_file(str(tmp_path / "a" / "checkpoint" / "model.safetensors"))
        averaged = {n: p.detach().clone() for n, p in tr.model.named_parameters()}
        tr.model.load_state_dict(live, strict=False)
        live_std = embedding_spread(tr.model.all_item_embeddings())
        tr.model.load_state_dict(averaged, strict=False)
    assert abs(live_std - saved) > 1e-4  # the two models differ in what the test reads
    assert row["item_std"] == pytest.approx(saved, rel=1e-5)
