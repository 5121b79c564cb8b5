"""The column-tiled path of :mod:`twotower.losses.fused_xent` (large catalogues), and the helpers both paths share.

Where fewer than ``_MIN_ROWS`` rows of logits fit in a block, :func:`tiled`
tiles the columns too: for a block of rows, one pass over column blocks
accumulates each row's log-sum-exp (the online softmax of Milakov & Gimelshein,
"Online normalizer calculation for softmax", 2018), and a second pass
recomputes each column block's logits, turns them into ``softmax - one-hot`` and
feeds both gradient GEMMs, writing each part of the candidate gradient once per
row block. See :mod:`twotower.losses.fused_xent` for the math and the arguments.
"""
from __future__ import annotations

import torch
from torch import Tensor

from twotower.losses.corrections import masked_logit_value
from twotower.utils.reductions import row_max

__all__ = ["TINY", "count_correct", "drop_in_block", "tiled"]

TINY = 1e-30  # probabilities at or below this are zeroed (float32 mode): see fused_xent's docstring
_TILE_ROWS = 256  # rows of a block when the columns are tiled


def drop_in_block(drop: tuple[Tensor, Tensor] | None, s: int, e: int, j: int = 0, k: int | None = None
                  ) -> tuple[Tensor, Tensor] | None:
    """The dropped ``(rows, columns)`` pairs inside rows ``[s, e)`` x columns ``[j, k)``, relative to the block."""
    if drop is None or drop[0].numel() == 0:
        return None
    rows, cols = drop
    inside = (rows >= s) & (rows < e)
    if k is not None:
        inside &= (cols >= j) & (cols < k)
    if not bool(inside.all()):
        rows, cols = rows[inside], cols[inside]
        if rows.numel() == 0:
            return None
    return rows - s, cols - j


def mask_block(z: Tensor, pairs: tuple[Tensor, Tensor] | None) -> None:
    """Give the dropped logits of block ``z`` the masked value (zero probability, as ``corrected_logits`` does)."""
    if pairs is not None:
        z.index_put_(pairs, z.new_tensor(masked_logit_value(z.dtype)))


def count_correct(top: Tensor, y: Tensor, ids: tuple[Tensor, Tensor] | None, s: int, e: int) -> int:
    """Rows of ``[s, e)`` whose first top raw score is their positive: its column, or any column carrying the row's id."""
    if ids is None:
        return int((top == y).sum())
    row_ids, col_ids = ids
    return int((col_ids[top] == row_ids[s:e]).sum())


def tiled(q: Tensor, c: Tensor, cols: Tensor, scale: float, bf16: bool, want_q: bool, want_c: bool,
          bias: Tensor | None, drop: tuple[Tensor, Tensor] | None, ids: tuple[Tensor, Tensor] | None,
          block_bytes: int) -> tuple[float, int, int, Tensor | None, Tensor | None]:
    """``fused_xent._blocks`` for a large catalogue: rows and columns tiled, two passes over the column blocks.

    Pass 1 keeps, per row, the running maximum ``m`` and ``l = sum exp(z - m)``
    (rescaled when ``m`` grows), the first top raw score's column and the
    positive's logit; the row loss is ``m + log l - z_pos``. Pass 2 recomputes
    each block's logits, ``exp(z - lse)`` minus the one-hot, and the gradient GEMMs.
    Logits and probabilities stay in float32 (bf16 mode: the GEMMs' inputs only).
    """
    b, n = q.shape[0], c.shape[0]
    rows = min(b, _TILE_ROWS)
    width = max(256, block_bytes // (4 * rows))  # columns a block: [rows, width] float32 logits in ~2 MB
    qs = q * scale  # [B, D]
    qm, cm = (q.bfloat16(), c.bfloat16()) if bf16 else (q, c)
    qsm = qs.bfloat16() if bf16 else qs
    ct = cm.T  # [D, N]
    gq = torch.zeros_like(q) if want_q else None  # [B, D]
    gc = torch.zeros_like(c) if want_c else None  # [N, D]
    total = 0.0
    correct = tied = 0

    def logits(s: int, e: int, j: int, k: int) -> tuple[Tensor, Tensor]:
        """(raw scores, biased logits) of rows [s, e) x columns [j, k), float32 (the same tensor without bias)."""
        z = torch.mm(qsm[s:e], ct[:, j:k])  # [r, w]
        z = z.float() if bf16 else z
        return z, (z + bias[j:k] if bias is not None else z)

    for s in range(0, b, rows):
        e = min(b, s + rows)
        y = cols[s:e]  # [r]
        r = e - s
        m = q.new_full((r,), float("-inf"))  # running max of the biased logits
        lsum = q.new_zeros(r)
        raw_max = q.new_full((r,), float("-inf"))
        raw_arg = torch.zeros(r, dtype=torch.long)
        z_pos = q.new_zeros(r)
        # rows whose positive falls in each column block, and the dropped logits: found once, used by both passes
        starts = list(range(0, n, width))
        inside = [((y >= j) & (y < j + width)).nonzero().squeeze(1) for j in starts]
        dropped = [drop_in_block(drop, s, e, j, min(n, j + width)) for j in starts]
        for j, here, off in zip(starts, inside, dropped):
            k = min(n, j + width)
            raw, z = logits(s, e, j, k)
            bm, ba = row_max(raw)  # the first maximum within the block
            better = bm > raw_max  # strictly: an earlier block's equal maximum stays first
            raw_arg = torch.where(better, ba + j, raw_arg)
            raw_max = torch.where(better, bm, raw_max)
            mask_block(z, off)  # after the raw maximum: a dropped column may still be the top raw score
            zm = z.amax(dim=1) if bias is not None or off is not None else bm
            new_m = torch.maximum(m, zm)
            lsum = lsum * torch.exp(m - new_m) + torch.exp(z - new_m.unsqueeze(1)).sum(dim=1)
            m = new_m
            if len(here):
                z_pos[here] = z[here, y[here] - j]
        lse = m + lsum.log()  # [r]
        total += float((lse - z_pos).double().sum())
        correct += count_correct(raw_arg, y, ids, s, e)
        tied += int((z_pos >= m).sum())
        if not (want_q or want_c):
            continue
        for j, here, off in zip(starts, inside, dropped):
            k = min(n, j + width)
            _, z = logits(s, e, j, k)
            mask_block(z, off)
            p = z.sub_(lse.unsqueeze(1)).exp_()  # [r, w] probabilities (z is this block's own tensor)
            torch.nn.functional.threshold_(p, TINY, 0.0)
            if len(here):
                p[here, y[here] - j] -= 1.0
            pm = p.bfloat16() if bf16 else p
            if gq is not None:
                if bf16:
                    gq[s:e] += torch.mm(pm, cm[j:k]).float()
                else:
                    gq[s:e].addmm_(pm, cm[j:k])  # [r, D]
            if gc is not None:
                if bf16:
                    gc[j:k] += torch.mm(pm.T, qm[s:e]).float()
                else:
                    gc[j:k].addmm_(pm.T, qm[s:e])  # [w, D]
    return total, correct, tied, gq, gc
