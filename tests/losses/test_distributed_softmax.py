"""Cross-rank loss without a process group is exactly the single-process loss.

The real 2-process equivalence test lives in tests/training/test_distributed_ddp.py.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from twotower.losses import DistributedInBatchSoftmax, InBatchSoftmax, gather_no_grad, gather_with_grad


def test_gather_is_identity_without_a_process_group() -> None:
    assert not dist.is_initialized()
    x = torch.randn(3, 2, requires_grad=True)
    assert gather_with_grad(x) is x
    assert gather_no_grad(torch.tensor([1, 2])).tolist() == [1, 2]


def test_distributed_loss_falls_back_to_in_batch_softmax() -> None:
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(3, 4, generator=gen, requires_grad=True)
    c = torch.randn(5, 4, generator=gen, requires_grad=True)
    pos_ids, cand_ids = torch.tensor([1, 2, 1]), torch.tensor([1, 2, 1, 2, 8])
    log_q = torch.randn(5, generator=gen)
    kw = dict(positive_ids=pos_ids, candidate_ids=cand_ids, log_q=log_q)
    dist_loss, dist_stats = DistributedInBatchSoftmax(0.1).forward_with_stats(q, c, **kw)

    class Plain(InBatchSoftmax):  # the PyTorch path, which the cross-rank loss runs: bit for bit the same
        def _kernel_applies(self, *args) -> bool:
            return False

    ref_loss, ref_stats = Plain(0.1).forward_with_stats(q, c, **kw)
    assert torch.equal(dist_loss, ref_loss)
    assert dist_stats == ref_stats
    g1 = torch.autograd.grad(dist_loss, (q, c))
    g2 = torch.autograd.grad(ref_loss, (q, c))
    assert all(torch.equal(a, b) for a, b in zip(g1, g2))
    kernel_loss, kernel_stats = InBatchSoftmax(0.1).forward_with_stats(q, c, **kw)  # the CPU kernel: to round-off
    assert torch.allclose(kernel_loss, dist_loss, rtol=1e-6) and kernel_stats == dist_stats
    g3 = torch.autograd.grad(kernel_loss, (q, c))
    assert all(torch.allclose(a, b, rtol=1e-5, atol=1e-7) for a, b in zip(g1, g3))
