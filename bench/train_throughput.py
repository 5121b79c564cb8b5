"""Training throughput: the project's trainer vs a minimal hand-written step doing the same math.

For each user-tower kind x loss, on ML-1M (``../shared/data/ml-1m/ml-1m.txt``, ``user item``
lines in time order) or a synthetic catalogue (``--synthetic-items 1000000``), at the
given thread counts: examples/s (sequences/s and target positions/s for
``train.examples=sequence``) of ``Trainer._run_epoch`` on ``--examples`` units,
next to a hand-written loop (same towers, same candidates, ``F.cross_entropy``,
the same optimizer math -- PyTorch's own classes; for sequence towers on the trainer's own windows and batch
order, so the ratio is the framework's overhead alone). Prints one table.

``--towers default`` is the project's default recommender, every model and training default as
``ModelConfig()`` / ``TrainConfig()`` declare them (recency and mean pools side by side, history dropout,
the weight average, clipping, weight decay, batch 512, seed 42); its hand-written step does the same: it
shares the model's modules (towers: pooling, MLPs, dropout masks) and ``windows_before``, and writes
itself the history dropout, the in-batch loss with its corrections, clipping, fused AdamW and the
weight average. The other pooled rows (``recency``, ``mean``) are one pool without history dropout or
weight average: the lighter model the table had before.

    python bench/train_throughput.py --threads 1 2 --examples 60000
"""
from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from twotower.config import EvalConfig, LossConfig, ModelConfig, TowerConfig, TrainConfig
from twotower.errors import ConfigError
from twotower.models.history import UserSequences
from twotower.models.two_tower import TwoTowerModel
from twotower.training.trainer import Trainer
from twotower.utils.runtime import retain_freed_memory

ML1M = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "ml-1m" / "ml-1m.txt"


def load_ml1m(path: Path) -> tuple[UserSequences, int]:
    a = np.loadtxt(path, dtype=np.int64)
    u, i = a[:, 0] - a[:, 0].min(), a[:, 1] - a[:, 1].min()
    return UserSequences.from_arrays(u, i, np.arange(len(u)), int(u.max()) + 1), int(i.max()) + 1


def synthetic(n_users: int, n_items: int, per_user: int, seed: int = 0) -> tuple[UserSequences, int]:
    rng = np.random.default_rng(seed)
    pop = 1.0 / np.arange(1, n_items + 1) ** 0.8  # Zipf-like popularity
    items = rng.choice(n_items, size=n_users * per_user, p=pop / pop.sum())
    users = np.repeat(np.arange(n_users), per_user)
    return UserSequences.from_arrays(users, items, np.arange(len(users)), n_users), n_items


#: the --towers name of the project's default recommender (ModelConfig() and TrainConfig() as declared)
DEFAULT = "default"


def model_config(tower: str, L: int) -> ModelConfig:
    if tower == DEFAULT:
        return ModelConfig()
    if tower in ("transformer", "gru"):
        user = TowerConfig(use_id=False, history=tower, history_len=L, history_dim=64, hidden=(), out_dim=64,
                           normalize=False, use_features=False)
        return ModelConfig(user=user, item=TowerConfig(id_dim=64, hidden=(), out_dim=64, normalize=False))
    return ModelConfig(user=TowerConfig(use_id=False, history=tower, history_len=L))


def run_trainer(seqs, n_items, tower, kind, examples, batch, n, sparse) -> tuple[float, float, float]:
    """(units/s, positions/s, units per CPU-second): on shared cores the CPU-time rate is the steadier one."""
    cfg = model_config(tower, 200 if examples == "sequence" else 50)
    torch.manual_seed(0)
    model = TwoTowerModel(cfg, seqs.n_users, n_items, sparse=sparse)
    harness = dict(max_examples_per_epoch=n, progress=False, checkpoint=False, diagnostics=False,
                   optimizer="sparse_adam" if sparse else "adamw")  # none of them changes a step
    if tower == DEFAULT:  # every other training default as declared: history dropout, weight average, ...
        train = TrainConfig(examples=examples, **harness)
    else:
        # no history dropout and no weight average: the lighter rows, the hand-written step does neither
        train = TrainConfig(examples=examples, batch_size=batch, history_dropout=0.0, ema_decay=0.0, **harness)
    tr = Trainer(model, seqs, loss=LossConfig(kind=kind), train=train, eval=EvalConfig(baselines=()))
    t0, c0 = time.perf_counter(), time.process_time()
    row = tr._run_epoch(1)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    units = min(n, len(tr.examples))
    return units / dt, row.get("positions_per_s", units / dt), units / cpu


def manual_model(cfg: ModelConfig, n_users: int, n_items: int, sparse: bool) -> tuple[TwoTowerModel, list]:
    """The hand-written steps' model (seed 0) and optimizers: fused AdamW, PyTorch's SparseAdam for sparse
    tables (the trainer's RowSparseAdam computes the same numbers with row writes)."""
    torch.manual_seed(0)
    model = TwoTowerModel(cfg, n_users, n_items, sparse=sparse)
    sp_params = [p for m in model.modules() if isinstance(m, torch.nn.Embedding) and m.sparse for p in m.parameters()]
    ids = {id(p) for p in sp_params}
    t = TrainConfig()  # lr and weight decay as the trainer's (decay_1d: every dense parameter decayed)
    opts = [torch.optim.AdamW([p for p in model.parameters() if id(p) not in ids], lr=t.lr,
                              weight_decay=t.weight_decay, fused=True)]
    if sp_params:
        opts.append(torch.optim.SparseAdam(sp_params, lr=t.lr))
    return model, opts


def run_manual(seqs, n_items, tower, kind, batch, n, sparse) -> tuple[float, float]:
    """Hand-written causal step: windows, towers, candidates, cross-entropy / BPR, AdamW (+ SparseAdam).

    The same math as the trainer's default loss: in-batch softmax with the logQ correction
    (``log(B p_i)``, p = train-item frequencies) and accidental hits masked; no statistics. For
    ``tower=default``, also the default's history dropout (each window cell padded with probability
    ``train.history_dropout``) and weight average (``train.ema_decay``, with its warm-up, after each step)."""
    from twotower.models.history import windows_before

    cfg = model_config(tower, 50)
    model, opts = manual_model(cfg, seqs.n_users, n_items, sparse)
    t = TrainConfig()
    drop, decay = (t.history_dropout, t.ema_decay) if tower == DEFAULT else (0.0, 0.0)
    live = [p.detach() for g in opts[0].param_groups for p in g["params"]]  # the dense parameters (no ID table)
    shadow = [p.clone() for p in live]
    rng = np.random.default_rng(1)
    counts = torch.as_tensor(np.bincount(seqs.items, minlength=n_items), dtype=torch.float64)
    log_q = torch.log(batch * counts / counts.sum()).float()  # [I] in-batch presence (mixture logQ, no extras)
    T, negs = LossConfig().temperature, LossConfig().sampled_negatives
    users = np.repeat(np.arange(seqs.n_users), seqs.lengths())
    order = np.random.default_rng(0).permutation(len(users))[:n]
    t0, c0 = time.perf_counter(), time.process_time()
    for s in range(0, n, batch):
        idx = order[s : s + batch]
        u = users[idx]
        h = windows_before(seqs.items, seqs.indptr[u], idx, 50, n_items)
        if drop:
            np.putmask(h, rng.random(h.shape) < drop, n_items)
        h = torch.as_tensor(h)
        tgt = torch.as_tensor(seqs.items[idx])
        for o in opts:
            o.zero_grad(set_to_none=True)
        q = model.user_tower(None, h)
        if kind == "full":
            logits = q @ model.item_tower(torch.arange(n_items)).T / T
            loss = F.cross_entropy(logits, tgt)
        elif kind == "bpr":
            c = model.item_tower(torch.cat([tgt, torch.randint(0, n_items, (len(idx),))]))
            loss = F.softplus(((q * c[len(idx):]).sum(1) - (q * c[: len(idx)]).sum(1)) / T).mean()
        elif kind == "sampled":  # own positive + shared uniform negatives (uniform logQ cancels), hits masked
            neg = torch.randint(0, n_items, (negs,))
            c = model.item_tower(torch.cat([tgt, neg]))
            pos = (q * c[: len(idx)]).sum(1, keepdim=True)
            other = (q @ c[len(idx):].T).masked_fill(neg.unsqueeze(0) == tgt.unsqueeze(1), -1e30)
            loss = F.cross_entropy(torch.cat([pos, other], 1) / T, torch.zeros(len(idx), dtype=torch.long))
        else:
            c = model.item_tower(tgt)
            logits = q @ c.T / T - log_q[tgt]  # [B, B]
            hits = (tgt.unsqueeze(0) == tgt.unsqueeze(1)) & ~torch.eye(len(idx), dtype=torch.bool)
            loss = F.cross_entropy(logits.masked_fill(hits, torch.finfo(logits.dtype).min / 2), torch.arange(len(idx)))
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.grad is not None and not p.grad.is_sparse], 5.0)
        for o in opts:
            o.step()
        if decay:
            with torch.no_grad():
                torch._foreach_lerp_(shadow, live, 1.0 - min(decay, (1 + s // batch) / (10 + s // batch)))
    return n / (time.perf_counter() - t0), n / (time.process_time() - c0)  # (examples/s, per CPU-second)


def run_manual_sequence(seqs, n_items, tower, kind, batch, n, sparse) -> tuple[float, float, float]:
    """Hand-written all-positions step (SASRec's objective) on the trainer's windows and batch order:
    states at every column, the valid positions' targets, the same candidates, ``F.cross_entropy`` /
    softplus, the same optimizers. (units/s, positions/s, units per CPU-second). The trainer's corrections where they apply:
    in-batch subtracts the presence logQ of the batch's distinct targets, sampled masks negatives that
    are the row's positive; no statistics."""
    from twotower.training.step import candidate_log_q
    from twotower.training.sequence import SequenceExamples

    cfg = model_config(tower, 200)
    model, opts = manual_model(cfg, seqs.n_users, n_items, sparse)
    ex = SequenceExamples(seqs, 200, n_items)
    rng = np.random.default_rng([42, 1])
    order = ex.bucketed(rng.permutation(len(ex))[:n], batch, rng)
    T, negs = LossConfig().temperature, LossConfig().sampled_negatives
    counts = torch.as_tensor(np.bincount(seqs.items, minlength=n_items), dtype=torch.float64)
    probs = counts / counts.sum()  # [I]
    positions = 0
    t0, c0 = time.perf_counter(), time.process_time()
    for s in range(0, len(order), batch):
        _, inp, tgt = ex.windows(order[s : s + batch])
        inp, tgt = torch.as_tensor(inp), torch.as_tensor(tgt)
        for o in opts:
            o.zero_grad(set_to_none=True)
        valid = tgt != n_items
        q = model.user_tower.forward_all(None, inp)[valid]  # [P, D]
        y = tgt[valid]
        positions += len(y)
        if kind == "full":
            loss = F.cross_entropy(q @ model.item_tower(torch.arange(n_items)).T / T, y)
        elif kind == "inbatch":  # the batch's distinct targets are the candidates
            uniq, inv = torch.unique(y, return_inverse=True)
            log_q = candidate_log_q(probs, len(y), 0, dedup=True)[uniq]  # [N'] presence among len(y) draws
            loss = F.cross_entropy(q @ model.item_tower(uniq).T / T - log_q, inv)
        elif kind == "sampled":  # the positive + shared uniform negatives
            neg = torch.randint(0, n_items, (negs,))
            c = model.item_tower(torch.cat([y, neg]))
            pos = (q * c[: len(y)]).sum(1, keepdim=True)
            other = (q @ c[len(y):].T).masked_fill(neg.unsqueeze(0) == y.unsqueeze(1), -1e30)  # accidental hits out
            loss = F.cross_entropy(torch.cat([pos, other], 1) / T, torch.zeros(len(y), dtype=torch.long))
        else:  # bpr: one uniform negative per position
            c = model.item_tower(torch.cat([y, torch.randint(0, n_items, (len(y),))]))
            loss = F.softplus(((q * c[len(y):]).sum(1) - (q * c[: len(y)]).sum(1)) / T).mean()
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.grad is not None and not p.grad.is_sparse], 5.0)
        for o in opts:
            o.step()
    dt = time.perf_counter() - t0
    return len(order) / dt, positions / dt, len(order) / (time.process_time() - c0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[1])
    ap.add_argument("--examples", type=int, default=40_000, help="causal examples (or sequences / 50) per measurement")
    ap.add_argument("--towers", nargs="+", default=[DEFAULT, "transformer"],
                    help=f"user towers: {DEFAULT} (the default recommender, every default) | recency | mean (one "
                         "pool, no history dropout or weight average) | transformer | gru")
    ap.add_argument("--losses", nargs="+", default=["inbatch", "full", "sampled", "bpr"])
    ap.add_argument("--synthetic-items", type=int, default=0, help="a synthetic catalogue of this many items instead of ML-1M")
    ap.add_argument("--synthetic-users", type=int, default=20_000)
    ap.add_argument("--per-user", type=int, default=50,
                    help="items per synthetic user (e.g. 12 for the short sequences of a sparse data set)")
    ap.add_argument("--sparse", action="store_true", help="sparse ID tables + SparseAdam")
    ap.add_argument("--data", type=Path, default=None, help="another file in the SASRec format (`user item` lines)")
    ap.add_argument("--glibc-default-malloc", action="store_true",
                    help="leave glibc's mmap threshold alone (what training did before retain_freed_memory)")
    args = ap.parse_args()
    # names and sizes checked before the data is read: a typo in the last --losses name was a traceback after
    # every earlier row had been measured
    try:
        for tower in args.towers:
            if tower != DEFAULT:
                TowerConfig(use_id=False, history=tower)
        for kind in args.losses:
            LossConfig(kind=kind)
    except ConfigError as e:
        raise SystemExit(f"error: {e}") from None
    from twotower.pipeline.refusals import range_refusal  # the CLI's words: "--threads: must be at least 1, got 0"

    sizes = [("--examples", args.examples), ("--threads", min(args.threads))]
    if args.synthetic_items:  # a traceback from numpy, or "0 training examples" from deep in the trainer
        sizes += [("--synthetic-items", args.synthetic_items), ("--synthetic-users", args.synthetic_users),
                  ("--per-user", args.per_user)]
    elif args.synthetic_items < 0:
        sizes += [("--synthetic-items", args.synthetic_items)]
    for flag, value in sizes:
        if (why := range_refusal(value, 1 if flag != "--per-user" else 2)) is not None:  # a user's 1st item: no example
            raise SystemExit(f"error: {flag}: {why}")
    # each row trains a few hundred steps of a config whose train.epochs is the default: the trainer's "too few updates
    # ... over train.epochs=30" warning came before every row, about epochs the bench never runs
    logging.getLogger("twotower.training.trainer").setLevel(logging.ERROR)
    if not args.glibc_default_malloc:
        retain_freed_memory()  # as train_run does: both the trainer and the hand-written step run with it
    if args.synthetic_items:
        seqs, n_items = synthetic(args.synthetic_users, args.synthetic_items, args.per_user)
        data = f"synthetic {args.synthetic_items:,}, {args.per_user}/user"
    else:
        path = args.data or ML1M
        if not Path(path).is_file():
            raise SystemExit(f"error: {path} not found: pass --data FILE (a file in the SASRec format) or "
                             "--synthetic-items N")
        try:
            (seqs, n_items), data = load_ml1m(path), args.data.name if args.data else "ML-1M"
        except ValueError as e:  # numpy's "could not convert string 'root:x:0:0' to int64", a traceback
            raise SystemExit(f"error: {path}: not a file in the SASRec format (`user item` integer lines): {e}") from None
    print(f"{'data':<27}{'tower':<13}{'loss':<9}{'thr':>4}{'trainer ex/s':>14}{'ex/cpu-s':>10}{'positions/s':>13}"
          f"{'hand ex/s':>11}{'hand ex/cpu-s':>14}{'ratio':>7}{'cpu ratio':>10}")
    for threads in args.threads:
        torch.set_num_threads(threads)
        for tower in args.towers:
            seq = tower in ("transformer", "gru")
            for kind in args.losses:
                n = max(args.examples // 50, 256) if seq else args.examples
                ex_s, pos_s, cpu_s = run_trainer(seqs, n_items, tower, kind, "sequence" if seq else "causal",
                                          128 if seq else 512, n, args.sparse)
                if seq:
                    hand, _, hand_cpu = run_manual_sequence(seqs, n_items, tower, kind, 128, n, args.sparse)
                else:
                    hand, hand_cpu = run_manual(seqs, n_items, tower, kind, 512, n, args.sparse)
                # ratio: wall-clock; cpu ratio: per CPU-second (the trainer's prefetch and averaging threads
                # counted), the steadier one on shared cores
                print(f"{data:<27}{tower:<13}{kind:<9}{threads:>4}{ex_s:>14.0f}{cpu_s:>10.0f}{pos_s:>13.0f}{hand:>11.0f}"
                      f"{hand_cpu:>14.0f}{ex_s / hand:>7.2f}{cpu_s / hand_cpu:>10.2f}", flush=True)


if __name__ == "__main__":
    main()
