"""Weighted sum of history embeddings in one pass: ``out[b] = sum_l w[b, l] * E[h[b, l]]``.

The pooled user towers (``model.user.history = mean | recency``) spent a third
of a default training step on the obvious form ``(E[h] * w[..., None]).sum(1)``:
it writes the ``[B, L, H]`` gather, a weighted copy of it and, backwards, its
gradient and ``embedding_dense_backward``'s sorted scatter (ML-1M, batch 512 x
50 items: 16-23 ms a step forward and backward, against 6-9 ms here).

:func:`weighted_bags` computes the sum with ``F.embedding_bag`` (gather and
weighted sum fused, nothing ``[B, L, H]`` kept) and its backward as the sum of
the ``w[b, l] * g[b]`` rows into each history item's row -- the same additions in
the same order as ``embedding_dense_backward``, so the table's gradient is
bit-identical (entries of the padding row, which never learns, are left out: 15%
of them in ML-1M's causal examples, all added serially into that one row). A
dense table on the CPU takes that sum as a sparse product ``A^T g`` with
``A[b, item] = w[b, l]`` in CSR form, built by SciPy's counting sort (which keeps
each item's entries in batch order and adds nothing up): 0.34 ms against 0.93 ms
for gathering the ``[B*L, H]`` rows and ``index_add_``-ing them (batch 512 x 50
items, H = 64, 3,322 rows, one thread), nothing of ``[B*L, H]`` written;
the forward sum may differ from the obvious form in the last bit (another
summation order). A sparse table gets a sparse COO gradient, as
``nn.Embedding(sparse=True)`` gives, for SparseAdam. The weights get their
gradient (``<E[h[b, l]], g[b]>``, what gradient x input attribution reads) only
when they require one. Under ONNX export or tracing the obvious form runs,
so the exported graph keeps standard operators.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

try:  # SciPy's COO -> CSR counting sort without the duplicate summing that csr_matrix((data, (i, j))) adds
    from scipy.sparse._sparsetools import coo_tocsr as _coo_tocsr
    from scipy.sparse._sparsetools import csr_matvecs as _csr_matvecs
except ImportError:  # a SciPy that moved its kernels: the index_add_ path below, same numbers
    _coo_tocsr = _csr_matvecs = None

__all__ = ["BagPlan", "plan_bags", "plan_bags_chunk", "weighted_bags"]


@dataclass(frozen=True)
class BagPlan:
    """The CSR structure of :func:`weighted_bags`' backward for one ``history`` and its weight sets: ids and
    weights only, no table or gradient, so it can be built before the step (training/batch_plan.py) and spare
    the backward its counting sort. Used for exactly these tensors (``history`` and ``weights`` by identity)."""

    history: Tensor  # [B, L]
    weights: tuple[Tensor, ...]  # [B, L] each
    indptr: np.ndarray  # [I + 1] int32
    indices: np.ndarray  # [K] int32: the batch row of each kept entry, in CSR order
    data: tuple[np.ndarray, ...]  # [K] float32 per weight set, in CSR order

    def fits(self, history: Tensor, weights: tuple[Tensor, ...]) -> bool:
        return self.history is history and len(weights) == len(self.weights) and all(
            a is b for a, b in zip(weights, self.weights))


def plan_bags(table: Tensor, history: Tensor, weights: list[Tensor], padding_idx: int | None) -> BagPlan | None:
    """The :class:`BagPlan` of ``weighted_bags(table, history, weights, padding_idx=...)`` for a dense table
    (None where its backward would not take the CSR path: a sparse table's is a COO tensor)."""
    if not all(_csr_applies(table, w, w, history.numel()) for w in weights):
        return None
    indptr, indices, data = _csr_structure(table.shape[0], history, weights, padding_idx)
    return BagPlan(history, tuple(weights), indptr, indices, tuple(data))


def plan_bags_chunk(table: Tensor, history: Tensor, weights: list[Tensor] | tuple[Tensor, ...],
                    padding_idx: int | None, sizes: list[int],
                    parts: list[tuple[Tensor, tuple[Tensor, ...]]]) -> list[BagPlan] | None:
    """:func:`plan_bags` of several batches in one counting sort: ``history[sum(sizes), L]`` their rows stacked (batch
    ``k`` has ``sizes[k]`` rows), ``weights`` each pool's weights stacked alike, ``parts`` each batch's own
    ``(history, weights)`` tensors (its rows of those), which its plan is for. Each entry's sort key is its batch
    and its item, so batch ``k``'s entries come out together, in its own CSR order (the sort keeps each key's
    entries in input order): the same arrays as one :func:`plan_bags` per batch. None where those would be None."""
    n_rows, K = table.shape[0], len(sizes)
    if K * n_rows >= 2**31 or not all(_csr_applies(table, w, w, history.numel()) for w in weights):
        return None
    indptr, indices, data = _csr_structure(n_rows, history, weights, padding_idx, sizes)
    plans = []
    for k, (h, ws) in enumerate(parts):
        lo, hi = indptr[k * n_rows], indptr[(k + 1) * n_rows]
        plans.append(BagPlan(h, ws, indptr[k * n_rows : (k + 1) * n_rows + 1] - lo, indices[lo:hi],
                             tuple(d[lo:hi] for d in data)))
    return plans


class _WeightedBags(torch.autograd.Function):
    """``P`` weighted sums of one ``[B, L]`` history: the pools of a tower that reads its window more than once
    (``model.user.extra_pools``) share the backward's CSR structure (one counting sort, not one per pool), or
    take it from a :class:`BagPlan` built ahead."""

    @staticmethod
    def forward(ctx, table: Tensor, history: Tensor, sparse: bool, padding_idx: int | None,  # type: ignore[override]
                plan: BagPlan | None, *weights: Tensor) -> tuple[Tensor, ...]:
        ctx.save_for_backward(table, history, *weights)
        ctx.sparse, ctx.padding_idx = sparse, padding_idx
        ctx.plan = plan if plan is not None and plan.fits(history, weights) else None
        return tuple(F.embedding_bag(history, table, mode="sum", per_sample_weights=w) for w in weights)  # [B, H] each

    @staticmethod
    def backward(ctx, *grads: Tensor):  # type: ignore[override]
        table, history, *weights = ctx.saved_tensors
        grads = tuple(g if g is not None else table.new_zeros((history.shape[0], table.shape[1])) for g in grads)
        grad_table = None
        if ctx.needs_input_grad[0]:
            if not ctx.sparse and all(_csr_applies(table, w, g, history.numel()) for w, g in zip(weights, grads)):
                plan = ctx.plan
                csr = (plan.indptr, plan.indices, plan.data) if plan is not None else _csr_structure(
                    table.shape[0], history, weights, ctx.padding_idx)
                parts = _csr_grads(table.shape[0], history.shape[0], *csr, grads)
            else:
                parts = [_rows_grad(table, history, w, g, ctx.sparse, ctx.padding_idx) for w, g in zip(weights, grads)]
            # the pools' gradients added in pool order; for two that is the sum autograd formed from two
            # separate pools (a + b == b + a in floating point), bit for bit
            grad_table = parts[0]
            for part in parts[1:]:  # into the first (a fresh tensor of this backward's) when dense: no new table
                grad_table = grad_table.add_(part) if grad_table.layout == torch.strided else grad_table + part
        grad_weights = [None] * len(weights)
        if any(ctx.needs_input_grad[5:]):
            emb = F.embedding(history, table)  # [B, L, H], gathered once for every pool that needs it
            for i, g in enumerate(grads):
                if ctx.needs_input_grad[5 + i]:
                    grad_weights[i] = (emb * g.unsqueeze(1)).sum(-1)  # [B, L]
        return (grad_table, None, None, None, None, *grad_weights)


def _csr_applies(table: Tensor, weights: Tensor, grad: Tensor, entries: int) -> bool:
    return (_coo_tocsr is not None and grad.device.type == "cpu" and max(table.shape[0], entries) < 2**31
            and grad.dtype == weights.dtype == table.dtype == torch.float32)


def _csr_structure(n_rows: int, history: Tensor, weights: list[Tensor] | tuple[Tensor, ...],
                   padding_idx: int | None, sizes: list[int] | None = None
                   ) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """``(indptr, indices, data)`` of ``A_p[b, h[b, l]] = w_p[b, l]`` for each pool ``p``: the transposed
    CSR form (a row per table row, its entries in batch order). The pools share one structure: with
    several, the counting sort runs once, on each entry's position, and every pool's weights are read
    through the permutation it gives (one pool sorts its weights directly: no permutation to gather through).
    ``sizes``: ``history`` is several batches' rows stacked (:func:`plan_bags_chunk`); the structure then has
    ``n_rows`` rows per batch, batch ``k``'s from row ``k * n_rows``, and ``indices`` counts rows within each batch."""
    B, L = history.shape
    ids = history.reshape(-1).numpy()  # [B*L]
    flat = [w.detach().reshape(-1).numpy() for w in weights]
    # padding never learns: its entries are left out. The kept entries' positions are taken once and every
    # array is gathered through them (a boolean mask indexes each array at ~3x the cost of a gather)
    keep = None if padding_idx is None else np.flatnonzero(ids != padding_idx)  # [K] entry positions
    items = (ids if keep is None else ids[keep]).astype(np.int32)
    if sizes is None or len(sizes) == 1:  # one batch (every backward without a plan): the items are the keys
        keys, rows, n_keys, n_cols = items, _batch_rows(B, L), n_rows, B
    else:  # each entry keyed by its batch and its item: batch k's entries come out together, in its own order
        batch = np.repeat(np.arange(len(sizes), dtype=np.int32), np.asarray(sizes) * L)
        keys = items + (batch if keep is None else batch[keep]) * np.int32(n_rows)
        rows = np.concatenate([_batch_rows(b, L) for b in sizes])  # each entry's row in its batch
        n_keys, n_cols = len(sizes) * n_rows, max(sizes)
    cols = rows if keep is None else rows[keep]
    indptr = np.empty(n_keys + 1, np.int32)
    indices = np.empty(items.size, np.int32)
    if len(flat) == 1:
        data = [np.empty(items.size, np.float32)]
        w = np.ascontiguousarray(flat[0] if keep is None else flat[0][keep])
        _coo_tocsr(n_keys, n_cols, items.size, keys, cols, w, indptr, indices, data[0])
    else:  # the sort moves each kept entry's position with it: ``order`` is their CSR order
        entry = (np.arange(items.size) if keep is None else keep).astype(np.int32)
        order = np.empty(items.size, np.int32)
        _coo_tocsr(n_keys, n_cols, items.size, keys, cols, entry, indptr, indices, order)
        data = [f[order] for f in flat]  # [K] float32 each, in CSR order
    return indptr, indices, data


def _csr_grads(n_rows: int, B: int, indptr: np.ndarray, indices: np.ndarray,
               data: list[np.ndarray] | tuple[np.ndarray, ...], grads: tuple[Tensor, ...]) -> list[Tensor]:
    """``A_p^T g_p`` (:func:`_csr_structure`): each pool's dense table gradient, each row's terms added in
    batch order (what ``index_add_`` of the ``w[b, l] * g[b]`` rows does, bit for bit)."""
    H = grads[0].shape[1]
    out = []
    for d, g in zip(data, grads):
        t = np.zeros((n_rows, H), np.float32)
        _csr_matvecs(n_rows, B, H, indptr, indices, d, g.detach().contiguous().numpy().ravel(), t.ravel())
        out.append(torch.from_numpy(t))
    return out


@functools.lru_cache(maxsize=8)
def _batch_rows(B: int, L: int) -> np.ndarray:
    """``[B*L]`` int32: the batch row of each entry of a ``[B, L]`` history (read-only; one per batch shape)."""
    rows = np.repeat(np.arange(B, dtype=np.int32), L)
    rows.flags.writeable = False
    return rows


def _rows_grad(table: Tensor, history: Tensor, weights: Tensor, grad: Tensor, sparse: bool,
               padding_idx: int | None) -> Tensor:
    """The table's gradient from the ``w[b, l] * g[b]`` rows: sparse COO (for SparseAdam), or ``index_add_``-ed."""
    (B, L), H = history.shape, grad.shape[1]
    flat = history.reshape(-1)  # [B*L]
    if padding_idx is not None:
        # padding never learns, so its entries (the short histories' left columns: a fifth of
        # ML-1M's causal examples) are left out rather than computed and added into one row
        # serially; the other rows' additions keep their order
        keep = (flat != padding_idx).nonzero().squeeze(1)  # [K]
        rows = grad.index_select(0, keep // L).mul_(weights.reshape(-1, 1).index_select(0, keep))  # [K, H]
        flat = flat.index_select(0, keep)
    else:
        # into a fresh contiguous buffer: a plain broadcast product comes out permuted and costs a copy
        rows = torch.empty((B, L, H), dtype=grad.dtype, device=grad.device)
        torch.mul(grad.unsqueeze(1).expand(B, L, H), weights.unsqueeze(2), out=rows)
        rows = rows.view(B * L, H)  # [B*L, H]: row (b, l) is w[b, l] * g[b]
    if sparse:
        return torch.sparse_coo_tensor(flat.unsqueeze(0), rows, table.shape, check_invariants=False)
    return grad.new_zeros(table.shape).index_add_(0, flat, rows)


def weighted_bags(table: Tensor, history: Tensor, weights: list[Tensor], *, sparse: bool = False,
                  padding_idx: int | None = None, plan: BagPlan | None = None) -> list[Tensor]:
    """``sum_l w[b, l] * table[history[b, l]]`` for each weight set ``w`` over one history: ``[B, L]`` ids and
    weights -> ``[B, H]`` per set. The same values as one call per set; the table's gradient is their sum
    (bit-identical to separate calls for up to two sets; three or more are added in list order, which autograd
    need not follow: last-bit differences). ``sparse``: the table's gradient as a sparse COO tensor (for a table
    built with ``sparse=True``); ``padding_idx``: a row that gets no gradient, as in ``nn.Embedding``.
    ``plan``: :func:`plan_bags` of these ``history`` and ``weights``, built ahead (the same numbers)."""
    for w in weights:
        if history.shape != w.shape:
            raise ValueError(f"history {tuple(history.shape)} and weights {tuple(w.shape)} must have one shape")
    if torch.onnx.is_in_onnx_export() or torch.jit.is_tracing() or torch.jit.is_scripting():
        return [(F.embedding(history, table) * w.unsqueeze(-1)).sum(dim=1) for w in weights]
    return list(_WeightedBags.apply(table, history, sparse, padding_idx, plan, *(w.to(table.dtype) for w in weights)))
