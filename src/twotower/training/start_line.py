"""The trainer's line before the first epoch: ``training: N examples/epoch (causal), batch B, loss ..., P parameters``;
then what the settings do to this data that the user may not expect (few optimizer steps, more negatives than items, a
costly objective, short history windows, a selection metric over lists that hold every item)."""
from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING

import numpy as np

from twotower.losses.factory import describe_loss
from twotower.training.examples import examples_per_epoch, unused_history_dropout
from twotower.training.loop import describe_optimizer
from twotower.training.select_metric import select_metric_warning
from twotower.utils.wording import plural

if TYPE_CHECKING:
    from twotower.training.trainer import Trainer

__all__ = ["big_tables_note", "few_steps_warning", "history_len_note", "log_start", "many_negatives_warning",
           "sequence_cost_note"]

#: optimizer steps an epoch under which the start warns (unless the epochs add up to ENOUGH_STEPS): 1,500 ML-1M
#: users in train.examples=sequence's batches of 512 were 3 steps an epoch, and validation NDCG@10 0.0007
FEW_STEPS = 50
#: steps over train.epochs that make up for few an epoch: the ML-1M recipes reach their best epoch after
#: 15,000-30,000 (the pooled default ~1,930 an epoch, best at 14-16; examples/sasrec.toml 378 an epoch, 40)
ENOUGH_STEPS = 1_000

#: rows of an ID table above which a start under train.optimizer=adamw suggests sparse_adam: AdamW steps every row
#: every step (a 373,000-item catalogue: 4,400 examples/s, against 21,700 with sparse_adam on one thread)
BIG_TABLE_ROWS = 100_000

log = logging.getLogger("twotower.training.trainer")


def log_start(tr: "Trainer", batch: int) -> None:
    """What the fit will run (rank 0 calls it): the units an epoch, the batch (``batch``: the one the steps take,
    which sizes the loss's candidates), the loss, the optimizer, the parameters, the users and items; then a
    history dropout set for a tower that reads no history, and an eval.select_metric whose lists hold every item
    some users can be shown (training/select_metric.py)."""
    train, loss, model = tr.cfg, tr.loss_cfg, tr.model
    n_params = sum(p.numel() for p in model.parameters())
    log.info("training: %d %s/epoch (%s), batch %d%s%s, loss %s, %s%s, %d parameters (%.1f MB), %d users, %d items",
             tr._units_per_epoch(), "sequences" if tr.sequence else "examples", train.examples,
             train.batch_size, f" across {tr.world} ranks" if tr.world > 1 else "", f", GradCache chunks of {train.gradcache_chunk}" if train.gradcache_chunk else "",
             describe_loss(loss, model.n_items, per="target" if tr.sequence else "example", batch=batch, world=tr.world),
             describe_optimizer(train.optimizer, train.ema_decay, len(tr._sparse_ids)), ", bf16 matrix products" if tr.bf16 else "", n_params, n_params * 4 / 1e6, model.n_users, model.n_items)
    unused = unused_history_dropout(train, model.user_tower.uses_history)
    if unused:  # a warning where the value was set (not the default, 0.2): an INFO line, which -q hides, said it
        log.log(logging.INFO if train.history_dropout == type(train)().history_dropout else logging.WARNING, "%s", unused)
    select = select_metric_warning(tr.eval_cfg.select_metric, tr.valid_relevant, tr.train_matrix)
    for line, level in ((few_steps_warning(tr, batch), logging.WARNING), (many_negatives_warning(tr, batch), logging.WARNING),
                        (select, logging.WARNING),
                        (sequence_cost_note(tr), logging.INFO), (history_len_note(tr), logging.INFO),
                        (big_tables_note(tr), logging.INFO)):
        if line:
            log.log(level, "%s", line)


def big_tables_note(tr: "Trainer") -> str | None:
    """The note that train.optimizer=adamw steps every row of an ID table of BIG_TABLE_ROWS rows or more each step,
    and that sparse_adam steps only the rows a batch touches (README: big ID tables), or None. A 373,000-item run
    trained at a fifth of sparse_adam's speed and the start line said nothing of it."""
    import torch.nn as nn

    if tr.cfg.optimizer != "adamw":
        return None
    rows = max((m.num_embeddings for m in tr.model.modules() if isinstance(m, nn.Embedding)), default=0)
    if rows < BIG_TABLE_ROWS:
        return None
    return (f"train.optimizer=adamw steps every row of the ID tables at every step, and the largest holds "
            f"{rows:,} rows: train.optimizer=sparse_adam steps only the rows a batch touches (about 5x faster "
            f"on a 373,000-item catalogue), the other weights by AdamW as now")


def many_negatives_warning(tr: "Trainer", batch: int) -> str | None:
    """The warning that loss.uniform_negatives (inbatch) or loss.sampled_negatives (sampled) draws more negatives a
    batch than the catalogue has items, or None: they are drawn with replacement, so most are repeats, and the full
    softmax scores each item once. loss.uniform_negatives=100000 on ML-100K's 1,615 items trained at 133 examples/s
    against ~9,000, the start line saying only "100511 negatives a query"."""
    loss, n_items = tr.loss_cfg, tr.model.n_items
    if loss.kind == "inbatch" and loss.uniform_negatives > n_items:
        setting, drawn, per_query = "uniform_negatives", loss.uniform_negatives, batch - 1 + loss.uniform_negatives
    elif loss.kind == "sampled" and loss.sampled_negatives > n_items:
        setting, drawn, per_query = "sampled_negatives", loss.sampled_negatives, loss.sampled_negatives
    else:
        return None
    drop = f"loss.{setting}" + (" and loss.sampler" if loss.kind == "sampled" and loss.sampler != "uniform" else "")
    return (f"loss.{setting}={drawn:,} draws more negatives a batch than the {n_items:,} items of the catalogue, so "
            f"most are repeats (drawn with replacement), {per_query:,} negatives a query in all; loss.kind=full scores "
            f"each item once, the exact softmax these negatives estimate, and is cheaper here: set loss.kind=full and "
            f"drop {drop}")


def few_steps_warning(tr: "Trainer", batch: int) -> str | None:
    """The warning that an epoch is fewer than FEW_STEPS optimizer steps (and the run's epochs fewer than
    ENOUGH_STEPS in all), with the numbers and what gives more, or None."""
    train, n = tr.cfg, tr._units_per_epoch()
    steps = math.ceil(n / max(batch, 1))
    total = steps * train.epochs
    if steps >= FEW_STEPS or total >= ENOUGH_STEPS:
        return None
    unit = "sequences" if tr.sequence else "examples"
    smaller = 2 ** int(math.log2(n // FEW_STEPS)) if n // FEW_STEPS >= 2 else None  # a power of two giving FEW_STEPS
    fix = (f"a smaller train.batch_size (e.g. {smaller}: {math.ceil(n / smaller):,} steps an epoch) or more epochs "
           if smaller is not None and smaller < batch else "more epochs ")
    return (f"{n:,} {unit} an epoch (train.examples={train.examples}) in batches of {batch} make "
            f"{plural(steps, 'optimizer step')} an epoch, {total:,} over train.epochs={train.epochs}: too few updates "
            f"for the towers to learn much (the ML-1M recipes take 15,000-30,000); {fix}(train.epochs) give more")


def sequence_cost_note(tr: "Trainer") -> str | None:
    """For a sequence user tower (transformer, gru) trained on causal examples: it runs once per example, where
    train.examples=sequence runs it once per user with a target at every position; None otherwise."""
    tower = tr.model.user_tower
    if not tower.is_sequence or tr.cfg.examples != "causal":
        return None
    kind, n = tr.model.config.user.history, tr._units_per_epoch()
    windows = examples_per_epoch(tr.seqs.lengths(), "sequence", tr.cfg.max_examples_per_epoch)
    return (f"model.user.history={kind} with train.examples=causal runs the {kind} once per training example: "
            f"{n:,} forward passes an epoch over windows of up to {tr.model.history_len} items; "
            f"train.examples=sequence, the all-positions objective, runs it once per user ({windows:,} windows an "
            f"epoch) with a target at every position (examples/sasrec.toml is the ML-1M recipe)")


def history_len_note(tr: "Trainer") -> str | None:
    """Where most users' training histories are longer than model.user.history_len (the median above it): the
    user tower reads only the newest history_len items of each; None otherwise, or for a tower reading no history."""
    if not tr.model.user_tower.uses_history:
        return None
    lengths = tr.seqs.lengths()
    lengths = lengths[lengths > 0]
    L = tr.model.history_len
    if not len(lengths) or np.median(lengths) <= L:
        return None
    return (f"the user tower reads the last {L} items of each history; the median history here is "
            f"{np.median(lengths):g} (mean {lengths.mean():.0f}): model.user.history_len sets it")
