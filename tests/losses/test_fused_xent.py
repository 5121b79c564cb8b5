"""The CPU full-softmax kernel computes exactly the cross-entropy PyTorch computes, gradients included."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from twotower.losses import FullSoftmax, LossBatch
from twotower.losses.fused_xent import fused_softmax_xent, fused_xent_applies
from twotower.losses.softmax import _Softmax


def _case(b: int, n: int, spread: float, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(b, 16, generator=gen).requires_grad_()
    c = (torch.randn(n, 16, generator=gen) * spread).requires_grad_()
    y = torch.randint(0, n, (b,), generator=gen)
    return q, c, y


@pytest.mark.parametrize(("b", "n", "scale", "spread"), [
    (1, 1, 1.0, 1.0),
    (5, 7, 20.0, 1.0),
    (300, 1000, 20.0, 0.3),
    (257, 513, 1.0, 3.0),   # raw dot products with a wide spread: far-off items hit the clamp
    (64, 2000, 50.0, 1.0),  # logits spread over thousands: most probabilities underflow
])
def test_loss_and_gradients_equal_cross_entropy(b: int, n: int, scale: float, spread: float) -> None:
    q, c, y = _case(b, n, spread, seed=b + n)
    want = F.cross_entropy(scale * q.double() @ c.double().T, y)
    g_want = torch.autograd.grad(want, (q, c))
    got, stats = fused_softmax_xent(q, c, y, scale)
    g_got = torch.autograd.grad(got, (q, c))
    assert got.dtype == torch.float32
    assert float(got.detach()) == pytest.approx(float(want.detach()), rel=1e-5, abs=1e-6)
    for a, w in zip(g_got, g_want):
        assert torch.allclose(a.double(), w.double(), rtol=1e-4, atol=1e-5 * float(w.abs().max()) + 1e-12)
    top = (q @ c.T).argmax(1)
    assert stats["correct"] == int((top == y).sum())


def test_full_softmax_takes_the_kernel_and_reports_the_same_stats() -> None:
    q, c, y = _case(200, 900, 0.5, seed=1)
    loss_fn = FullSoftmax(0.05)
    assert fused_xent_applies(q, c)
    got, stats = loss_fn(q, c, LossBatch(positive_ids=y))
    want, want_stats = _Softmax.forward(loss_fn, q, c, LossBatch(positive_ids=y))  # the PyTorch path
    assert float(got.detach()) == pytest.approx(float(want.detach()), rel=1e-5)
    assert stats == pytest.approx(want_stats)
    for a, w in zip(torch.autograd.grad(got, (q, c)), torch.autograd.grad(want, (q, c))):
        assert torch.allclose(a, w, rtol=1e-4, atol=1e-5 * float(w.abs().max()))


def test_weighted_rows_and_other_dtypes_use_the_pytorch_path() -> None:
    q, c, y = _case(10, 30, 1.0, seed=2)
    w = torch.rand(10)
    got, _ = FullSoftmax(0.5)(q, c, LossBatch(positive_ids=y, weights=w))
    per_row = F.cross_entropy(q @ c.T / 0.5, y, reduction="none")
    assert float(got.detach()) == pytest.approx(float(((per_row * w).sum() / w.sum()).detach()), rel=1e-6)
    assert not fused_xent_applies(q.double(), c.double())
    assert not fused_xent_applies(q[:0], c)


def test_interleaved_steps_keep_their_own_buffers() -> None:
    """Two forwards before either backward: each keeps its own gradients."""
    q1, c1, y1 = _case(40, 60, 1.0, seed=3)
    q2, c2, y2 = _case(50, 60, 1.0, seed=4)
    l1, _ = fused_softmax_xent(q1, c1, y1, 10.0)
    l2, _ = fused_softmax_xent(q2, c2, y2, 10.0)
    g2 = torch.autograd.grad(l2, (q2, c2))
    g1 = torch.autograd.grad(l1, (q1, c1))
    for (q, c, y), got in (((q1, c1, y1), g1), ((q2, c2, y2), g2)):
        want = torch.autograd.grad(F.cross_entropy(10.0 * q @ c.T, y), (q, c))
        for a, w in zip(got, want):
            assert torch.allclose(a, w, rtol=1e-4, atol=1e-5 * float(w.abs().max()))


def test_second_backward_is_refused() -> None:
    q, c, y = _case(4, 6, 1.0, seed=5)
    loss, _ = fused_softmax_xent(q, c, y, 1.0)
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="backward called twice"):
        loss.backward()


def test_blocks_cover_every_row() -> None:
    """More rows than one block holds: the block loop must give the one-shot answer."""
    import twotower.losses.fused_xent as fx

    q, c, y = _case(700, 300, 1.0, seed=6)
    old = fx._BLOCK_BYTES, fx._MIN_ROWS
    fx._BLOCK_BYTES, fx._MIN_ROWS = 16 * 300 * 4, 16  # 16 rows a block: 44 blocks, the last one short
    try:
        got, stats = fused_softmax_xent(q, c, y, 5.0)
        g_got = torch.autograd.grad(got, (q, c))
    finally:
        fx._BLOCK_BYTES, fx._MIN_ROWS = old
    want = F.cross_entropy(5.0 * q @ c.T, y)
    assert float(got.detach()) == pytest.approx(float(want.detach()), rel=1e-5)
    for a, w in zip(g_got, torch.autograd.grad(want, (q, c))):
        assert torch.allclose(a, w, rtol=1e-4, atol=1e-5 * float(w.abs().max()))
    assert stats["correct"] == int(((q @ c.T).argmax(1) == y).sum())


def test_upstream_gradient_scales_the_stored_gradients() -> None:
    q, c, y = _case(30, 40, 1.0, seed=7)
    loss, _ = fused_softmax_xent(q, c, y, 3.0)
    g = torch.autograd.grad(2.5 * loss, (q, c))
    want = torch.autograd.grad(2.5 * F.cross_entropy(3.0 * q @ c.T, y), (q, c))
    for a, w in zip(g, want):
        assert torch.allclose(a, w, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize(("b", "n", "scale", "seed"), [
    (500, 900, 20.0, 8),      # row blocks
    (200, 20_000, 12.5, 10),  # a large catalogue: columns tiled too
])
def test_bf16_is_within_bfloat16_rounding_of_fp32(b: int, n: int, scale: float, seed: int) -> None:
    """bf16 GEMMs: the loss within a few 1e-3, gradients within ~1% (bfloat16 keeps 8 bits)."""
    torch.manual_seed(seed)
    q = F.normalize(torch.randn(b, 64), dim=1).requires_grad_()
    c = F.normalize(torch.randn(n, 64), dim=1).requires_grad_()
    y = torch.randint(0, n, (b,))
    want = F.cross_entropy(scale * q @ c.T, y)
    g_want = torch.autograd.grad(want, (q, c))
    got, stats = fused_softmax_xent(q, c, y, scale, precision="bf16")
    g_got = torch.autograd.grad(got, (q, c))
    assert float(got.detach()) == pytest.approx(float(want.detach()), abs=5e-3)
    for a, w in zip(g_got, g_want):
        assert float((a - w).norm() / w.norm()) < 1e-2
    assert 0.0 <= stats["accuracy"] <= 1.0


def test_precision_setting_is_checked_and_auto_resolves() -> None:
    from twotower.config import TrainConfig
    from twotower.errors import ConfigError
    from twotower.losses.fused_xent import kernel_precision
    from twotower.utils.runtime import native_bf16

    assert kernel_precision("auto") == ("bf16" if native_bf16() else "fp32")
    assert FullSoftmax(0.1, precision="bf16").precision == "bf16"
    with pytest.raises(ValueError, match="fp32, bf16 or auto"):
        kernel_precision("fp16")
    with pytest.raises(ConfigError, match="train.precision"):
        TrainConfig(precision="half")
    q, c, y = _case(3, 4, 1.0, seed=9)
    with pytest.raises(ValueError, match="precision"):
        fused_softmax_xent(q, c, y, 1.0, precision="auto")


def _inbatch_case(seed: int, distinct: bool):
    from twotower.losses import LossBatch

    g = torch.Generator().manual_seed(seed)
    P, N, D = 200, 60, 8
    c = torch.nn.functional.normalize(torch.randn(N, D, generator=g), dim=1)
    cols = torch.randint(0, N, (P,), generator=g)
    q = torch.nn.functional.normalize(c[cols] + 0.7 * torch.randn(P, D, generator=g), dim=1)  # many rows right
    ids = torch.randperm(500, generator=g)[:N]
    if not distinct:
        ids[1] = ids[0]  # one id twice: an accidental hit is possible
    batch = LossBatch(positive_ids=ids[cols], candidate_ids=ids, positive_cols=cols, log_q=torch.randn(N, generator=g))
    return q.requires_grad_(), c.requires_grad_(), batch


@pytest.mark.parametrize("distinct", [True, False])
def test_inbatch_softmax_on_the_kernel_equals_its_pytorch_path(distinct):
    """In-batch candidates, de-duplicated (the sequence objective) or not, run on the kernel with logQ as a column
    bias and the accidental hits dropped: the same loss, gradients and statistics as the masked PyTorch path."""
    from twotower.losses import InBatchSoftmax

    q, c, batch = _inbatch_case(0, distinct)
    loss_fn = InBatchSoftmax(0.05)
    assert loss_fn._kernel_applies(q, c, batch)
    loss, stats = loss_fn(q, c, batch)
    gq, gc = torch.autograd.grad(loss, (q, c))

    class Plain(InBatchSoftmax):
        def _kernel_applies(self, *args):
            return False

    ref, ref_stats = Plain(0.05)(q, c, batch)
    rq, rc = torch.autograd.grad(ref, (q, c))
    assert float(loss.detach()) == pytest.approx(float(ref.detach()), rel=1e-5)
    assert torch.allclose(gq, rq, atol=1e-6) and torch.allclose(gc, rc, atol=1e-6)
    assert stats["correct"] == ref_stats["correct"] > 0
    assert stats["accuracy"] == pytest.approx(ref_stats["accuracy"])


@pytest.mark.parametrize(("b", "n", "scale", "spread", "with_bias"), [
    (185, 33_000, 12.5, 0.3, False),  # a sparse data set's step: few positions, a large catalogue
    (300, 9_000, 20.0, 1.0, True),    # logQ bias on the tiled path
    (40, 100_000, 50.0, 1.0, False),  # logits spread over thousands: most probabilities underflow
])
def test_large_catalogues_tile_the_columns_and_give_the_same_answer(b, n, scale, spread, with_bias) -> None:
    """Past ~8K items a row block would hold only a few rows: the kernel tiles the columns, same math."""
    import twotower.losses.fused_xent as fx

    assert fx._BLOCK_BYTES // (4 * n) < min(b, fx._MIN_ROWS)  # the tiled path is the one under test
    q, c, y = _case(b, n, spread, seed=b + n)
    bias = torch.randn(n, generator=torch.Generator().manual_seed(9)) if with_bias else None
    logits = scale * q.double() @ c.double().T + (bias.double() if with_bias else 0.0)
    want = F.cross_entropy(logits, y)
    g_want = torch.autograd.grad(want, (q, c))
    got, stats = fused_softmax_xent(q, c, y, scale, bias=bias)
    g_got = torch.autograd.grad(got, (q, c))
    assert float(got.detach()) == pytest.approx(float(want.detach()), rel=1e-5, abs=1e-6)
    for a, w in zip(g_got, g_want):
        assert torch.allclose(a.double(), w.double(), rtol=1e-4, atol=1e-5 * float(w.abs().max()) + 1e-12)
    assert stats["correct"] == int(((q @ c.T).argmax(1) == y).sum())  # raw scores, as the row blocks count
    assert stats["accuracy"] == pytest.approx(stats["correct"] / b)


def test_tiled_columns_keep_the_first_maximum_across_blocks() -> None:
    """Equal top scores in two column blocks: the first one counts, as argmax does (the in-batch accuracy)."""
    import twotower.losses.fused_xent as fx

    n = 600_000
    q = torch.ones(2, 4).requires_grad_()
    c = torch.zeros(n, 4)
    c[100], c[550_000] = 1.0, 1.0  # the same top score in the first and the last column block
    y = torch.tensor([100, 550_000])
    got, stats = fused_softmax_xent(q, c.requires_grad_(), y, 1.0)
    assert fx._BLOCK_BYTES // (4 * n) < 2  # tiled, in three column blocks
    assert stats["correct"] == 1 and stats["accuracy"] == 0.5  # correct / B, as training logs it
    assert float(got.detach()) == pytest.approx(float(F.cross_entropy(q.double() @ c.double().T, y).detach()), rel=1e-6)
