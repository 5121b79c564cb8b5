"""The CPU kernel drops the accidental hits (and column_mask) as the in-batch softmax's PyTorch path masks them."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import twotower.losses.fused_xent as fx
from twotower.losses import InBatchSoftmax, LossBatch
from twotower.losses.corrections import accidental_hit_pairs
from twotower.losses.fused_xent import fused_softmax_xent


class _Plain(InBatchSoftmax):
    """The PyTorch path of the in-batch softmax, whatever the kernel could do."""

    def _kernel_applies(self, *args) -> bool:
        return False


def _batch(seed: int, b: int, extra: int, n_ids: int, d: int = 16, **kw):
    """A causal-style batch: ``b`` positives drawn from ``n_ids`` ids (many repeats), ``extra`` uniform negatives."""
    g = torch.Generator().manual_seed(seed)
    pos = torch.randint(0, n_ids, (b,), generator=g)
    ids = torch.cat([pos, torch.randint(0, n_ids, (extra,), generator=g)])  # [N]: repeats among them too
    table = F.normalize(torch.randn(n_ids, d, generator=g), dim=1)
    c = table[ids].clone().requires_grad_()
    q = F.normalize(table[pos] + 0.8 * torch.randn(b, d, generator=g), dim=1).requires_grad_()  # many rows right
    log_q = torch.log(torch.rand(ids.shape[0], generator=g) * 0.01 + 1e-4)
    return q, c, LossBatch(positive_ids=pos, candidate_ids=ids, log_q=log_q, **kw)


def _both(loss_fn: InBatchSoftmax, q, c, batch):
    """((loss, stats, grads) on the kernel, the same on the PyTorch path)."""
    out = []
    for fn in (loss_fn, _Plain(loss_fn.temperature, logq=loss_fn.logq, mask_accidental_hits=loss_fn.mask_accidental_hits)):
        loss, stats = fn(q, c, batch)
        out.append((float(loss.detach()), stats, torch.autograd.grad(loss, (q, c))))
    return out


def _assert_same(got, want) -> None:
    (loss, stats, grads), (ref, ref_stats, ref_grads) = got, want
    assert loss == pytest.approx(ref, rel=1e-5)
    for a, w in zip(grads, ref_grads):
        assert torch.allclose(a, w, rtol=1e-4, atol=1e-5 * float(w.abs().max()))
    assert stats == ref_stats  # correct, accuracy (raw scores, ids compared) and the number of hits


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("logq", [True, False])
@pytest.mark.parametrize(("b", "extra"), [(512, 0), (96, 40)])
def test_duplicate_ids_on_the_kernel_equal_the_masked_pytorch_path(seed: int, logq: bool, b: int, extra: int) -> None:
    """The default causal batch repeats popular items: their other copies are accidental hits the kernel drops."""
    q, c, batch = _batch(seed, b, extra, n_ids=b // 2)
    loss_fn = InBatchSoftmax(0.05, logq=logq)
    assert loss_fn._kernel_applies(q, c, batch)
    got, want = _both(loss_fn, q, c, batch)
    assert want[1]["accidental_hits"] > 0 and want[1]["correct"] > 0
    _assert_same(got, want)


def test_without_masking_the_copies_stay_in_the_softmax() -> None:
    q, c, batch = _batch(3, 64, 0, n_ids=20)
    loss_fn = InBatchSoftmax(0.05, mask_accidental_hits=False)
    assert loss_fn._kernel_applies(q, c, batch)
    got, want = _both(loss_fn, q, c, batch)
    assert want[1]["accidental_hits"] == 0
    _assert_same(got, want)


def test_column_mask_is_dropped_with_the_hits() -> None:
    """LossBatch.column_mask (search fine-tuning's known positives besides each row's own) on top of the hits."""
    q, c, batch = _batch(4, 48, 8, n_ids=30)
    mask = torch.rand(48, 56, generator=torch.Generator().manual_seed(5)) < 0.1
    mask[torch.arange(48), torch.arange(48)] = False
    batch.column_mask = mask
    loss_fn = InBatchSoftmax(0.05)
    assert loss_fn._kernel_applies(q, c, batch)
    got, want = _both(loss_fn, q, c, batch)
    _assert_same(got, want)


def test_weights_fall_back_to_the_pytorch_path() -> None:
    q, c, batch = _batch(6, 32, 0, n_ids=10)
    batch.weights = torch.rand(32, generator=torch.Generator().manual_seed(1)) + 0.1
    loss_fn = InBatchSoftmax(0.05)
    assert not loss_fn._kernel_applies(q, c, batch)
    got, want = _both(loss_fn, q, c, batch)
    assert got[0] == want[0] and got[1] == want[1]


def _reference(q, c, y, scale, bias, rows, cols):
    """Cross-entropy in float64 with the dropped logits masked, as corrected_logits does."""
    z = scale * q.double() @ c.double().T + (bias.double() if bias is not None else 0.0)
    z = z.index_put((rows, cols), torch.tensor(torch.finfo(torch.float64).min / 2, dtype=torch.float64))
    return F.cross_entropy(z, y)


@pytest.mark.parametrize(("n", "block_bytes"), [
    (300, 16 * 300 * 4),  # 16 rows a row block: the drops split across blocks
    (9_000, None),        # a large catalogue: the column-tiled path, drops split across column blocks
])
def test_dropped_pairs_in_row_and_column_blocks(n: int, block_bytes: int | None, monkeypatch) -> None:
    if block_bytes is not None:
        monkeypatch.setattr(fx, "_BLOCK_BYTES", block_bytes)
        monkeypatch.setattr(fx, "_MIN_ROWS", 16)
    else:
        assert fx._BLOCK_BYTES // (4 * n) < min(300, fx._MIN_ROWS)  # tiled
    g = torch.Generator().manual_seed(n)
    b = 300
    ids = torch.randint(0, n // 3, (n,), generator=g)  # every id about three times
    y = torch.randint(0, n, (b,), generator=g)
    pos = ids[y]
    q = torch.randn(b, 16, generator=g).requires_grad_()
    c = torch.randn(n, 16, generator=g).requires_grad_()
    bias = torch.randn(n, generator=g)
    rows, cols = accidental_hit_pairs(pos, ids, y)
    assert len(rows) > b
    got, stats = fused_softmax_xent(q, c, y, 5.0, bias=bias, drop=(rows, cols), ids=(pos, ids))
    want = _reference(q, c, y, 5.0, bias, rows, cols)
    assert float(got.detach()) == pytest.approx(float(want.detach()), rel=1e-5)
    for a, w in zip(torch.autograd.grad(got, (q, c)), torch.autograd.grad(want, (q, c))):
        assert torch.allclose(a.double(), w.double(), rtol=1e-4, atol=1e-5 * float(w.abs().max()))
    assert stats["correct"] == int((ids[(q @ c.T).argmax(1)] == pos).sum())  # a copy of the positive counts
