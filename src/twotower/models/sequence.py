"""Sequence encoders for user towers: a causal transformer (SASRec) and a GRU (GRU4Rec).

Both read a right-aligned window of item embeddings ``x[B, L, H]`` (the
newest item in the last column) with a mask ``valid[B, L]`` (False on
padding and on columns an explanation removed) and return a state at every
column, ``[B, L, H]``, where the state at column ``t`` depends only on the
valid columns ``<= t``. That one property gives both uses:

* training on whole windows: the state at ``t`` predicts the item after ``t``
  (the all-positions causal objective, one forward pass per user);
* serving: the state at the newest valid column is the user's vector, and a
  removed column changes nothing but its own absence (exact leave-one-out).

States at invalid columns are finite but meaningless; callers mask them.

References: W.-C. Kang and J. McAuley, "Self-Attentive Sequential
Recommendation", ICDM 2018; B. Hidasi et al., "Session-based Recommendations
with Recurrent Neural Networks", ICLR 2016.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from twotower.config import TowerConfig
from twotower.models.dropout import Dropout
from twotower.models.dropout import dropout as cheap_dropout

__all__ = ["CausalTransformer", "GRUEncoder", "SEQ_BLOCKS", "SEQUENCE_KINDS", "build_sequence_encoder"]

SEQUENCE_KINDS = ("transformer", "gru")


SEQ_BLOCKS = ("pre_ln", "sasrec")


def _attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> Tensor:
    """``softmax(q kᵀ / √d + mask) v`` for ``q[B, h, n, d]``, ``k, v[B, h, L, d]`` and an additive ``mask[B, 1, n, L]``.

    In the mask's dtype (:meth:`CausalTransformer.forward` chooses it). Training in bfloat16 (a bf16 mask while
    gradients are on), it is written out as two batched products around a softmax: on a CPU with native bfloat16,
    forward + backward at the sequence recipe's shapes (16 windows x 2 heads x 64-200 columns, head size 64, one
    thread) take 1.6 / 4.5 / 10 ms at 64 / 120 / 200 columns against 2.2 / 8.2 / 22 ms for PyTorch's flash kernel in
    float32 and 5.7 / 14 / 23 ms in bfloat16. Scores and probabilities are then bfloat16 (the softmax sums in
    float32), as in mixed-precision attention on GPUs without a fused kernel. Otherwise PyTorch's SDPA, which
    does not materialise the ``[n, L]`` scores (the faster kernel for inference batches of 256 windows).
    """
    if mask.dtype == torch.bfloat16 and torch.is_grad_enabled():
        scores = torch.matmul(q * q.shape[-1] ** -0.5, k.transpose(-1, -2))  # [B, h, n, L]
        return torch.matmul(torch.softmax(scores + mask, dim=-1), v)  # [B, h, n, d]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


class _Block(nn.Module):
    """One self-attention block, in one of two forms (``block``).

    ``pre_ln``: ``x + Attn(LN(x))``, then ``x + FFN(LN(x))`` (GELU), the usual
    pre-LayerNorm transformer. ``sasrec``: the block of SASRec's reference
    code, which SASRec+ reuses: queries from ``y = LN1(x)``, keys and values
    from ``x`` itself, the residual taken from ``y``: ``x' = y + Attn(y, x, x)``;
    then ``z = LN2(x')``, ``z + FFN(z)`` (ReLU).
    """

    def __init__(self, dim: int, heads: int, dropout: float, block: str = "pre_ln", rng: str = TowerConfig.dropout_rng) -> None:
        super().__init__()
        if block not in SEQ_BLOCKS:
            raise ValueError(f"unknown transformer block {block!r}; choose one of {', '.join(SEQ_BLOCKS)}")
        self.sasrec = block == "sasrec"
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        # SASRec's point-wise feed-forward keeps the width (dim -> dim -> dim): on a CPU a 4x inner
        # layer would cost more than the full-catalogue softmax it feeds
        act = nn.ReLU() if self.sasrec else nn.GELU()
        self.ff = nn.Sequential(nn.Linear(dim, dim), act, Dropout(dropout, rng), nn.Linear(dim, dim))
        self.dropout = dropout
        self.rng = rng

    def forward(self, x: Tensor, mask: Tensor, at: Tensor | None = None) -> Tensor:
        """``x[B, L, H]``, additive ``mask[B, 1, L, L]`` (0 = may attend, -inf = may not) -> ``[B, L, H]``.

        With ``at[B]`` only column ``at[b]`` of each row is computed (keys and
        values still come from every column): ``[B, 1, H]``, what the last
        block of an encoder needs when only one state per row is read.
        Dropout acts on the residual branches, not on the attention
        probabilities: on CPU, attention dropout makes SDPA ~5x slower.
        """
        B, L, H = x.shape
        h, d = self.heads, H // self.heads
        p = self.dropout if self.training else 0.0
        y = self.ln1(x)
        if at is None and not self.sasrec:  # one fused map when queries, keys and values read the same input
            q, k, v = self.qkv(y).view(B, L, 3, h, d).permute(2, 0, 3, 1, 4)  # 3 x [B, h, L, H/h]
        else:
            if at is not None:
                rows = torch.arange(B, device=x.device)
                mask = mask[rows, :, at].unsqueeze(2)  # [B, 1, 1, L]
            w, b = self.qkv.weight, self.qkv.bias  # [3H, H], [3H]: the query, key and value maps stacked
            kv = F.linear(x if self.sasrec else y, w[H:], b[H:])  # keys and values from every column
            k, v = kv.view(B, L, 2, h, d).permute(2, 0, 3, 1, 4)  # 2 x [B, h, L, H/h]
            if at is not None:
                x, y = x[rows, at].unsqueeze(1), y[rows, at].unsqueeze(1)  # [B, 1, H]
            q = F.linear(y, w[:H], b[:H]).view(B, -1, h, d).transpose(1, 2)  # [B, h, n, H/h]
        n = x.shape[1]
        with torch.autocast("cpu", enabled=False):
            a = _attention(q.to(mask.dtype), k.to(mask.dtype), v.to(mask.dtype), mask)  # [B, h, n, H/h]
        x = (y if self.sasrec else x) + cheap_dropout(self.proj(a.transpose(1, 2).reshape(B, n, H)), p, self.training, self.rng)
        if self.sasrec:
            z = self.ln2(x)
            return z + cheap_dropout(self.ff(z), p, self.training, self.rng)
        return x + cheap_dropout(self.ff(self.ln2(x)), p, self.training, self.rng)


def _bf16_training(x: Tensor) -> bool:
    """Gradients on, under CPU autocast to bfloat16 (the trainer's ``train.precision = bf16``)."""
    return (x.device.type == "cpu" and torch.is_grad_enabled() and torch.is_autocast_enabled("cpu")
            and torch.get_autocast_dtype("cpu") == torch.bfloat16)


class CausalTransformer(nn.Module):
    """SASRec-style causal self-attention over a right-aligned window.

    Learned absolute positions. With ``positions="right"`` they are indexed
    by column, so the newest item always sits at position ``max_len - 1`` and
    a position encodes recency (as in SASRec's left-padded windows). With
    ``"left"`` the valid items are numbered from the oldest one read
    (position 0), as in the right-padded windows of SASRec+: the position
    then says how far into the window an item is, for a short history how
    far into the user's whole history. Either way a padding column takes no
    position and gets no attention, so trimming padding gives the states of
    the untrimmed window exactly. A column removed by weight (leave-one-out
    in ``explain``) is read as padding: with ``"left"`` that equals deleting
    the item (the later items move up one position); with ``"right"`` the
    older items keep their columns, i.e. their recency positions, so
    ``explain`` re-reads such a window without the item instead
    (explain/attribution.py). Column ``t`` attends to valid
    columns ``<= t``; every column also attends to itself so a fully masked
    row stays finite.

    ``block="sasrec"`` takes SASRec's reference block (:class:`_Block`) and,
    as that code does, multiplies the item embeddings by ``sqrt(dim)`` before
    the positions are added, so the item dominates its position at the start.
    """

    def __init__(self, dim: int, max_len: int, *, layers: int, heads: int, dropout: float,
                 positions: str = "right", block: str = "pre_ln", rng: str = TowerConfig.dropout_rng) -> None:
        super().__init__()
        if dim % heads:
            raise ValueError(f"sequence encoder width {dim} is not divisible by {heads} heads")
        if positions not in ("right", "left"):
            raise ValueError(f"positions must be 'right' or 'left', got {positions!r}")
        self.positions = positions
        self.max_len = max_len
        self.pos = nn.Parameter(torch.randn(max_len, dim) * 0.02)
        self.drop = Dropout(dropout, rng)
        self.blocks = nn.ModuleList(_Block(dim, heads, dropout, block, rng) for _ in range(layers))
        self.input_scale = float(dim) ** 0.5 if block == "sasrec" else 1.0
        self.ln = nn.LayerNorm(dim)
        self.register_buffer("causal", torch.ones(max_len, max_len, dtype=torch.bool).tril(), persistent=False)

    def forward(self, x: Tensor, valid: Tensor, at: Tensor | None = None) -> Tensor:
        """States ``[B, L, H]`` at every column of ``x[B, L, H]``, or with ``at[B]`` only at those columns: ``[B, H]``.

        ``at`` saves the last block's work on the other columns (a user's
        vector is the state at its newest valid column).
        """
        B, L, H = x.shape
        if L > self.max_len:
            raise ValueError(f"history window of {L} columns is longer than the encoder's {self.max_len} positions")
        if self.input_scale != 1.0:
            x = x * self.input_scale
        if self.positions == "right":  # aligned to the right edge: column L-1 is position max_len-1
            x = x + self.pos[self.max_len - L :]
        else:  # the k-th valid column (oldest first) is position k; other columns take position 0, unused
            order = (valid.to(torch.long).cumsum(1) - 1).clamp_min(0)  # [B, L]
            # an embedding lookup, not `self.pos[order]`: that indexing's backward adds the rows' gradients with
            # index_put's threads in no fixed order, so two runs on 2 threads trained different weights (the gradient
            # of `pos` 1e-6 apart at the first step); embedding's backward sums in a fixed order, and 2x as fast
            x = x + F.embedding(order, self.pos)
        x = self.drop(x)
        eye = torch.eye(L, dtype=torch.bool, device=x.device)
        allowed = (self.causal[:L, :L].unsqueeze(0) & valid.unsqueeze(1)) | eye  # [B, L(query), L(key)]
        # an additive float mask takes SDPA's fast path on CPU (a boolean one does not); one pass to build it.
        # Its dtype is attention's: the residual stream's (float32 under autocast too), or bfloat16 when training
        # under bf16 autocast (train.precision), where the bfloat16 products are 2-3x faster (_attention)
        dt = torch.bfloat16 if _bf16_training(x) else x.dtype
        mask = torch.where(allowed, torch.zeros((), dtype=dt, device=x.device),
                           torch.full((), float("-inf"), dtype=dt, device=x.device)).unsqueeze(1)  # [B, 1, L, L]
        last = len(self.blocks) - 1
        for i, block in enumerate(self.blocks):
            x = block(x, mask, at if i == last else None)
        x = self.ln(x)  # [B, L, H], or [B, 1, H] with `at`
        return x if at is None else x.squeeze(1)


class GRUEncoder(nn.Module):
    """A GRU over the valid items of each window, oldest first.

    Valid columns are packed to the left (order kept), run through
    ``nn.GRU`` in one call, and the states gathered back to their columns. Padding ends up after the last valid item, and a recurrence is
    causal, so it never reaches a valid state; a removed column is skipped,
    not fed as a zero.
    """

    def __init__(self, dim: int, *, layers: int, dropout: float, rng: str = TowerConfig.dropout_rng) -> None:
        super().__init__()
        self.gru = nn.GRU(dim, dim, num_layers=layers, batch_first=True, dropout=dropout if layers > 1 else 0.0)
        self.drop = Dropout(dropout, rng)
        self.ln = nn.LayerNorm(dim)

    def forward(self, x: Tensor, valid: Tensor, at: Tensor | None = None) -> Tensor:
        """States ``[B, L, H]`` at every column, or with ``at[B]`` only at those columns: ``[B, H]``."""
        B, L, H = x.shape
        # each column's slot in the packed row: valid columns first, in order, then the others
        # (cumulative sums rather than a sort, so the graph exports to ONNX)
        v = valid.to(torch.long)
        n_valid = v.sum(dim=1, keepdim=True)  # [B, 1]
        slot = torch.where(valid, v.cumsum(1) - 1, n_valid + (1 - v).cumsum(1) - 1)  # [B, L], a permutation
        idx = slot.unsqueeze(-1).expand(B, L, H)
        packed = torch.zeros_like(x).scatter(1, idx, self.drop(x))  # [B, L, H]
        out, _ = self.gru(packed)  # [B, L, H]
        states = self.ln(out.gather(1, idx))  # back to the original columns
        return states if at is None else states[torch.arange(B, device=x.device), at]


def build_sequence_encoder(kind: str, dim: int, max_len: int, *, layers: int, heads: int, dropout: float,
                           positions: str = "right", block: str = "pre_ln", rng: str = TowerConfig.dropout_rng) -> nn.Module:
    if kind == "transformer":
        return CausalTransformer(dim, max_len, layers=layers, heads=heads, dropout=dropout, positions=positions,
                                 block=block, rng=rng)
    if kind == "gru":
        return GRUEncoder(dim, layers=layers, dropout=dropout, rng=rng)
    raise ValueError(f"unknown sequence encoder {kind!r}; choose one of {', '.join(SEQUENCE_KINDS)}")
