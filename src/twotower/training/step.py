"""One recommender training step under the loss contract: candidates, loss, backward, cross-rank sync.

The step reads the loss's :attr:`~twotower.losses.base.RetrievalLoss.needs`
to build the candidate rows -- the batch's positives (+ uniform extras), sampled
negatives, the whole catalogue or BPR pairs -- embeds them with the item tower,
calls ``loss(queries, candidates, LossBatch)`` and backpropagates, plainly or
with GradCache (every loss whose score depends on the towers only through the
two embedding matrices). Under torchrun, random negatives are drawn for the
GLOBAL batch from a generator every rank shares and sliced per rank, each
rank's loss is scaled by ``W * B_rank / B_global`` and gradients are averaged
with one all-reduce (:func:`sync_grads`), so the update equals one process's; the ranks' shares of the loss
and accuracy are summed on the way, so every rank knows the step's values as one process computes them.
The sequence objective counts target positions instead of examples: ``B`` is
then this rank's positions, ``n_global`` the global ones and ``span`` this
rank's ``[start, stop)`` among them.

Shape legend: ``B`` this rank's queries, ``N`` candidates, ``D`` dim, ``I`` items, ``M`` negatives.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import replace
from typing import Any

import torch
from torch import Tensor

from twotower.config import LossConfig
from twotower.distributed import gather_no_grad
from twotower.losses.base import LossBatch, RetrievalLoss
from twotower.losses.corrections import mixture_log_q
from twotower.losses.sampling import sample_negatives
from twotower.models.dropout import Dropout, masks_ahead
from twotower.models.dropout_plan import DropoutCalls, step_dropout_calls
from twotower.models.towers import PoolPlan
from twotower.models.two_tower import TwoTowerModel
from twotower.training.gradcache import chunked, gradcache_step
from twotower.training.side_worker import SideWorker
from twotower.training.tower_overlap import backward_beside, item_side_blocker, side_gradient, split_item_graph

__all__ = ["share", "RecStep", "sync_grads", "candidate_log_q", "loss_log_q"]


def share(n: int, world: int, rank: int) -> tuple[int, int]:
    """``[start, stop)`` of rank's contiguous part of ``n`` rows (``np.array_split`` sizes)."""
    base, extra = divmod(n, world)
    start = rank * base + min(rank, extra)
    return start, start + base + (rank < extra)


def candidate_log_q(item_probs: Tensor, n_draws: int, n_uniform: int, *, dedup: bool = False) -> Tensor:
    """Log expected presence of each item among one batch's candidates, ``[I]``.

    ``n_draws`` positives drawn from ``item_probs`` plus ``n_uniform`` uniform
    negatives: ``log(n p_i + M / I)`` (the mixture logQ). With ``dedup`` (each
    id kept once, as the sequence objective does with its many positions) the
    quantity is the probability that ``i`` is present at all,
    ``log(1 - (1 - p_i)^n (1 - 1/I)^M)``, which is ``log(n p_i + M / I)`` for rare items.
    """
    p = item_probs.double()
    n_items = p.shape[0]
    if not dedup:
        return torch.log(n_draws * p + n_uniform / n_items).float()
    absent = torch.exp(n_draws * torch.log1p(-p.clamp_max(1 - 1e-12)) + n_uniform * math.log1p(-1 / n_items))
    return torch.log(-torch.expm1(torch.log(absent))).float()


def loss_log_q(cfg: LossConfig, loss: RetrievalLoss, item_probs: Tensor, batch: int, *,
               dedup_draws: int | None = None) -> Tensor | None:
    """Per-item ``log_q[I]`` of the candidates ``loss`` sees (None when it uses none).

    Sampled softmax: the sampler's own distribution (constant for uniform: it
    cancels out). In-batch: the mixture logQ of ``batch`` positives and
    ``cfg.uniform_negatives`` uniform extras; with ``dedup_draws`` (the
    sequence objective's de-duplicated candidates: the target positions of a
    batch) the probability of being present among that many draws.
    """
    if not (loss.uses_log_q and cfg.logq):
        return None
    if cfg.kind == "sampled":
        q = item_probs if cfg.sampler == "popularity" else torch.full_like(item_probs, 1.0 / len(item_probs))
        return torch.log(q.clamp_min(1e-12))
    if dedup_draws is not None:
        return candidate_log_q(item_probs, dedup_draws, cfg.uniform_negatives, dedup=True)
    return mixture_log_q(item_probs, batch, cfg.uniform_negatives)


class RecStep:
    """Candidates + loss + backward for the recommender; ``world``/``rank`` describe the data-parallel split."""

    def __init__(self, model: TwoTowerModel, loss: RetrievalLoss, *, n_uniform: int, n_sampled: int,
                 sampler_probs: Tensor | None, log_q: Tensor | None, gradcache_chunk: int | None,
                 generator: torch.Generator, world: int = 1, rank: int = 0, dedup: bool = False,
                 bf16: bool = False) -> None:
        self.model, self.loss = model, loss
        self.n_uniform, self.n_sampled = n_uniform, n_sampled
        self.sampler_probs = sampler_probs  # [I] or None (uniform) for sampled negatives
        self.log_q = log_q  # [I] per-item log_q table of the candidates (None: the loss needs none)
        self.chunk = gradcache_chunk
        self.gen = generator
        self.world, self.rank = world, rank
        # de-duplicate in-batch candidates (the sequence objective: B * L positions, far fewer distinct items)
        self.dedup = dedup
        # the towers under CPU autocast to bfloat16 (train.precision); their outputs and the loss in float32
        self.bf16 = bf16
        # why the item tower's backward cannot run beside the user tower's (None: it can; training/tower_overlap.py),
        # and the thread it runs on: set by the epoch for its steps where train.overlap_towers and a spare core allow
        self.blocker = item_side_blocker(model, loss)
        self.side: SideWorker | None = None
        # the forward pass's dropout calls for (queries, candidates): the towers' structure, listed once a shape
        self._dropout_calls: dict[tuple[int, int], DropoutCalls | None] = {}

    def candidates(self, targets: Tensor, n_global: int, span: tuple[int, int] | None = None) -> tuple[Tensor | None, int]:
        """Candidate ids ``[N]`` for this rank (None: the whole catalogue) and how many random draws were global.

        ``span``: this rank's rows ``[start, stop)`` of the ``n_global`` global
        ones (default: its :func:`share`).
        """
        m, needs, dev = self.model, self.loss.needs, targets.device
        if needs == "catalogue":
            return None, 0
        if needs == "batch":
            if not self.n_uniform:
                return targets, 0
            extra = torch.randint(0, m.n_items, (self.n_uniform,), generator=self.gen).to(dev)  # [M] global
            lo, hi = share(self.n_uniform, self.world, self.rank)
            return torch.cat([targets, extra[lo:hi]]), self.n_uniform
        if needs == "sampled":
            # shared negatives: the same M on every rank (same generator), not split
            neg = sample_negatives(self.n_sampled, self.sampler_probs, m.n_items, self.gen).to(dev)  # [M]
            return torch.cat([targets, neg]), self.n_sampled
        # pairs (BPR): one uniform negative per global example (sequence: per target position), sliced like them
        lo, hi = span if span is not None else share(n_global, self.world, self.rank)
        neg = torch.randint(0, m.n_items, (n_global,), generator=self.gen)[lo:hi].to(dev)  # [B]
        return torch.cat([targets, neg]), n_global

    def dropout_calls(self, n_queries: int, n_candidates: int) -> DropoutCalls | None:
        """:func:`~twotower.models.dropout_plan.step_dropout_calls` of this step's model, kept per shape: the batch
        plans ask it every step, on the prefetch thread, and the answer depends on the model's layers alone."""
        key = (n_queries, n_candidates)
        if key not in self._dropout_calls:
            self._dropout_calls[key] = step_dropout_calls(self.model, n_queries, n_candidates)
        return self._dropout_calls[key]

    def embed_candidates(self, cand_ids: Tensor | None) -> Tensor:
        m = self.model
        if cand_ids is None:
            return m.item_tower(torch.arange(m.n_items, device=self._device()))  # [I, D]
        return m.item_tower(cand_ids)  # [N, D]

    def _in_precision(self, embed: Callable[[Any], Tensor]) -> Callable[[Any], Tensor]:
        """``embed`` under the towers' precision (train.precision), its output in float32 for the loss: GradCache's
        chunks, in both of its passes, ran in fp32 whatever train.precision said."""
        if not self.bf16:
            return embed

        def run(chunk: Any) -> Tensor:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                out = embed(chunk)
            return out.float()

        return run

    def _device(self) -> torch.device:
        return next(self.model.parameters()).device

    def __call__(self, users: Tensor, history: Tensor | None, targets: Tensor, n_global: int, scale: float,
                 *, queries_fn=None, span: tuple[int, int] | None = None, pools: PoolPlan | None = None,
                 loss_batch: LossBatch | None = None, masks: Sequence[tuple[Dropout, Tensor]] | None = None,
                 ) -> tuple[float, dict[str, float], Tensor, Tensor]:
        """Forward and backward of this rank's ``B`` examples; ``(loss, stats, queries, positives)`` detached.

        ``queries_fn(users, history) -> [B, D]`` replaces the user tower (the
        sequence objective embeds many positions per user). ``scale`` multiplies
        the loss before backward (the cross-rank share); ``span`` as in :meth:`candidates`.
        ``pools`` (the user tower's pools of ``history``) and ``loss_batch`` (the
        loss's batch, for candidates drawn without randomness) built ahead of
        the step from the ids alone (training/batch_plan.py); ``masks``: the forward pass's dropout masks drawn
        ahead (models/dropout_plan.py; the plain step only: GradCache runs the towers in another order).
        """
        m = self.model
        cols = None
        if loss_batch is not None:
            cand_ids, batch = loss_batch.candidate_ids, loss_batch
        else:
            cand_ids, _ = self.candidates(targets, n_global, span)
            if self.dedup and self.loss.needs == "batch":
                cand_ids, inverse = torch.unique(cand_ids, return_inverse=True)  # [N'] distinct ids
                cols = inverse[: targets.shape[0]]  # [P] each target's column
            batch = LossBatch(positive_ids=targets, candidate_ids=cand_ids, positive_cols=cols,
                              log_q=self.log_q[cand_ids] if self.log_q is not None and cand_ids is not None else None)
        embed_q = queries_fn or (lambda u, h: m.user_tower(u, h, pools=pools))
        stats: dict[str, float] = {}
        if self.chunk is None or not self.loss.gradcache:
            with (torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bf16),
                  masks_ahead(masks) if masks is not None else nullcontext()):
                q = embed_q(users, history)  # [B, D]
                cands = self.embed_candidates(cand_ids)  # [N, D]
            if self.bf16:
                q, cands = q.float(), cands.float()
            side = self.side
            c_in = split_item_graph(cands) if side is not None else cands
            deferred = side_gradient(q, cands, side) if side is not None else None
            loss, stats = self.loss(q, c_in, replace(batch, side_gradient=deferred) if deferred is not None else batch)
            scaled = loss * scale if scale != 1.0 else loss
            if side is None:
                scaled.backward()
            else:
                backward_beside(scaled, q, c_in, cands, side, deferred)
            value = float(loss.detach())
            q, cands = q.detach(), cands.detach()
        else:
            seen: dict[str, Tensor] = {}

            def scaled_loss(q: Tensor, c: Tensor) -> Tensor:
                seen["q"], seen["c"] = q.detach(), c.detach()
                loss, st = self.loss(q, c, batch)
                stats.update(st)
                return loss * scale if scale != 1.0 else loss

            all_ids = cand_ids if cand_ids is not None else torch.arange(m.n_items, device=targets.device)
            value = float(gradcache_step(
                self._in_precision(lambda ch: embed_q(ch["users"], ch["history"])), self._in_precision(m.item_tower),
                chunked({"users": users, "history": history}, self.chunk), chunked(all_ids, self.chunk), scaled_loss,
            )) / scale
            q, cands = seen["q"], seen["c"]
        b = targets.shape[0]
        pos = cands[targets] if cand_ids is None else (cands[cols] if cols is not None else cands[:b])
        return value, stats, q, pos


def sync_grads(model: torch.nn.Module, sparse_ids: set[int], world: int, shares: Sequence[float] = ()) -> list[float]:
    """Average ``.grad`` over ranks (one flat all-reduce for dense, a gather for sparse grads); ``shares`` summed.

    A parameter no rank touched keeps ``grad=None`` (so the optimizer skips
    it, as in one process); one that some rank touched gets a zero local
    gradient where missing before averaging. ``shares``: this rank's shares of the step's values (its loss and
    accuracy), returned summed over ranks: the global batch's values, every step, on every rank. They ride on the
    all-reduce of the gradients' flags, so the progress line can show the loss one process shows at no collective
    of its own.
    """
    import torch.distributed as dist

    params = [p for p in model.parameters() if p.requires_grad]
    device = params[0].device
    # float64: the shares are summed as the epoch's totals are; the flags count the ranks that touched a parameter
    flags = torch.tensor([float(p.grad is not None) for p in params] + [float(v) for v in shares], dtype=torch.float64,
                         device=device)  # [P + S]
    dist.all_reduce(flags)
    dense: list[Tensor] = []
    for p, n_used in zip(params, flags[: len(params)].tolist()):
        if not n_used:
            continue
        if id(p) in sparse_ids:
            _sync_sparse(p, world)
            continue
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        dense.append(p)
    if dense:
        flat = torch.cat([p.grad.reshape(-1) for p in dense])  # [sum of numels]
        dist.all_reduce(flat)
        flat /= world
        for p, g in zip(dense, flat.split([p.numel() for p in dense])):
            p.grad.copy_(g.view_as(p.grad))
    return flags[len(params) :].tolist()


def _sync_sparse(p: Tensor, world: int) -> None:
    if p.grad is None:
        g = torch.sparse_coo_tensor(torch.empty((1, 0), dtype=torch.long, device=p.device), p.new_zeros((0, *p.shape[1:])),
                                    p.shape, check_invariants=False)
    else:
        g = p.grad.coalesce()
    rows = gather_no_grad(g.indices().T.contiguous())  # [nnz_total, 1]
    values = gather_no_grad(g.values().contiguous()) / world  # [nnz_total, D]
    p.grad = torch.sparse_coo_tensor(rows.T, values, p.shape, check_invariants=False).coalesce()
