"""RowSparseAdam: the same parameters and state as torch.optim.SparseAdam, step for step."""
from __future__ import annotations

import copy

import pytest
import torch

from twotower.training.loop import make_optimizers
from twotower.training.sparse_adam import RowSparseAdam


def _grads(n_rows: int, dim: int, steps: int, seed: int = 0) -> list[torch.Tensor]:
    """Uncoalesced sparse gradients with repeated rows (as an embedding's backward gives), one empty."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for s in range(steps):
        k = 0 if s == 2 else 40
        rows = torch.randint(0, n_rows, (k,), generator=g)
        values = torch.randn(k, dim, generator=g)
        out.append(torch.sparse_coo_tensor(rows.unsqueeze(0), values, (n_rows, dim), check_invariants=True))
    return out


def _run(cls: type, grads: list[torch.Tensor], **kw) -> tuple[torch.Tensor, dict]:
    p = torch.nn.Parameter(torch.randn(50, 8, generator=torch.Generator().manual_seed(1)))
    opt = cls([p], lr=0.01, **kw)
    for g in grads:
        p.grad = g.clone()
        opt.step()
    return p.detach().clone(), opt.state_dict()


@pytest.mark.parametrize("kw", [{}, {"betas": (0.8, 0.99), "eps": 1e-6}, {"maximize": True}])
def test_bit_identical_to_torch_sparse_adam(kw: dict) -> None:
    grads = _grads(50, 8, 6)
    ours, our_state = _run(RowSparseAdam, grads, **kw)
    ref, ref_state = _run(torch.optim.SparseAdam, grads, **kw)
    assert torch.equal(ours, ref)
    for key in ("exp_avg", "exp_avg_sq"):
        assert torch.equal(our_state["state"][0][key], ref_state["state"][0][key])
    assert our_state["state"][0]["step"] == ref_state["state"][0]["step"] == 6  # an empty gradient counts a step


def test_state_moves_between_the_classes() -> None:
    """A checkpoint written with either optimizer resumes with the other: same state, same next step."""
    grads = _grads(50, 8, 5, seed=3)
    p = torch.nn.Parameter(torch.zeros(50, 8))
    old = torch.optim.SparseAdam([p], lr=0.01)
    for g in grads[:3]:
        p.grad = g.clone()
        old.step()
    q = torch.nn.Parameter(p.detach().clone())
    new = RowSparseAdam([q], lr=0.01)
    new.load_state_dict(copy.deepcopy(old.state_dict()))  # as a checkpoint round trip: no shared tensors
    for g in grads[3:]:
        p.grad, q.grad = g.clone(), g.clone()
        old.step()
        new.step()
    assert torch.equal(p, q)


def test_dense_gradient_refused() -> None:
    p = torch.nn.Parameter(torch.zeros(4, 2))
    p.grad = torch.ones(4, 2)
    with pytest.raises(RuntimeError, match="dense gradients"):
        RowSparseAdam([p]).step()


def test_trainer_gives_sparse_tables_row_sparse_adam() -> None:
    emb = torch.nn.Embedding(10, 4, sparse=True)
    dense = torch.nn.Linear(4, 4)
    opts = make_optimizers(list(dense.parameters()), lr=0.01, sparse_params=[emb.weight])
    assert isinstance(opts[-1], RowSparseAdam) and isinstance(opts[-1], torch.optim.SparseAdam)
