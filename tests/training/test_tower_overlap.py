"""The item tower's backward on the side thread (training/tower_overlap.py): the same numbers as one backward pass,
run where it says, refused for towers that share weights, and a failure on the side thread raised in the step."""
from __future__ import annotations

import threading

import pytest
import torch

import twotower.training.epoch as epoch_mod
from twotower.config import EvalConfig, LossConfig, ModelConfig, TowerConfig, TrainConfig
from twotower.models.two_tower import TwoTowerModel
from twotower.training.side_worker import SideWorker
from twotower.training.tower_overlap import backward_beside, item_side_blocker, split_item_graph
from twotower.training.trainer import Trainer

from tests.training.tiny_trainer import tiny_mean_model


@pytest.fixture(autouse=True)
def _a_spare_core(monkeypatch: pytest.MonkeyPatch) -> None:
    # the side thread runs only beside a free core (utils/runtime.spare_core): these tests are about it
    monkeypatch.setattr(epoch_mod, "spare_core", lambda threads: True)


def _trainer(loss: LossConfig | None = None, **train: object) -> Trainer:
    """The default recommender's shape (recency pool, MLP heads with dropout, logQ and hit masking), tiny."""
    _, _, seqs, _ = tiny_mean_model()
    torch.manual_seed(0)
    model = TwoTowerModel(ModelConfig(user=TowerConfig(history="recency", history_len=4, out_dim=8, hidden=(16,),
                                                       dropout=0.2),
                                      item=TowerConfig(out_dim=8, hidden=(16,), dropout=0.2)), 8, 30)
    cfg = TrainConfig(**{"epochs": 2, "batch_size": 16, "progress": False, "checkpoint": False, **train})
    return Trainer(model, seqs, loss=loss or LossConfig(), train=cfg, eval=EvalConfig(baselines=()))


def _item_grad_threads(tr: Trainer) -> set[str]:
    """Names of the threads that computed a gradient of the item tower's weights (recorded by a hook)."""
    seen: set[str] = set()
    for p in tr.model.item_tower.parameters():
        p.register_hook(lambda g: seen.add(threading.current_thread().name))
    return seen


@pytest.mark.parametrize("kind", ["inbatch", "sampled", "full", "bpr"])
def test_the_item_towers_backward_on_the_side_thread_trains_exactly_as_one_backward_pass(kind: str) -> None:
    loss = LossConfig(kind=kind, sampled_negatives=8) if kind == "sampled" else LossConfig(kind=kind)
    beside = _trainer(loss)  # each built and fitted in turn: the dropout masks draw from torch's default generator
    threads_beside = _item_grad_threads(beside)
    res_beside = beside.fit()
    alone = _trainer(loss, overlap_towers=False)
    threads_alone = _item_grad_threads(alone)
    res_alone = alone.fit()
    assert threads_beside == {"twotower-side"}
    assert threads_alone == {"MainThread"}
    assert [r["loss"] for r in res_beside.history] == [r["loss"] for r in res_alone.history]
    for (name, a), b in zip(beside.model.state_dict().items(), alone.model.state_dict().values()):
        assert torch.equal(a, b), name


def test_an_untied_sequence_towers_steps_train_exactly_as_one_backward_pass() -> None:
    def fitted(overlap: bool) -> tuple[Trainer, set[str]]:
        _, _, seqs, _ = tiny_mean_model()
        torch.manual_seed(0)
        model = TwoTowerModel(ModelConfig(user=TowerConfig(use_id=False, history="gru", history_len=4, history_dim=8,
                                                           out_dim=8, hidden=(16,), dropout=0.2),
                                          item=TowerConfig(id_dim=8, out_dim=8, hidden=(16,), dropout=0.2),
                                          share_item_embeddings=False), 8, 30)
        cfg = TrainConfig(epochs=2, batch_size=4, progress=False, checkpoint=False, examples="sequence",
                          overlap_towers=overlap)
        tr = Trainer(model, seqs, loss=LossConfig(), train=cfg, eval=EvalConfig(baselines=()))
        seen = _item_grad_threads(tr)
        tr.fit()
        return tr, seen

    (beside, seen_beside), (alone, seen_alone) = fitted(True), fitted(False)
    assert seen_beside == {"twotower-side"} and seen_alone == {"MainThread"}
    for (name, a), b in zip(beside.model.state_dict().items(), alone.model.state_dict().values()):
        assert torch.equal(a, b), name


def test_towers_that_share_weights_keep_one_backward_pass() -> None:
    _, _, seqs, _ = tiny_mean_model()
    torch.manual_seed(0)
    # SASRec's tie: the sequence tower reads the item tower's ID table, which is not among its parameters
    tied = TwoTowerModel(ModelConfig(user=TowerConfig(use_id=False, history="gru", history_len=4, history_dim=8,
                                                      out_dim=8, hidden=(), head=False),
                                     item=TowerConfig(id_dim=8, out_dim=8, hidden=(), head=False, use_features=False),
                                     share_item_embeddings=True), 8, 30)
    assert tied.user_tower.tied_tables
    assert item_side_blocker(tied, torch.nn.Module()) == "the towers share weights"
    loss = torch.nn.Module()
    loss.t = torch.nn.Parameter(torch.ones(()))
    untied = TwoTowerModel(ModelConfig(), 8, 30)
    assert item_side_blocker(untied, loss) == "the loss has weights of its own"
    assert item_side_blocker(untied, torch.nn.Module()) is None
    cfg = TrainConfig(epochs=1, batch_size=16, progress=False, checkpoint=False, examples="sequence")
    tr = Trainer(tied, seqs, loss=LossConfig(), train=cfg, eval=EvalConfig(baselines=()))
    seen = _item_grad_threads(tr)
    tr.fit()
    assert seen == {"MainThread"}


def test_a_failure_in_the_item_towers_backward_is_raised_in_the_step_after_both_passes_end() -> None:
    w_user, w_item = torch.randn(3, 4, requires_grad=True), torch.randn(5, 4, requires_grad=True)
    q, c = (w_user * 2).tanh(), (w_item * 3).tanh()
    c_in = split_item_graph(c)
    loss = (q @ c_in.T).logsumexp(1).mean()

    def fail(g: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("item tower broke")

    w_item.register_hook(fail)
    with SideWorker("twotower-side") as side, pytest.raises(RuntimeError, match="item tower broke"):
        backward_beside(loss, q, c_in, c, side)
    assert w_user.grad is not None  # the user tower's pass ran to its end here


def test_a_split_backward_gives_the_gradients_of_one_pass() -> None:
    torch.manual_seed(0)
    w_user, w_item = torch.randn(6, 4, requires_grad=True), torch.randn(9, 4, requires_grad=True)
    ref = torch.nn.functional.cross_entropy((w_user.sin() @ w_item.cos().T) * 5, torch.arange(6))
    ref.backward()
    want = w_user.grad.clone(), w_item.grad.clone()
    w_user.grad = w_item.grad = None
    q, c = w_user.sin(), w_item.cos()
    c_in = split_item_graph(c)
    with SideWorker("twotower-side") as side:
        backward_beside(torch.nn.functional.cross_entropy((q @ c_in.T) * 5, torch.arange(6)), q, c_in, c, side)
    assert torch.equal(w_user.grad, want[0]) and torch.equal(w_item.grad, want[1])


def test_the_in_batch_kernel_computes_the_candidates_gradient_on_the_side_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    # the candidate-gradient product of the loss runs where the item tower's backward runs, in block order
    import twotower.losses.fused_xent as fx

    seen: list[str] = []
    real = fx._add_product

    def spy(*args: object) -> None:
        seen.append(threading.current_thread().name)
        real(*args)

    monkeypatch.setattr(fx, "_add_product", spy)
    _trainer(epochs=1).fit()
    assert seen and set(seen) == {"twotower-side"}
