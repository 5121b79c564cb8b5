"""The training loop: examples -> towers -> loss, with per-epoch validation and diagnostics.

Every epoch logs loss, in-batch accuracy, embedding spread (with the collapse
alarm), alignment/uniformity, the dual-head gate α and validation metrics to a
JSONL file and a PNG of the curves in the run folder; the best weights by
validation metric are kept, and a checkpoint (weights, optimizer, RNG) is
written atomically after each epoch so ``resume`` loses at most one epoch.
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
from twotower.losses import BPRLoss, FullSoftmax, InBatchSoftmax, mixture_log_q
from twotower.models.history import UserSequences
from twotower.models.two_tower import TwoTowerModel
from twotower.training.checkpoint import load_checkpoint, save_checkpoint, save_weights
from twotower.training.diagnostics import embedding_diagnostics
from twotower.training.examples import build_examples, make_histories
from twotower.training.scorer import TwoTowerScorer
from twotower.utils.atomic import atomic_write_text

__all__ = ["Trainer", "TrainResult"]

log = logging.getLogger(__name__)


@dataclass
class TrainResult:
    best_epoch: int
    best_metric: float
    epochs_run: int
    history: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0


class Trainer:
    """Trains a :class:`TwoTowerModel` on per-user training sequences."""

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
        self.rng = np.random.default_rng(train.seed)
        self.torch_gen = torch.Generator().manual_seed(train.seed)
        self.examples = build_examples(train_seqs, train.examples)
        counts = np.bincount(train_seqs.items, minlength=model.n_items).astype(np.float64)
        self.item_counts = counts
        # logQ needs the probability that an item is drawn as an in-batch candidate
        probs = torch.as_tensor(counts / max(counts.sum(), 1.0), dtype=torch.float32)
        B = min(train.batch_size, max(len(self.examples), 2))
        self.log_q = mixture_log_q(probs, B, loss.uniform_negatives)  # [I]
        self.loss_fn = self._make_loss()
        self.optimizers = self._make_optimizers()
        self.history: list[dict[str, Any]] = []
        n_params = sum(p.numel() for p in model.parameters())
        log.info(
            "training: %d examples/epoch (%s), batch %d, %d parameters (%.1f MB), %d users, %d items",
            self._examples_per_epoch(), train.examples, train.batch_size, n_params, n_params * 4 / 1e6,
            model.n_users, model.n_items,
        )

    # ------------------------------------------------------------------ setup
    def _make_loss(self) -> torch.nn.Module:
        c = self.loss_cfg
        if c.kind == "inbatch":
            return InBatchSoftmax(c.temperature, logq=c.logq, mask_accidental_hits=c.mask_hits)
        if c.kind == "full":
            return FullSoftmax(c.temperature)
        return BPRLoss()

    def _make_optimizers(self) -> list[torch.optim.Optimizer]:
        sparse = [p for m in self.model.modules() if isinstance(m, torch.nn.Embedding) and m.sparse for p in m.parameters()]
        sparse_ids = {id(p) for p in sparse}
        dense = [p for p in self.model.parameters() if id(p) not in sparse_ids]
        opts: list[torch.optim.Optimizer] = [torch.optim.AdamW(dense, lr=self.cfg.lr, weight_decay=self.cfg.weight_decay)]
        if sparse:
            opts.append(torch.optim.SparseAdam(sparse, lr=self.cfg.lr))
        return opts

    def _examples_per_epoch(self) -> int:
        n = len(self.examples)
        return min(n, self.cfg.max_examples_per_epoch) if self.cfg.max_examples_per_epoch else n

    # ------------------------------------------------------------------ steps
    def _batch_loss(self, users: np.ndarray, positions: np.ndarray, denoise: np.ndarray) -> tuple[torch.Tensor, float, torch.Tensor, torch.Tensor]:
        m = self.model
        hist = make_histories(self.seqs, users, positions, denoise, m.history_len, m.pad_item, self.rng, self.cfg.denoise_keep)
        targets = torch.as_tensor(self.seqs.items[positions], dtype=torch.long)  # [B]
        u_rows = torch.as_tensor(users, dtype=torch.long)
        q = m.user_tower(u_rows, torch.as_tensor(hist, dtype=torch.long) if m.user_tower.uses_history else None)  # [B, D]
        c = self.loss_cfg
        if c.kind == "full":
            all_items = m.item_tower(torch.arange(m.n_items))  # [I, D]
            loss = self.loss_fn(q, all_items, positive_ids=targets)
            pos = all_items[targets]
            with torch.no_grad():
                acc = float(((q @ all_items.T).argmax(1) == targets).float().mean())
            return loss, acc, q, pos
        if c.kind == "bpr":
            neg_ids = torch.randint(0, m.n_items, (len(targets),), generator=self.torch_gen)
            pos = m.item_tower(targets)
            neg = m.item_tower(neg_ids)
            loss = self.loss_fn(q, pos, neg)
            acc = float(((q * pos).sum(1) > (q * neg).sum(1)).float().mean())
            return loss, acc, q, pos
        cand_ids = targets
        if c.uniform_negatives:
            extra = torch.randint(0, m.n_items, (c.uniform_negatives,), generator=self.torch_gen)
            cand_ids = torch.cat([targets, extra])
        cands = m.item_tower(cand_ids)  # [N, D]
        log_q = self.log_q[cand_ids] if c.logq else None
        loss = self.loss_fn(q, cands, positive_ids=targets, candidate_ids=cand_ids, log_q=log_q)
        with torch.no_grad():
            acc = float(((q @ cands.T).argmax(1) == torch.arange(len(targets))).float().mean())
        return loss, acc, q, cands[: len(targets)]

    def _run_epoch(self, epoch: int) -> dict[str, Any]:
        self.model.train()
        n = self._examples_per_epoch()
        order = self.rng.permutation(len(self.examples))[:n]
        B = self.cfg.batch_size
        n_batches = math.ceil(n / B)
        total_loss = total_acc = 0.0
        last_q = last_pos = None
        bar = tqdm(range(n_batches), desc=f"epoch {epoch}", disable=not self.cfg.progress, leave=False, unit="batch")
        for b in bar:
            idx = order[b * B : (b + 1) * B]
            if len(idx) < 2:
                continue
            ex = self.examples
            loss, acc, q, pos = self._batch_loss(ex.users[idx], ex.positions[idx], ex.denoise[idx])
            for opt in self.optimizers:
                opt.zero_grad(set_to_none=True)
            loss.backward()
            if self.cfg.grad_clip:
                dense = [p for p in self.model.parameters() if p.grad is not None and not p.grad.is_sparse]
                torch.nn.utils.clip_grad_norm_(dense, self.cfg.grad_clip)
            for opt in self.optimizers:
                opt.step()
            total_loss += float(loss.detach())
            total_acc += acc
            last_q, last_pos = q.detach(), pos.detach()
            if self.cfg.progress:
                bar.set_postfix(loss=f"{total_loss / (b + 1):.4f}")
        bar.close()
        row: dict[str, Any] = {"epoch": epoch, "loss": total_loss / max(n_batches, 1), "inbatch_accuracy": total_acc / max(n_batches, 1)}
        item_emb = self.model.all_item_embeddings() if self.model.n_items <= 200_000 else self.model.item_tower(
            torch.as_tensor(self.rng.choice(self.model.n_items, 50_000, replace=False))
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
        start_epoch, best, best_epoch, bad = 1, -math.inf, 0, 0
        ckpt = self.out_dir / "checkpoint" if self.out_dir else None
        if resume:
            if ckpt is None or not (ckpt / "state.json").exists():
                from twotower.errors import ConfigError

                raise ConfigError(f"cannot resume: no checkpoint in {ckpt}; train without --resume first")
            state = load_checkpoint(ckpt, self.model, self.optimizers, self.rng)
            self.torch_gen.manual_seed(self.cfg.seed + int(state["epoch"]))
            start_epoch = int(state["epoch"]) + 1
            best, best_epoch, bad = float(state["best"]), int(state["best_epoch"]), int(state["bad_epochs"])
            self.history = list(state["history"])
            log.info("resumed from epoch %d (best %s=%.4f at epoch %d)", state["epoch"], self.eval_cfg.select_metric, best, best_epoch)
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
                valid = self.validate()
                row.update({f"valid_{k}": v for k, v in valid.items() if "@" in k})
                value = valid.get(metric, -row["loss"]) if valid else -row["loss"]
                if value > best:
                    best, best_epoch, bad = value, epoch, 0
                    if self.out_dir:
                        save_weights(self.out_dir / "model.safetensors", self.model)
                    self._best_state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
                else:
                    bad += 1
            row["seconds"] = time.perf_counter() - te
            self.history.append(row)
            log.info(
                "epoch %d: loss %.4f acc %.3f item_std %.3f%s%s %s (%.1fs)",
                epoch, row["loss"], row["inbatch_accuracy"], row["item_std"],
                " COLLAPSE" if row["collapse_alarm"] else "",
                f" alpha {row['alpha']:.3f}" if "alpha" in row else "",
                f"valid {metric} {row.get('valid_' + metric, float('nan')):.4f}", row["seconds"],
            )
            if self.out_dir:
                self._write_log()
                if self.cfg.checkpoint:
                    state = {"epoch": epoch, "best": best, "best_epoch": best_epoch, "bad_epochs": bad, "history": self.history}
                    save_checkpoint(self.out_dir / "checkpoint", self.model, self.optimizers, state, self.rng)
        # restore the best weights for whatever comes next (evaluation, export)
        if getattr(self, "_best_state", None) is not None:
            self.model.load_state_dict(self._best_state)
        elif self.out_dir and (self.out_dir / "model.safetensors").exists():
            from twotower.training.checkpoint import load_weights

            load_weights(self.out_dir / "model.safetensors", self.model)
        if self.out_dir:
            self._plot()
        return TrainResult(best_epoch, best, epoch, self.history, time.perf_counter() - t0)

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
