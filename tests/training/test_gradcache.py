"""GradCache in chunks gives the loss and gradients of the plain full-batch step."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from twotower.errors import ConfigError, DataError
from twotower.losses import InBatchSoftmax, log_q_from_counts
from twotower.training.gradcache import chunked, gradcache_step

f64 = torch.float64
POS_IDS = torch.tensor([0, 4, 2, 4, 1, 3, 0])  # 7 queries; items 0 and 4 repeat (accidental hits)
CAND_IDS = torch.cat([POS_IDS, torch.tensor([4, 5, 2])])  # + 3 uniform negatives -> 10 candidates


class Tower(nn.Module):
    def __init__(self, d_in: int, p_drop: float) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_in, 8), nn.ReLU(), nn.Dropout(p_drop), nn.Linear(8, 4)).double()

    def forward(self, x: torch.Tensor | dict) -> torch.Tensor:
        x = x["x"] if isinstance(x, dict) else x
        return F.normalize(self.net(x), dim=-1)


def _setup(p_drop: float):
    torch.manual_seed(0)
    query_tower, item_tower = Tower(5, p_drop), Tower(6, p_drop)
    gen = torch.Generator().manual_seed(1)
    query_x = torch.randn(7, 5, generator=gen, dtype=f64)  # [B=7, 5]
    item_x = torch.randn(6, 6, generator=gen, dtype=f64)[CAND_IDS]  # [N=10, 6], same features per id
    log_q = log_q_from_counts(torch.tensor([3, 1, 2, 1, 4, 1]), batch_size=7, n_uniform=3).double()[CAND_IDS]
    loss = InBatchSoftmax(0.1)

    def loss_fn(q: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return loss(q, c, positive_ids=POS_IDS, candidate_ids=CAND_IDS, log_q=log_q)

    return query_tower, item_tower, query_x, item_x, loss_fn


def _grads(*modules: nn.Module) -> list[torch.Tensor]:
    return [p.grad.clone() for m in modules for p in m.parameters()]


def _assert_close(a: list[torch.Tensor], b: list[torch.Tensor]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert torch.allclose(x, y, atol=1e-10, rtol=0)


@pytest.mark.parametrize("chunk", [1, 3, 16])
def test_matches_plain_full_batch_without_dropout(chunk: int) -> None:
    qt, it, qx, ix, loss_fn = _setup(0.0)
    ref = loss_fn(qt(qx), it(ix))  # one forward over the whole batch
    ref.backward()
    ref_grads = _grads(qt, it)
    qt.zero_grad()
    it.zero_grad()
    loss = gradcache_step(qt, it, chunked(qx, chunk), chunked(ix, chunk), loss_fn)
    assert not loss.requires_grad
    assert torch.allclose(loss, ref.detach(), atol=1e-12)
    _assert_close(_grads(qt, it), ref_grads)


def test_matches_plain_step_with_dropout_in_the_towers() -> None:
    qt, it, qx, ix, loss_fn = _setup(0.3)
    q_chunks, i_chunks = chunked(qx, 3), chunked(ix, 3)  # query rows 3+3+1, items 3+3+3+1
    # Plain step drawing the same dropout masks: same RNG seed, towers applied in the same order.
    torch.manual_seed(7)
    ref = loss_fn(torch.cat([qt(c) for c in q_chunks]), torch.cat([it(c) for c in i_chunks]))
    rng_after_plain = torch.get_rng_state()
    ref.backward()
    ref_grads = _grads(qt, it)
    qt.zero_grad()
    it.zero_grad()

    torch.manual_seed(7)
    loss = gradcache_step(qt, it, q_chunks, i_chunks, loss_fn)
    assert torch.allclose(loss, ref.detach(), atol=1e-12)
    _assert_close(_grads(qt, it), ref_grads)
    # the replay forks the RNG: afterwards it stands where one plain forward leaves it
    assert torch.equal(torch.get_rng_state(), rng_after_plain)

    # dropout really is active: another seed gives another loss
    torch.manual_seed(8)
    other = gradcache_step(qt, it, q_chunks, i_chunks, loss_fn)
    assert abs(other.item() - loss.item()) > 1e-6


def test_dict_inputs_and_gradient_accumulation() -> None:
    qt, it, qx, ix, loss_fn = _setup(0.0)
    q_batch = {"x": qx, "ids": [f"u{i}" for i in range(7)], "flag": True}
    q_chunks = chunked(q_batch, 4)
    assert [c["ids"] for c in q_chunks] == [["u0", "u1", "u2", "u3"], ["u4", "u5", "u6"]]
    assert q_chunks[1]["flag"] is True
    gradcache_step(qt, it, q_chunks, chunked(ix, 4), loss_fn)
    once = _grads(qt, it)
    gradcache_step(qt, it, q_chunks, chunked(ix, 4), loss_fn)
    _assert_close(_grads(qt, it), [2 * g for g in once])  # like loss.backward(): grads add up


def test_chunked_errors() -> None:
    with pytest.raises(ConfigError, match=r"^size: must be an integer >= 1 \(rows per chunk\), got 0$"):
        chunked(torch.zeros(3), 0)
    with pytest.raises(DataError, match="same number of rows"):
        chunked({"a": torch.zeros(3), "b": torch.zeros(4)}, 2)
    with pytest.raises(DataError):
        gradcache_step(lambda x: x, lambda x: x, [], [torch.zeros(1, 2)], lambda q, c: q.sum())
    assert [c.tolist() for c in chunked(torch.arange(5), 2)] == [[0, 1], [2, 3], [4]]


@pytest.mark.parametrize("kind", ["inbatch", "full", "sampled"])
def test_the_trainer_keeps_bf16_products_under_gradcache(kind: str) -> None:
    """train.precision=bf16 with train.gradcache_chunk: the chunks ran the towers in fp32 while config.json and the
    log said bf16; in one chunk the step is now the plain bf16 step, not the fp32 one."""
    import numpy as np

    from twotower.config import EvalConfig, LossConfig, ModelConfig, TowerConfig, TrainConfig
    from twotower.models.history import UserSequences
    from twotower.models.two_tower import TwoTowerModel
    from twotower.training.trainer import Trainer

    rng = np.random.default_rng(0)
    users = np.repeat(np.arange(8), 6)
    seqs = UserSequences.from_arrays(users, rng.integers(0, 30, size=users.size), np.arange(users.size), 8)
    grads = {}
    for name, precision, chunk in (("fp32", "fp32", None), ("bf16", "bf16", None), ("bf16 gradcache", "bf16", 1000)):
        torch.manual_seed(0)
        tower = dict(out_dim=8, hidden=(16,), dropout=0.0)
        model = TwoTowerModel(ModelConfig(user=TowerConfig(history="mean", history_len=4, **tower),
                                          item=TowerConfig(**tower)), 8, 30)
        train = TrainConfig(batch_size=48, progress=False, checkpoint=False, history_dropout=0.0, precision=precision,
                            gradcache_chunk=chunk)
        tr = Trainer(model, seqs, loss=LossConfig(kind=kind, temperature=0.1, sampled_negatives=8), train=train,
                     eval=EvalConfig(baselines=()))
        tr._step(np.arange(len(tr.examples)))
        grads[name] = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])

    def rel(a: str, b: str) -> float:
        return float((grads[a] - grads[b]).norm() / grads[b].norm())

    assert rel("bf16", "fp32") > 1e-3  # bfloat16 products show in the gradients
    assert rel("bf16 gradcache", "bf16") < 1e-5
