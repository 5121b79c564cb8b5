"""The training loop: examples -> towers -> loss, with per-epoch validation and diagnostics.

Every epoch logs loss, in-batch accuracy, embedding spread (with the collapse
alarm), alignment/uniformity, the dual-head gate α and validation metrics to a
JSONL file and a PNG of the curves in the run folder; the best weights by
validation metric are kept, and a checkpoint (weights, optimizer, RNG) is
written atomically after each epoch so ``resume`` loses at most one epoch.

Data parallelism. Launched by ``torchrun`` (``WORLD_SIZE > 1``) the trainer
joins the process group (gloo; the trainer computes on CPU) and:

* reads ``train.batch_size`` as the GLOBAL batch: every rank draws the same
  epoch permutation (seeded by ``(train.seed, epoch)``), cuts the same global
  batches and takes its contiguous slice ``np.array_split(batch, W)[rank]``,
  so W ranks see exactly the examples one process sees, in the same order;
* uses :class:`~twotower.losses.distributed.DistributedInBatchSoftmax`
  (negatives from every rank, logQ from the global batch size, accidental
  hits masked with global ids); uniform and BPR negatives are drawn for the
  global batch from a generator shared by all ranks and sliced per rank;
* scales each rank's mean loss by ``W * B_rank / B_global`` and averages
  gradients over ranks with one all-reduce after backward (a manual
  all-reduce rather than DDP, because the towers are called separately and
  GradCache runs them chunk by chunk; sparse ID-table gradients are gathered),
  so the update is the one-process update on the global batch;
* reduces loss and in-batch accuracy over ranks; validation, diagnostics,
  weights, checkpoint, log and plot happen on rank 0 while the others wait
  at a barrier, and rank 0's validation metric is broadcast so early stopping
  agrees everywhere.

The checkpoint holds no world-size-specific state (rank 0's weights,
optimizer, epoch; the permutation depends only on seed and epoch), so a run
may resume on any number of processes. Denoising subsets and dropout masks
come from per-rank streams: equal in distribution to one process, not bit
for bit.

GradCache (``train.gradcache_chunk = C``, in-batch loss only) runs the towers
C examples at a time while the loss sees the whole (global) batch, with the
same gradients as the plain step (:mod:`twotower.training.gradcache`).
"""
from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from tqdm.auto import tqdm

from twotower.config import EvalConfig, LossConfig, TrainConfig
from twotower.evaluation.protocol import EvalProtocol, evaluate
from twotower.errors import ConfigError
from twotower.losses import BPRLoss, FullSoftmax, InBatchSoftmax, mixture_log_q
from twotower.losses.distributed import DistributedInBatchSoftmax, gather_no_grad
from twotower.models.history import UserSequences
from twotower.models.two_tower import TwoTowerModel
from twotower.training.checkpoint import load_checkpoint, save_checkpoint, save_weights
from twotower.training import distributed as tdist
from twotower.training.diagnostics import embedding_diagnostics
from twotower.training.examples import build_examples, make_histories
from twotower.training.gradcache import chunked, gradcache_step
from twotower.training.scorer import TwoTowerScorer
from twotower.utils.atomic import atomic_write_text

__all__ = ["Trainer", "TrainResult", "init_distributed"]

log = logging.getLogger(__name__)


@dataclass
class TrainResult:
    best_epoch: int
    best_metric: float
    epochs_run: int
    history: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0


def init_distributed(train: TrainConfig) -> bool:
    """Join torchrun's process group when ``WORLD_SIZE > 1``; False for one process.

    The backend is ``train.distributed_backend``, else NCCL when
    ``train.device`` is CUDA (each process then computes on
    ``cuda:LOCAL_RANK``) and gloo on CPU. NCCL with CPU tensors is refused with a
    clear message rather than failing inside a collective.
    """
    on_cuda = train.device.startswith("cuda")
    backend = train.distributed_backend or ("nccl" if on_cuda else "gloo")
    if backend == "nccl" and not on_cuda:
        raise ConfigError(
            "train.distributed_backend=nccl reduces CUDA tensors only; set train.device=cuda (each rank then "
            "uses cuda:LOCAL_RANK) or use gloo (the default on CPU)"
        )
    joined = tdist.init_from_env(backend)
    if joined and on_cuda:
        import os

        # one GPU per process: rank r on this node computes on cuda:LOCAL_RANK
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    return joined


def resolve_device(name: str) -> torch.device:
    """``train.device`` as a torch device; a clear error when CUDA is asked for but absent."""
    try:
        dev = torch.device(name)
    except (RuntimeError, TypeError) as e:
        raise ConfigError(f"train.device: {name!r} is not a device (use cpu, cuda or cuda:N)") from e
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"train.device={name!r} but this torch build sees no CUDA device; use train.device=cpu")
    if dev.type not in ("cpu", "cuda"):
        raise ConfigError(f"train.device: {name!r} is not supported (use cpu, cuda or cuda:N)")
    return dev


def _share(n: int, world: int, rank: int) -> tuple[int, int]:
    """``[start, stop)`` of rank's contiguous part of ``n`` rows (``np.array_split`` sizes)."""
    base, extra = divmod(n, world)
    start = rank * base + min(rank, extra)
    return start, start + base + (rank < extra)


class Trainer:
    """Trains a :class:`TwoTowerModel` on per-user training sequences (one process or under torchrun)."""

    def __init__(
        self,
        model: TwoTowerModel,
        train_seqs: UserSequences,
        *,
        loss: LossConfig,
        train: TrainConfig,
        eval: EvalConfig,
        valid_relevant: sp.csr_matrix | None = None,
        train_matrix: sp.csr_matrix | None = None,
        out_dir: str | Path | None = None,
    ) -> None:
        self.model = model
        self.seqs = train_seqs
        self.loss_cfg = loss
        self.cfg = train
        self.eval_cfg = eval
        self.valid_relevant = valid_relevant
        self.train_matrix = train_matrix
        self.out_dir = Path(out_dir) if out_dir is not None else None
        self.device = resolve_device(train.device)  # a clear error before any process group is joined
        init_distributed(train)
        self.rank, self.world = tdist.rank(), tdist.world_size()
        if self.world > 1 and self.device.type == "cuda":
            self.device = torch.device("cuda", torch.cuda.current_device())  # set from LOCAL_RANK
        model.to(self.device)
        if train.gradcache_chunk is not None and loss.kind != "inbatch":
            raise ConfigError(
                f"train.gradcache_chunk works with loss.kind=inbatch only (got {loss.kind!r}); "
                "unset train.gradcache_chunk or use the in-batch loss"
            )
        # denoising subsets and >200k-item diagnostics samples (ranks > 0 reseed in fit)
        self.rng = np.random.default_rng(train.seed)
        self.torch_gen = torch.Generator().manual_seed(train.seed)
        self.examples = build_examples(train_seqs, train.examples)
        counts = np.bincount(train_seqs.items, minlength=model.n_items).astype(np.float64)
        self.item_counts = counts
        # logQ needs the probability that an item is drawn as an in-batch candidate
        probs = torch.as_tensor(counts / max(counts.sum(), 1.0), dtype=torch.float32)
        B = min(train.batch_size, max(len(self.examples), 2))
        self.log_q = mixture_log_q(probs, B, loss.uniform_negatives).to(self.device)  # [I]
        self.loss_fn = self._make_loss()
        self.optimizers = self._make_optimizers()
        self.history: list[dict[str, Any]] = []
        n_params = sum(p.numel() for p in model.parameters())
        if tdist.is_main():
            log.info(
                "training: %d examples/epoch (%s), batch %d (%d ranks, ~%d per rank)%s, %d parameters (%.1f MB), "
                "%d users, %d items",
                self._examples_per_epoch(), train.examples, train.batch_size, self.world,
                math.ceil(train.batch_size / self.world),
                f", GradCache chunks of {train.gradcache_chunk}" if train.gradcache_chunk else "",
                n_params, n_params * 4 / 1e6, model.n_users, model.n_items,
            )

    # ------------------------------------------------------------------ setup
    def _make_loss(self) -> torch.nn.Module:
        c = self.loss_cfg
        if c.kind == "inbatch":
            cls = DistributedInBatchSoftmax if self.world > 1 else InBatchSoftmax
            return cls(c.temperature, logq=c.logq, mask_accidental_hits=c.mask_hits)
        if c.kind == "full":
            return FullSoftmax(c.temperature)
        return BPRLoss(c.temperature)

    def _make_optimizers(self) -> list[torch.optim.Optimizer]:
        sparse = [p for m in self.model.modules() if isinstance(m, torch.nn.Embedding) and m.sparse for p in m.parameters()]
        sparse_ids = {id(p) for p in sparse}
        self._sparse_ids = sparse_ids
        dense = [p for p in self.model.parameters() if id(p) not in sparse_ids]
        opts: list[torch.optim.Optimizer] = [torch.optim.AdamW(dense, lr=self.cfg.lr, weight_decay=self.cfg.weight_decay)]
        if sparse:
            opts.append(torch.optim.SparseAdam(sparse, lr=self.cfg.lr))
        return opts

    def _examples_per_epoch(self) -> int:
        n = len(self.examples)
        return min(n, self.cfg.max_examples_per_epoch) if self.cfg.max_examples_per_epoch else n

    # ------------------------------------------------------------------ steps
    def _step(self, idx: np.ndarray) -> tuple[float, float, torch.Tensor, torch.Tensor]:
        """Forward and backward of one GLOBAL batch ``idx[B_global]``; this rank computes its slice.

        Leaves averaged gradients in ``.grad``. Returns this rank's share of the
        global batch mean loss and of the in-batch accuracy (summed over ranks
        they are the global values) and the local query / positive embeddings.
        """
        m, c, world = self.model, self.loss_cfg, self.world
        n_global = len(idx)
        lo, hi = _share(n_global, world, self.rank)
        local = idx[lo:hi]  # [B] this rank's contiguous part of the global batch
        share = len(local) / n_global
        scale = share * world  # gradient averaging over ranks then gives the global-batch mean
        ex = self.examples
        users, positions, denoise = ex.users[local], ex.positions[local], ex.denoise[local]
        hist = make_histories(self.seqs, users, positions, denoise, m.history_len, m.pad_item, self.rng, self.cfg.denoise_keep)
        dev = self.device
        targets = torch.as_tensor(self.seqs.items[positions], dtype=torch.long, device=dev)  # [B]
        u_rows = torch.as_tensor(users, dtype=torch.long, device=dev)
        h = torch.as_tensor(hist, dtype=torch.long, device=dev) if m.user_tower.uses_history else None  # [B, L]
        if c.kind == "inbatch":
            loss, correct, q, pos = self._inbatch_step(u_rows, h, targets, n_global, scale)
        else:
            loss, correct, q, pos = self._pointwise_step(u_rows, h, targets, n_global, lo, hi, scale)
        if world > 1:
            self._sync_grads()
        return loss * share, correct / n_global, q, pos

    def _backward(self, loss: torch.Tensor, scale: float) -> None:
        (loss * scale if self.world > 1 else loss).backward()

    def _pointwise_step(
        self, u_rows: torch.Tensor, h: torch.Tensor | None, targets: torch.Tensor, n_global: int, lo: int, hi: int, scale: float
    ) -> tuple[float, float, torch.Tensor, torch.Tensor]:
        """Full softmax or BPR: each rank's loss needs only its own examples."""
        m = self.model
        q = m.user_tower(u_rows, h)  # [B, D]
        if self.loss_cfg.kind == "full":
            all_items = m.item_tower(torch.arange(m.n_items, device=self.device))  # [I, D]
            loss = self.loss_fn(q, all_items, positive_ids=targets)
            pos = all_items[targets]
            with torch.no_grad():
                correct = float(((q @ all_items.T).argmax(1) == targets).sum())
        else:  # bpr: negatives drawn for the global batch (same generator on every rank), sliced
            neg_ids = torch.randint(0, m.n_items, (n_global,), generator=self.torch_gen)[lo:hi].to(self.device)  # [B]
            pos = m.item_tower(targets)
            neg = m.item_tower(neg_ids)
            loss = self.loss_fn(q, pos, neg)
            correct = float(((q * pos).sum(1) > (q * neg).sum(1)).sum())
        self._backward(loss, scale)
        return float(loss.detach()), correct, q.detach(), pos.detach()

    def _inbatch_step(
        self, u_rows: torch.Tensor, h: torch.Tensor | None, targets: torch.Tensor, n_global: int, scale: float
    ) -> tuple[float, float, torch.Tensor, torch.Tensor]:
        """In-batch softmax over the global batch, plainly or with GradCache."""
        m, c, b = self.model, self.loss_cfg, len(targets)
        cand_ids = targets
        if c.uniform_negatives:
            # the global batch's uniform negatives, split over ranks like the examples
            extra = torch.randint(0, m.n_items, (c.uniform_negatives,), generator=self.torch_gen).to(self.device)  # [M]
            e_lo, e_hi = _share(c.uniform_negatives, self.world, self.rank)
            cand_ids = torch.cat([targets, extra[e_lo:e_hi]])  # [N] = local positives, then local extras
        log_q = self.log_q[cand_ids] if c.logq else None

        def loss_fn(q: torch.Tensor, cands: torch.Tensor) -> torch.Tensor:
            return self.loss_fn(q, cands, positive_ids=targets, candidate_ids=cand_ids, log_q=log_q)

        chunk = self.cfg.gradcache_chunk
        if chunk is None:
            q = m.user_tower(u_rows, h)  # [B, D]
            cands = m.item_tower(cand_ids)  # [N, D]
            loss = loss_fn(q, cands)
            self._backward(loss, scale)
            q, cands, value = q.detach(), cands.detach(), float(loss.detach())
        else:
            seen: dict[str, torch.Tensor] = {}

            def scaled_loss(q: torch.Tensor, cands: torch.Tensor) -> torch.Tensor:
                seen["q"], seen["cands"] = q.detach(), cands.detach()
                loss = loss_fn(q, cands)
                return loss * scale if self.world > 1 else loss

            value = float(gradcache_step(
                lambda ch: m.user_tower(ch["users"], ch["history"]),
                m.item_tower,
                chunked({"users": u_rows, "history": h}, chunk),
                chunked(cand_ids, chunk),
                scaled_loss,
            ))
            value = value / scale if self.world > 1 else value
            q, cands = seen["q"], seen["cands"]
        with torch.no_grad():
            # correct when the top candidate is the positive item (a duplicate of it counts, so
            # the value does not depend on how ties between identical columns are broken)
            all_cands = self._global_candidates(cands, n_global)  # [N_global, D]
            all_ids = self._global_candidates(cand_ids.unsqueeze(1), n_global).squeeze(1)  # [N_global]
            correct = float((all_ids[(q @ all_cands.T).argmax(1)] == targets).sum())
        return value, correct, q, cands[:b]

    def _global_candidates(self, local: torch.Tensor, n_global: int) -> torch.Tensor:
        """Every rank's candidate rows ``[N_global, ...]`` (embeddings or ids) in the loss's layout.

        Layout (as :class:`DistributedInBatchSoftmax`): every rank's positives in
        rank order, then every rank's uniform negatives in rank order.
        """
        if self.world == 1:
            return local
        n_pos = [hi - lo for lo, hi in (_share(n_global, self.world, r) for r in range(self.world))]
        m = self.loss_cfg.uniform_negatives
        n_extra = [hi - lo for lo, hi in (_share(m, self.world, r) for r in range(self.world))]
        b = n_pos[self.rank]
        pos = gather_no_grad(local[:b].contiguous(), sizes=n_pos)  # [B_global, ...]
        extra = gather_no_grad(local[b:].contiguous(), sizes=n_extra)  # [M, ...]
        return torch.cat([pos, extra])

    def _sync_grads(self) -> None:
        """Average ``.grad`` over ranks (one flat all-reduce for dense, a gather for sparse grads).

        A parameter no rank touched keeps ``grad=None`` (so the optimizer skips
        it, as in one process); one that some rank touched gets a zero local
        gradient where missing before averaging.
        """
        import torch.distributed as dist

        params = [p for p in self.model.parameters() if p.requires_grad]
        used = torch.tensor([p.grad is not None for p in params], dtype=torch.int32, device=self.device)  # [P]
        dist.all_reduce(used)
        dense: list[torch.Tensor] = []
        for p, n_used in zip(params, used.tolist()):
            if not n_used:
                continue
            if id(p) in self._sparse_ids:
                self._sync_sparse(p)
                continue
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            dense.append(p)
        if dense:
            flat = torch.cat([p.grad.reshape(-1) for p in dense])  # [sum of numels]
            dist.all_reduce(flat)
            flat /= self.world
            for p, g in zip(dense, flat.split([p.numel() for p in dense])):
                p.grad.copy_(g.view_as(p.grad))

    def _sync_sparse(self, p: torch.Tensor) -> None:
        if p.grad is None:
            g = torch.sparse_coo_tensor(torch.empty((1, 0), dtype=torch.long, device=p.device), p.new_zeros((0, *p.shape[1:])),
                                        p.shape, check_invariants=False)
        else:
            g = p.grad.coalesce()
        rows = gather_no_grad(g.indices().T.contiguous())  # [nnz_total, 1]
        values = gather_no_grad(g.values().contiguous()) / self.world  # [nnz_total, D]
        p.grad = torch.sparse_coo_tensor(rows.T, values, p.shape, check_invariants=False).coalesce()

    def _run_epoch(self, epoch: int) -> dict[str, Any]:
        self.model.train()
        n = self._examples_per_epoch()
        # same permutation on every rank and on resume: it depends on (seed, epoch) only
        order = np.random.default_rng([self.cfg.seed, epoch]).permutation(len(self.examples))[:n]
        B = self.cfg.batch_size  # global batch
        n_batches = math.ceil(n / B)
        total_loss = total_acc = 0.0
        last_q = last_pos = None
        show = self.cfg.progress and tdist.is_main()
        # disable=None: a bar on a terminal, silence in logs and CI (no carriage-return spam)
        bar = tqdm(range(n_batches), desc=f"epoch {epoch}", disable=None if show else True, leave=False, unit="batch", mininterval=0.5)
        for b in bar:
            idx = order[b * B : (b + 1) * B]
            if len(idx) < max(2, self.world):  # every rank needs an example, every query company
                continue
            for opt in self.optimizers:
                opt.zero_grad(set_to_none=True)
            loss, acc, q, pos = self._step(idx)
            if self.cfg.grad_clip:
                dense = [p for p in self.model.parameters() if p.grad is not None and not p.grad.is_sparse]
                torch.nn.utils.clip_grad_norm_(dense, self.cfg.grad_clip)
            for opt in self.optimizers:
                opt.step()
            total_loss += loss
            total_acc += acc
            last_q, last_pos = q, pos
            if show:
                bar.set_postfix(loss=f"{total_loss / (b + 1):.4f}")
        bar.close()
        if self.world > 1:  # each rank holds its share of every batch's loss and accuracy
            mean = tdist.all_reduce_mean({"loss": total_loss, "acc": total_acc})
            total_loss, total_acc = mean["loss"] * self.world, mean["acc"] * self.world
        row: dict[str, Any] = {"epoch": epoch, "loss": total_loss / max(n_batches, 1), "inbatch_accuracy": total_acc / max(n_batches, 1)}
        if not tdist.is_main():
            return row
        item_emb = self.model.all_item_embeddings() if self.model.n_items <= 200_000 else self.model.item_tower(
            torch.as_tensor(self.rng.choice(self.model.n_items, 50_000, replace=False), device=self.device)
        ).detach()
        row.update(embedding_diagnostics(item_emb, last_q, last_pos))
        alpha = self.model.item_tower.alpha
        if alpha is not None:
            row["alpha"] = alpha
        return row

    def validate(self) -> dict[str, float]:
        if self.valid_relevant is None:
            return {}
        scorer = TwoTowerScorer(self.model, self.seqs)
        return evaluate(
            scorer, self.valid_relevant, self.train_matrix, EvalProtocol(ks=tuple(sorted({10, *self.eval_cfg.ks}))), self.item_counts
        )

    # ------------------------------------------------------------------ loop
    def fit(self, *, resume: bool = False) -> TrainResult:
        """Train for ``train.epochs`` (early stopping on the validation metric); see the module docstring.

        Under torchrun every rank calls ``fit``; rank 0 validates and writes the
        run folder, and every rank returns with the best weights loaded.
        """
        start_epoch, best, best_epoch, bad = 1, -math.inf, 0, 0
        ckpt = self.out_dir / "checkpoint" if self.out_dir else None
        main = tdist.is_main()
        if resume:
            if ckpt is None or not (ckpt / "state.json").exists():
                raise ConfigError(f"cannot resume: no checkpoint in {ckpt}; train without --resume first")
            state = load_checkpoint(ckpt, self.model, self.optimizers, self.rng)
            self.torch_gen.manual_seed(self.cfg.seed + int(state["epoch"]))
            start_epoch = int(state["epoch"]) + 1
            best, best_epoch, bad = float(state["best"]), int(state["best_epoch"]), int(state["bad_epochs"])
            self.history = list(state["history"])
            if main:
                log.info("resumed from epoch %d (best %s=%.4f at epoch %d)", state["epoch"], self.eval_cfg.select_metric, best, best_epoch)
        if self.world > 1:
            self._start_ranks(start_epoch)
        metric = self.eval_cfg.select_metric
        t0 = time.perf_counter()
        epoch = start_epoch - 1
        for epoch in range(start_epoch, self.cfg.epochs + 1):
            if bad >= self.cfg.patience:
                break
            self.torch_gen.manual_seed(self.cfg.seed * 1000 + epoch)
            te = time.perf_counter()
            row = self._run_epoch(epoch)
            row["train_seconds"] = time.perf_counter() - te
            if epoch % self.cfg.eval_every == 0 or epoch == self.cfg.epochs:
                valid = self.validate() if main else {}
                row.update({f"valid_{k}": v for k, v in valid.items() if "@" in k})
                value = valid.get(metric, -row["loss"]) if valid else -row["loss"]
                value = self._from_main(value)  # rank 0's metric decides everywhere
                if value > best:
                    best, best_epoch, bad = value, epoch, 0
                    if self.out_dir and main:
                        save_weights(self.out_dir / "model.safetensors", self.model)
                    self._best_state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
                else:
                    bad += 1
            row["seconds"] = time.perf_counter() - te
            self.history.append(row)
            if main:
                log.info(
                    "epoch %d: loss %.4f acc %.3f item_std %.3f%s%s %s (%.1fs)",
                    epoch, row["loss"], row["inbatch_accuracy"], row["item_std"],
                    " COLLAPSE" if row["collapse_alarm"] else "",
                    f" alpha {row['alpha']:.3f}" if "alpha" in row else "",
                    f"valid {metric} {row.get('valid_' + metric, float('nan')):.4f}", row["seconds"],
                )
            if self.out_dir and main:
                self._write_log()
                if self.cfg.checkpoint:
                    state = {"epoch": epoch, "best": best, "best_epoch": best_epoch, "bad_epochs": bad, "history": self.history}
                    save_checkpoint(self.out_dir / "checkpoint", self.model, self.optimizers, state, self.rng)
            tdist.barrier()  # nobody runs ahead of rank 0's writes
        # restore the best weights for whatever comes next (evaluation, export)
        if getattr(self, "_best_state", None) is not None:
            self.model.load_state_dict(self._best_state)
        elif self.out_dir and (self.out_dir / "model.safetensors").exists():
            from twotower.training.checkpoint import load_weights

            load_weights(self.out_dir / "model.safetensors", self.model)
        if self.out_dir and main:
            self._plot()
        tdist.barrier()
        return TrainResult(best_epoch, best, epoch, self.history, time.perf_counter() - t0)

    def _start_ranks(self, start_epoch: int) -> None:
        """Same weights everywhere (rank 0's), distinct random streams per rank.

        After a resume every rank restored rank 0's RNG states from the
        checkpoint; ranks > 0 re-derive theirs from (seed, rank, epoch) so their
        dropout masks and denoising subsets stay independent of rank 0's.
        """
        import torch.distributed as dist

        for t in self.model.state_dict().values():
            dist.broadcast(t, src=0)
        if self.rank > 0:
            seq = np.random.SeedSequence([self.cfg.seed, self.rank, start_epoch])
            self.rng = np.random.default_rng(seq)
            torch.manual_seed(int(seq.generate_state(1, np.uint64)[0] >> 1))

    def _from_main(self, value: float) -> float:
        """``value`` as rank 0 computed it (unchanged in one process)."""
        if self.world == 1:
            return value
        import torch.distributed as dist

        t = torch.tensor([value], dtype=torch.float64, device=self.device)
        dist.broadcast(t, src=0)
        return float(t.item())

    def _write_log(self) -> None:
        assert self.out_dir is not None
        text = "".join(json.dumps(r, default=float) + "\n" for r in self.history)
        atomic_write_text(self.out_dir / "log.jsonl", text)

    def _plot(self) -> None:
        from twotower.training.plots import plot_training_curves

        try:
            plot_training_curves(self.history, self.out_dir / "curves.png", metric=self.eval_cfg.select_metric)
        except Exception as e:  # a plot must never fail a finished training run
            log.warning("could not draw training curves: %s", e)
