"""Softmax cross-entropy over a large candidate matrix, computed block by block, for CPU training.

``mean_b  -log softmax(scale * q_b . C^T)[p_b]``  with ``q[B, D]``, ``C[N, D]``
and positive columns ``p[B]`` -- the full-catalogue softmax of SASRec+
(Klenitskiy & Vasilev, "Turning Dross Into Gold Loss", RecSys 2023) and of
:class:`~twotower.losses.softmax.FullSoftmax`. The math is exactly
``F.cross_entropy(scale * q @ C.T, p)``; only the way it is computed differs.

Why a kernel of its own: with a catalogue of thousands of items and every
position of a window a query, the logits ``[B, N]`` are tens to hundreds of MB a
step. PyTorch's CPU path then spends more time outside the matrix products than
in them (``log_softmax`` forward and backward and zero-filling the ``nll_loss``
gradient took 47% of an ML-1M step), and every pass over a [B, N] tensor that
does not fit in cache runs at memory speed. Here the rows are processed in
blocks of a few hundred, sized to stay in the core's cache: for each block one
GEMM writes the logits, one fused ``softmax`` turns them into probabilities,
the one-hot is subtracted in place, and the two gradient GEMMs consume the
block at once. The loss is the end of the graph, so the gradients are computed
in the forward pass (for an upstream gradient of 1) and the backward pass only
scales them: nothing of size [B, N] outlives its block.

``precision="bf16"`` runs the three GEMMs on bfloat16 inputs and keeps the
logits and probabilities of a block in bfloat16 (every GEMM and the softmax
accumulate in float32; the loss is summed in float64). On CPUs with
native bfloat16 dot products (AVX512-BF16, AMX) the GEMMs run 2-3.5x faster;
the logits then carry bfloat16 rounding (relative 2^-9, about 0.04 on a logit
of 20), the loss an error of a few 1e-3 and the gradients a relative error of ~3e-3 -- the trade mixed-precision
training makes on accelerators. Elsewhere bfloat16 GEMMs are emulated and slow:
:func:`twotower.utils.runtime.native_bf16` says which, and ``train.precision = "auto"`` asks it.

A large catalogue changes the shape: with tens of thousands of items a 2 MB block
holds only a few rows, each skinny GEMM then reads the whole candidate matrix,
and the candidate gradient ``[N, D]`` is read and written once per block (a
sparse data set with 33.5K items and ~185 target positions a step spent 300 ms
of a 450 ms step here). Where fewer than ``_MIN_ROWS`` rows would fit in a block,
the columns are tiled too (:func:`~twotower.losses.fused_xent_tiled.tiled`): for a block of rows, one pass over
column blocks accumulates each row's log-sum-exp (the online softmax of Milakov &
Gimelshein, "Online normalizer calculation for softmax", 2018), and a second pass
recomputes each column block's logits, turns them into ``softmax - one-hot`` and
feeds both gradient GEMMs, writing each part of the candidate gradient once per
row block. That is one GEMM more than the row blocks (four instead of three),
all of them well shaped.

Probabilities below 1e-30 are set to zero in float32 mode: they change the
loss and the gradients by less than float32 resolves, and as subnormal numbers
they would make the gradient GEMMs up to 10x slower on x86 cores.

CPU float32 tensors only; :func:`fused_xent_applies` says when the kernel can
be used, and callers fall back to the PyTorch path otherwise.
"""
from __future__ import annotations

import contextlib
import functools

import torch
from torch import Tensor

from twotower.losses.side_gradient import SideGradient
from twotower.losses.fused_xent_tiled import TINY as _TINY
from twotower.losses.fused_xent_tiled import count_correct, drop_in_block, mask_block, tiled
from twotower.utils.reductions import row_argmax
from twotower.utils.runtime import native_bf16

__all__ = ["fused_softmax_xent", "fused_xent_applies", "kernel_precision", "PRECISIONS"]

PRECISIONS = ("fp32", "bf16")
_BLOCK_BYTES = 1 << 21  # logits per block: 2 MB, about one core's L2 (measured best of 0.5-8 MB, both precisions)
_MIN_ROWS = 64  # fewer rows than this in a row block (a catalogue over ~8K items in fp32): tile the columns too
# a block of at least this many rows is computed in two halves, the second on the step's side thread (where one is
# given): a half of 64 rows is ~0.1 ms of work at N = 512, against ~0.07 ms to hand it over and back
_SPLIT_ROWS = 128


def kernel_precision(setting: str) -> str:
    """``train.precision`` as the kernel takes it: ``auto`` is bf16 where this CPU multiplies bfloat16 natively."""
    if setting == "auto":
        return "bf16" if native_bf16() else "fp32"
    if setting not in PRECISIONS:
        raise ValueError(f"precision must be fp32, bf16 or auto, got {setting!r}")
    return setting


def fused_xent_applies(queries: Tensor, candidates: Tensor) -> bool:
    """True when :func:`fused_softmax_xent` can compute this loss (CPU, float32, 2-D, non-empty)."""
    return (queries.device.type == "cpu" and candidates.device.type == "cpu"
            and queries.dtype == torch.float32 and candidates.dtype == torch.float32
            and queries.dim() == 2 and candidates.dim() == 2 and queries.shape[0] > 0 and candidates.shape[0] > 0)


def _blocks(q: Tensor, c: Tensor, cols: Tensor, scale: float, bf16: bool, want_q: bool, want_c: bool,
            bias: Tensor | None = None, drop: tuple[Tensor, Tensor] | None = None,
            ids: tuple[Tensor, Tensor] | None = None, side: SideGradient | None = None,
            ) -> tuple[float, int, int, Tensor | None, Tensor | None]:
    """``(sum of row losses, rows whose first top raw score is the positive, rows whose positive ties the top,
    d sum / d q, d sum / d c)``, one block of rows at a time. ``bias[N]`` is added to every row's logits
    (the logQ correction as ``-log_q``), ``drop`` pairs are left out of their row's softmax, ``ids`` make the
    first-top count compare ids; the count then reads the raw scores, as the PyTorch path does. ``side``: the
    second half of each block of ``_SPLIT_ROWS`` rows or more is computed there while this thread computes the
    first (rows are independent; the halves' losses and probabilities are joined before they are summed or
    multiplied, so the numbers are those of the whole block), each block's product into ``d sum / d c`` is
    queued there, in block order, and ``side.grad`` set (the tiled path leaves it unset and computes the
    gradient here)."""
    b, n = q.shape[0], c.shape[0]
    fit = _BLOCK_BYTES // ((2 if bf16 else 4) * n)  # rows of [N] logits a block holds
    if fit < min(b, _MIN_ROWS):
        return tiled(q, c, cols, scale, bf16, want_q, want_c, bias, drop, ids, _BLOCK_BYTES)
    side = side if want_c else None
    rows = max(16, min(b, fit))
    qs = q * scale  # [B, D]: scaling this side saves a pass over [B, N]
    if bf16:
        qs, qm, cm = qs.bfloat16(), q.bfloat16(), c.bfloat16()
    else:
        qm, cm = q, c
    gq = torch.empty_like(q) if want_q else None  # [B, D]
    gc = torch.zeros_like(c) if want_c else None  # [N, D]
    block = functools.partial(_rows, qs, cm, cols, bf16, want_q or want_c, bias, drop, ids, gq)
    total = 0.0
    correct = tied = 0
    for s in range(0, b, rows):
        e = min(b, s + rows)
        if side is not None and e - s >= _SPLIT_ROWS:
            m = (s + e) // 2
            second = side.submit(functools.partial(block, m, e))
            try:
                first = block(s, m)
            except BaseException:
                # the side half is waited for (it writes into gq) and the first half's error raised: a Ctrl-C in the
                # first half was an UnboundLocalError of `parts` in a `finally`, a traceback out of `twotower train`
                with contextlib.suppress(BaseException):
                    second.result()
                raise
            parts = [first, second.result()]
        else:
            parts = [block(s, e)]
        row = parts[0][0] if len(parts) == 1 else torch.cat([part[0] for part in parts])  # [r]
        total += float(row.double().sum())
        correct += sum(part[1] for part in parts)
        tied += sum(part[2] for part in parts)
        if gc is None:
            continue
        ps = tuple(part[3] for part in parts)  # d row loss / d logits of the block's rows
        if side is not None:  # the same product, on the side thread: each p is this block's own
            side.run(functools.partial(_add_product, gc, ps, qm[s:e], bf16))
        else:
            _add_product(gc, ps, qm[s:e], bf16)
    if side is not None:
        side.grad = gc
    return total, correct, tied, gq, gc


def _rows(qs: Tensor, cm: Tensor, cols: Tensor, bf16: bool, grads: bool, bias: Tensor | None,
          drop: tuple[Tensor, Tensor] | None, ids: tuple[Tensor, Tensor] | None, gq: Tensor | None, s: int, e: int,
          ) -> tuple[Tensor, int, int, Tensor]:
    """Rows ``[s, e)`` of :func:`_blocks`: ``(row losses [r], correct, tied, d row loss / d logits [r, N])``, their
    rows of ``gq`` written (with ``grads``; without, the last item is the softmax)."""
    y = cols[s:e]  # [r]
    z = torch.mm(qs[s:e], cm.T)  # [r, N] logits (bfloat16 in bf16 mode: no pass to convert them)
    correct = 0
    raw_top = bias is not None or drop is not None or ids is not None
    if raw_top:  # the first top raw score (scale > 0 keeps the order), before the bias and the drops
        correct += count_correct(row_argmax(z), y, ids, s, e)
    if bias is not None:
        z += bias
    mask_block(z, drop_in_block(drop, s, e))
    p = torch.softmax(z, dim=1)  # [r, N], accumulated in float32 whatever the storage
    p_top = p.amax(dim=1)  # [r]
    p_pos = p.gather(1, y.unsqueeze(1)).squeeze(1)  # [r]
    # softmax is monotone, so a positive that ties the largest logit ties the largest probability
    top = p_pos >= p_top  # [r]
    n_top = int(top.sum())
    if n_top and not raw_top:  # the first maximum, on the few rows where it can be the positive
        hit = top.nonzero().squeeze(1)
        correct += int((row_argmax(z[hit]) == y[hit]).sum())
    # row loss = -log p_pos; where p_pos underflowed (a positive far below the top, raw dot products), from
    # the log-sum-exp instead: p_top = exp(m - lse), and p_top >= 1/N never underflows
    row = -p_pos.float().clamp_min(_TINY).log()  # [r]
    lost = (p_pos <= _TINY).nonzero().squeeze(1)
    if len(lost):
        zl = z[lost].float()  # [l, N]
        row[lost] = zl.amax(dim=1) - p_top[lost].float().log() - zl.gather(1, y[lost].unsqueeze(1)).squeeze(1)
    if not grads:
        return row, correct, n_top, p
    if not bf16:
        torch.nn.functional.threshold_(p, _TINY, 0.0)
    p[torch.arange(e - s), y] -= 1.0  # d row loss / d logits = softmax - one-hot
    if gq is not None:
        gq[s:e] = torch.mm(p, cm)  # [r, D]
    return row, correct, n_top, p


def _add_product(gc: Tensor, ps: tuple[Tensor, ...], qm: Tensor, bf16: bool) -> None:
    """``gc += p^T qm`` for one block's ``p`` (its halves ``ps``, joined), as :func:`_blocks` adds it."""
    p = ps[0] if len(ps) == 1 else torch.cat(ps)  # [r, N]
    if bf16:
        gc += torch.mm(p.T, qm)  # each block's product rounded once, summed in float32
    else:
        gc.addmm_(p.T, qm)  # [N, D]


class _FusedXent(torch.autograd.Function):
    """Forward: the loss and, block by block, its gradients. Backward: the stored gradients times the upstream one."""

    @staticmethod
    def forward(ctx, q: Tensor, c: Tensor, cols: Tensor, scale: float, bf16: bool, out: dict,  # type: ignore[override]
                bias: Tensor | None = None, drop: tuple[Tensor, Tensor] | None = None,
                ids: tuple[Tensor, Tensor] | None = None, side: SideGradient | None = None):
        b = q.shape[0]
        total, correct, tied, gq, gc = _blocks(q.detach(), c.detach(), cols, scale, bf16,
                                               ctx.needs_input_grad[0], ctx.needs_input_grad[1], bias, drop, ids, side)
        k = scale / b  # d(mean loss)/d(logit sum) times d(logit)/d(score)
        ctx.side = side if side is not None and side.grad is not None else None
        if ctx.side is not None:  # scaled there, after the blocks; autograd gives c nothing (SideGradient)
            ctx.side.run(functools.partial(gc.mul_, k))
            gc = None
        ctx.grads = (gq.mul_(k) if gq is not None else None, gc.mul_(k) if gc is not None else None)
        out["correct"] = correct
        out["accuracy"] = correct / b if b else float("nan")  # as the PyTorch path: raw scores
        return q.new_tensor(total / b)

    @staticmethod
    def backward(ctx, grad: Tensor):  # type: ignore[override]
        if ctx.grads is None:
            raise RuntimeError("fused_softmax_xent: backward called twice (retain_graph is not supported)")
        gq, gc = ctx.grads
        ctx.grads = None  # the stored gradients are handed out (and scaled in place) once
        g = float(grad)
        if g != 1.0:
            gq = gq.mul_(g) if gq is not None else None
            gc = gc.mul_(g) if gc is not None else None
            if ctx.side is not None:
                ctx.side.run(functools.partial(ctx.side.grad.mul_, g))
        return gq, gc, None, None, None, None, None, None, None, None


def fused_softmax_xent(queries: Tensor, candidates: Tensor, positive_cols: Tensor, scale: float,
                       *, precision: str = "fp32", bias: Tensor | None = None, drop: tuple[Tensor, Tensor] | None = None,
                       ids: tuple[Tensor, Tensor] | None = None, side: SideGradient | None = None,
                       ) -> tuple[Tensor, dict[str, float]]:
    """``(mean cross-entropy of softmax(scale * queries @ candidates.T + bias) at positive_cols, stats)``.

    ``bias[N]`` (optional, not differentiated): a per-column constant added to
    the logits, e.g. ``-log_q`` for the logQ correction of an in-batch softmax.
    ``drop = (rows[H], columns[H])``: logits left out of their row's softmax
    (given the masked value of ``corrected_logits``: zero probability and gradient), e.g. accidental hits.
    ``ids = (positive_ids[B], candidate_ids[N])``: ``correct`` then counts a row
    whose top raw score is any column carrying its positive's id, as ``top_is_positive`` does.
    ``side`` (:class:`~twotower.losses.side_gradient.SideGradient`): the candidates' gradient is computed on the
    training step's side thread, by the same operations in the same order; autograd gives them none.

    ``stats``: ``correct`` (rows whose first top score is the positive column)
    and ``accuracy`` (``correct / B``), as the
    PyTorch path of the softmax losses reports them. ``precision``: ``"fp32"``
    or ``"bf16"`` GEMMs (module docstring).

    Differentiable in ``queries[B, D]`` and ``candidates[N, D]``; one backward
    pass per call. Example::

        >>> import torch, torch.nn.functional as F
        >>> q, c = torch.randn(5, 4), torch.randn(7, 4)
        >>> y = torch.tensor([0, 3, 6, 1, 1])
        >>> loss, _ = fused_softmax_xent(q, c, y, 20.0)
        >>> bool(torch.isclose(loss, F.cross_entropy(20.0 * q @ c.T, y), rtol=1e-5))
        True
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    cols = positive_cols.detach().to(torch.long).contiguous()
    if bias is not None:
        if bias.shape != (candidates.shape[0],):
            raise ValueError(f"bias must be [N]={candidates.shape[0]} (one per candidate), got {tuple(bias.shape)}")
        bias = bias.detach().to(torch.bfloat16 if precision == "bf16" else torch.float32).contiguous()
    if drop is not None:
        drop = (drop[0].detach().to(torch.long), drop[1].detach().to(torch.long))
    out: dict[str, float] = {}
    loss = _FusedXent.apply(queries, candidates, cols, float(scale), precision == "bf16", out, bias, drop, ids, side)
    return loss, out
