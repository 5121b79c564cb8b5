"""How much memory a model's parameters take, estimated from its config and the data's sizes before it is built.

Every size is bounded in the config (config.MAX_WIDTH, ...), but sizes under the bounds can still add up to more
than a machine holds: `model.item.hidden=[65536, 65536, 65536]` is 8.6e9 weights. Built, torch ended in its
out-of-memory traceback or the machine swapped for minutes. The count here follows the modules in towers.py,
mlp.py, sequence.py and feature_block.py closely enough to size them (biases and layer norms included; a tied
history table counted once).

The parameters are not all a training run holds: :func:`training_memory` adds what a step and an epoch
allocate besides them (the weight average and the saved copies of the weights, the item tower's activations
over the step's candidate rows -- the whole catalogue for ``loss.kind=full`` --, the sequence encoder's
activations and attention mask, the loss's score matrices, validation's score blocks), sized from the run's
settings. `loss.kind=full` over a 200K-item catalogue passed the parameter check at 100 MB a copy and peaked
2.4 GiB above it in its first step; :func:`check_training_fits` refuses such a run before anything is built,
naming the largest term and the setting that sizes it.

Under ``torchrun --nproc_per_node N`` each of the N processes on the machine holds its own parameters, optimizer
state, best-epoch copy and weight average, and its share of the global batch's activations (``train.batch_size`` is
the GLOBAL batch); only rank 0 validates and writes checkpoints. The estimate is the machine's, read from torchrun's
``WORLD_SIZE`` / ``LOCAL_WORLD_SIZE`` (:func:`processes`): it once sized one process, and 4 processes that each fit
alone were let through to exhaust the machine together.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

from twotower.config import ModelConfig, RunConfig, TowerConfig
from twotower.errors import ConfigError
from twotower.models.feature_block import FeatureArrays

__all__ = ["parameter_counts", "total_memory_bytes", "check_model_fits", "TRAINING_COPIES", "MemoryTerm",
           "training_memory", "check_training_fits", "processes", "TRAINING_OOM_ADVICE", "training_oom_message"]

#: float32 copies of every weight while training with AdamW: the weights, their gradients and Adam's two moments
TRAINING_COPIES = 4
_BYTES = 4  # float32


def _mlp(in_dim: int, tower: TowerConfig) -> int:
    if not tower.head:
        return 0
    n, d = 0, in_dim
    for h in tower.hidden:
        n += d * h + h + (2 * h if tower.layernorm else 0)
        d = h
    return n + d * tower.out_dim + tower.out_dim


def _features(tower: TowerConfig, arrays: FeatureArrays | None) -> tuple[int, int]:
    """(parameters, output width) of a tower's feature block."""
    if arrays is None or not tower.use_features:
        return 0, 0
    tables = (*arrays.categorical_sizes, *arrays.multi_sizes)
    width = tower.feature_dim * len(tables) + int(arrays.numeric.shape[1])
    return tower.feature_dim * sum(max(int(s), 1) for s in tables), width


def _sequence(tower: TowerConfig) -> int:
    d = tower.history_dim
    if tower.history == "transformer":  # positions, blocks (qkv, proj, two-layer FFN, two layer norms), final norm
        return tower.history_len * d + tower.seq_layers * (3 * d * d + 3 * d + 3 * (d * d + d) + 4 * d) + 2 * d
    if tower.history == "gru":  # three gates of input and hidden weights and biases per layer, final norm
        return tower.seq_layers * (6 * d * d + 6 * d) + 2 * d
    return 0


def parameter_counts(config: ModelConfig, n_users: int, n_items: int, *, user_features: FeatureArrays | None = None,
                     item_features: FeatureArrays | None = None, text_dim: int = 0) -> dict[str, int]:
    """The model's parameter count by the setting that sizes each part: ``{"model.item.hidden": n, ...}``.

    Python integers, so a count far beyond any machine is still exact (no overflow)."""
    counts: dict[str, int] = {}

    def add(key: str, n: int) -> None:
        if n:
            counts[key] = counts.get(key, 0) + n

    def ids_and_features(tower: TowerConfig, name: str, rows: int, arrays: FeatureArrays | None) -> int:
        """Count a tower's feature tables and ID table; the width they feed its MLP."""
        params, width = _features(tower, arrays)
        add(f"model.{name}.feature_dim", params)
        if tower.use_id:
            add(f"model.{name}.id_dim", rows * tower.id_dim)
            width += tower.id_dim
        return width

    it, ut = config.item, config.user
    # item tower
    in_dim = ids_and_features(it, "item", n_items, item_features)
    if it.text_embeddings and not it.dual_head:
        in_dim += text_dim
    if it.dual_head:
        add("model.item.dual_head", text_dim * it.out_dim + 1)
    add("model.item.hidden", _mlp(in_dim, it))
    # user tower
    in_dim = ids_and_features(ut, "user", n_users, user_features)
    if ut.history != "none":
        sequence = ut.history in ("transformer", "gru")
        tied = sequence and config.share_item_embeddings and it.use_id and it.id_dim == ut.history_dim
        if not tied:
            add("model.user.history_dim", (n_items + 1) * ut.history_dim)
        if sequence:
            add("model.user.history_len" if ut.history == "transformer" else "model.user.seq_layers",
                _sequence(ut) + ut.history_dim)
            in_dim += ut.history_dim
        else:
            first = 1.0 if ut.history == "mean" else ut.recency_decay
            in_dim += ut.history_dim * (1 + sum(1 for d in ut.extra_pools if d != first))
    add("model.user.hidden", _mlp(in_dim, ut))
    return counts


def total_memory_bytes() -> int | None:
    """The machine's physical memory in bytes, None where the platform does not say."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
        return None


def processes() -> tuple[int, int]:
    """(ranks in the run, ranks on this machine) from torchrun's environment, as distributed.init_from_env reads
    it: (1, 1) when ``WORLD_SIZE`` is unset or 1. Without ``LOCAL_WORLD_SIZE`` (torchrun always sets it) every rank
    is taken to be on this machine."""
    world = max(int(os.environ.get("WORLD_SIZE", "1") or "1"), 1)
    if world == 1:
        return 1, 1
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "") or world)
    return world, min(max(local, 1), world)


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:,.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    raise AssertionError  # pragma: no cover


def check_model_fits(config: ModelConfig, n_users: int, n_items: int, *, user_features: FeatureArrays | None = None,
                     item_features: FeatureArrays | None = None, text_dim: int = 0, copies: int = TRAINING_COPIES,
                     memory: int | None = None, n_processes: int = 1) -> None:
    """ConfigError when ``copies`` float32 copies of the model's parameters, in each of ``n_processes`` processes,
    exceed the machine's memory.

    Called before the model is built, so nothing is allocated for a model that cannot fit: ``copies`` is
    TRAINING_COPIES when it is trained with AdamW, 1 when a trained run is loaded. ``memory`` defaults to the
    machine's physical memory (:func:`total_memory_bytes`); the check is skipped when that is unknown.
    """
    memory = total_memory_bytes() if memory is None else memory
    if memory is None:
        return
    counts = parameter_counts(config, n_users, n_items, user_features=user_features, item_features=item_features,
                              text_dim=text_dim)
    total = sum(counts.values())
    need = total * _BYTES * copies * n_processes
    if need <= memory:
        return
    main = sorted(counts.items(), key=lambda kv: -kv[1])[:3]
    parts = ", ".join(f"{key} {n:,}" for key, n in main)
    what = ("weights, gradients and AdamW's two moments" if copies == TRAINING_COPIES
            else "float32 weights" if copies == 1 else f"{copies} float32 copies")
    fewer = ""
    if n_processes > 1:
        what += f" in each of {n_processes} processes"
        fewer = " (or run fewer processes on this machine)"
    raise ConfigError(
        f"{main[0][0]}: the model would have about {total:,} parameters ({parts}; for {n_users:,} users and "
        f"{n_items:,} items), about {_size(need)} as {what}, more than this machine's {_size(memory)} of memory; "
        f"make {main[0][0]} smaller{fewer}")


# ---------------------------------------------------------------- a training run's working memory
# Floats a step keeps per row and unit, counted from the modules and checked against peak RSS (the commit that
# added them lists the runs): an MLP layer keeps its linear output, LayerNorm output and statistics, activation,
# dropout mask and output for backward, and backward adds the gradients of one or two of them at a time.
_PER_HIDDEN = 5
_PER_OUT = 4  # the output layer, its L2 normalisation and their gradients
_PER_BLOCK = 16  # a transformer block per position and width: LN, q/k/v, attention output, projection, FFN, residuals
_PER_GRU_LAYER = 8  # three gates of input and hidden products, the state, and their gradients
_PER_SCORE = 6  # a PyTorch softmax loss per score: scores, logits, corrected logits, log-softmax, two gradients
_CANDIDATE_COPIES = 4  # [N, D] embeddings around the loss: the candidates, their gradient, the kernel's, GradCache's
_SAVED_COPIES = 2  # the best epoch's weights kept in memory, and a checkpoint's copy of the weights while written
_SCORE_BLOCK_COPIES = 3.5  # validation: a user block's [U, I] scores, the masked copy and top-k's work (protocol.py)
_RUNTIME = 96 << 20  # what a first step adds whatever the sizes (autograd, kernels, libraries): 75 MiB measured


@dataclass(frozen=True)
class MemoryTerm:
    """One part of a training run's peak memory: what it is, the setting that sizes it and what to do about it."""

    setting: str
    what: str
    bytes: int
    advice: str


def _mlp_floats(in_dim: int, tower: TowerConfig) -> int:
    """Floats a step keeps per row of a tower's feature block and MLP."""
    return in_dim + (_PER_HIDDEN * sum(tower.hidden) + _PER_OUT * tower.out_dim if tower.head else _PER_OUT * in_dim)


def _user_rows(run: RunConfig, b: int) -> tuple[int, int, int]:
    """(windows a step reads, columns each, query rows) for ``b`` examples: one query row per example, or with
    train.examples=sequence one per window position (its target positions, at most history_len each)."""
    ut = run.model.user
    cols = ut.history_len if ut.history != "none" else 0
    return b, cols, b * max(cols, 1) if run.train.examples == "sequence" else b


def training_memory(run: RunConfig, n_users: int, n_items: int, *, user_features: FeatureArrays | None = None,
                    item_features: FeatureArrays | None = None, text_dim: int = 0,
                    n_examples: int | None = None) -> list[MemoryTerm]:
    """What a training run holds at its peak besides its data, by part (bytes, float32), largest first.

    The parameters' four training copies (:data:`TRAINING_COPIES`) are the first term. A CUDA run's step lives in
    the device's memory, which this does not know: its terms are the parameters' and validation's only.
    Under torchrun (:func:`processes`) the terms are the machine's: every process on it holds the parameter terms
    and its share of the global batch's step terms; validation and the checkpoint copies are rank 0's alone.
    ``n_examples``: the examples an epoch holds, when known: a batch holds at most that many (the trainer cuts it), so
    ``train.batch_size=100000`` over 600 examples is sized as the 600 it trains on, not refused for 230 GiB.
    """
    model, loss, train = run.model, run.loss, run.train
    it, ut = model.item, model.user
    world, local = processes()
    counts = parameter_counts(model, n_users, n_items, user_features=user_features, item_features=item_features,
                              text_dim=text_dim)
    params = sum(counts.values())
    biggest = max(counts, key=lambda k: counts[k]) if counts else "model.item.hidden"
    each = f" (x{local} processes)" if local > 1 else ""
    # every rank keeps the best epoch's weights (trainer.fit); rank 0 alone writes the checkpoint's copy
    terms = [MemoryTerm(biggest, f"weights, gradients and AdamW's two moments{each}",
                        params * _BYTES * TRAINING_COPIES * local, f"make {biggest} smaller"),
             MemoryTerm(biggest, f"the best epoch's weights and a checkpoint's copy{each}",
                        params * _BYTES * (_SAVED_COPIES - 1 + local), f"make {biggest} smaller"),
             MemoryTerm("train.batch_size", f"the runtime's own buffers{each}", _RUNTIME * local,
                        "lower train.batch_size")]
    if train.ema_decay:
        # the average on every rank and, while rank 0 writes a checkpoint, its copy (training/averaging.py,
        # hooks.save_epoch)
        terms.append(MemoryTerm("train.ema_decay", f"the weight average and its checkpoint copy{each}",
                                params * _BYTES * (1 + local),
                                "set train.ema_decay=0 to train without the weight average"))
    d = it.out_dim
    from twotower.evaluation.protocol import EvalProtocol  # numpy and scipy only; already loaded by a run

    block = EvalProtocol().chunk_users(n_items)  # validation scores this many users at a time
    terms.append(MemoryTerm("train.valid_max_users", f"validation's score blocks ({block:,} users x {n_items:,} "
                            "items)", int(block * n_items * _BYTES * _SCORE_BLOCK_COPIES) + n_items * d * _BYTES * 2,
                            "validate on a file with fewer items, or train with train.eval_every above train.epochs"))
    if run.train.device != "cpu":
        return sorted(terms, key=lambda t: -t.bytes)
    step: list[MemoryTerm] = []  # one process's; the machine holds ``local`` of them
    # this rank's share of the GLOBAL batch (training/step.py share: the largest share), and the global query rows
    batch = train.batch_size if n_examples is None else min(train.batch_size, max(n_examples, 2))
    b, cols, q = _user_rows(run, math.ceil(batch / world))
    q_global = _user_rows(run, batch)[2]
    chunk = train.gradcache_chunk
    # the step's candidate rows (training/step.py RecStep.candidates)
    if loss.kind == "full":
        n = n_items
        rows_setting, rows_what = "loss.kind", f"loss.kind=full: all {n_items:,} items"
        rows_advice = ("set train.gradcache_chunk (e.g. 4096) to embed the catalogue in chunks, or use "
                       "loss.kind=sampled")
    elif loss.kind == "sampled":
        n = q + loss.sampled_negatives
        rows_setting, rows_what = "loss.sampled_negatives", f"{q:,} positives and {loss.sampled_negatives:,} negatives"
        rows_advice = "lower loss.sampled_negatives or train.batch_size"
    elif loss.kind == "inbatch":
        n = (min(q_global + loss.uniform_negatives, n_items) if train.examples == "sequence"
             else batch + loss.uniform_negatives)
        rows_setting = "loss.uniform_negatives" if loss.uniform_negatives > q_global else "train.batch_size"
        rows_what = f"{n:,} in-batch candidates"
        rows_advice = f"lower {rows_setting}"
    else:  # bpr: a positive and a negative per query row
        n = 2 * q
        rows_setting, rows_what, rows_advice = "train.batch_size", f"{n:,} BPR candidates", "lower train.batch_size"
    # a rank embeds its own in-batch candidates (its targets and its share of the uniform draws) and scores the
    # gathered ones (training/step.py); the other kinds' candidates are all its own
    own = min(n, q + math.ceil(loss.uniform_negatives / world)) if loss.kind == "inbatch" else n
    _, feat = _features(it, item_features)
    item_in = feat + (it.id_dim if it.use_id else 0) + (text_dim if it.text_embeddings else 0)
    tower_rows = min(own, chunk) if chunk else own
    step.append(MemoryTerm(rows_setting, f"the item tower's activations over {tower_rows:,} rows ({rows_what})",
                            tower_rows * _mlp_floats(item_in, it) * _BYTES, rows_advice))
    # the loss: a PyTorch softmax's [Q, N] score matrices; the CPU kernel of the full softmax (and of the sequence
    # objective's de-duplicated in-batch candidates) keeps only ~2 MB blocks (losses/fused_xent.py)
    kernel = loss.kind == "full" or (loss.kind == "inbatch" and train.examples == "sequence")
    scores = 0 if kernel or loss.kind == "bpr" else q * n * _PER_SCORE * _BYTES
    scores += n * d * _BYTES * _CANDIDATE_COPIES + q * d * _BYTES * _CANDIDATE_COPIES
    step.append(MemoryTerm(rows_setting if loss.kind in ("sampled", "inbatch") else "train.batch_size",
                            f"the loss's scores and embeddings ({q:,} queries x {n:,} candidates)", scores,
                            rows_advice if loss.kind in ("sampled", "inbatch") else "lower train.batch_size"))
    # the user tower over the step's windows
    _, ufeat = _features(ut, user_features)
    user_in = ufeat + (ut.id_dim if ut.use_id else 0)
    h = ut.history_dim
    if ut.history in ("transformer", "gru"):
        user_in += h
        per_block = _PER_BLOCK if ut.history == "transformer" else _PER_GRU_LAYER
        seq = b * cols * h * (2 + per_block * ut.seq_layers) * _BYTES
        if ut.history == "transformer":
            # the additive [B, 1, L, L] mask and its boolean source (models/sequence.py); under bf16 the attention
            # scores and probabilities of every block are kept in bfloat16 too
            seq += b * cols * cols * (_BYTES + 1)
            if train.precision != "fp32":
                seq += b * ut.seq_heads * cols * cols * 2 * 3 * ut.seq_layers
        step.append(MemoryTerm("model.user.history_len", f"the {ut.history} user tower's activations ({b:,} "
                                f"windows of {cols:,} items)", seq,
                                "lower model.user.history_len or train.batch_size"))
    elif ut.history != "none":
        pools = 1 + len(ut.extra_pools)
        user_in += h * pools
        step.append(MemoryTerm("model.user.history_len", f"the pooled history ({b:,} windows of {cols:,} items)",
                                b * cols * h * (2 + pools) * _BYTES, "lower model.user.history_len or train.batch_size"))
    # its MLP over the query rows: one per example, or under train.examples=sequence one per window position
    step.append(MemoryTerm("train.batch_size", f"the user tower's activations ({q:,} rows)",
                           q * _mlp_floats(user_in, ut) * _BYTES, "lower train.batch_size"))
    terms += [MemoryTerm(t.setting, t.what + each, t.bytes * local, t.advice) for t in step]
    return sorted(terms, key=lambda t: -t.bytes)


def check_training_fits(run: RunConfig, n_users: int, n_items: int, *, user_features: FeatureArrays | None = None,
                        item_features: FeatureArrays | None = None, text_dim: int = 0,
                        memory: int | None = None, n_examples: int | None = None) -> list[MemoryTerm]:
    """ConfigError when training ``run`` would need more than the machine's memory (``memory``: its physical
    memory by default; nothing is checked where that is unknown); else the estimate's terms, largest first, which
    :func:`training_oom_message` quotes should the run run out of memory all the same.

    The parameters alone are refused first, with :func:`check_model_fits`'s message; then the whole estimate
    (:func:`training_memory`), naming its largest term and the setting to lower. Under torchrun both are the
    machine's: the sum over its processes (:func:`processes`).
    """
    memory = total_memory_bytes() if memory is None else memory
    if memory is None:
        return training_memory(run, n_users, n_items, user_features=user_features, item_features=item_features,
                               text_dim=text_dim, n_examples=n_examples)
    local = processes()[1]
    check_model_fits(run.model, n_users, n_items, user_features=user_features, item_features=item_features,
                     text_dim=text_dim, memory=memory, n_processes=local)
    terms = training_memory(run, n_users, n_items, user_features=user_features, item_features=item_features,
                            text_dim=text_dim, n_examples=n_examples)
    need = sum(t.bytes for t in terms)
    if need <= memory:
        return terms
    top = terms[0]
    parts = "; ".join(f"{t.what} {_size(t.bytes)}" for t in terms[:3])
    procs = f" in {local} processes" if local > 1 else ""
    fewer = " (or run fewer processes on this machine)" if local > 1 else ""
    raise ConfigError(
        f"{top.setting}: training would need about {_size(need)} of memory at its peak{procs} ({parts}; for "
        f"{n_users:,} users and {n_items:,} items), more than this machine's {_size(memory)}; {top.advice}{fewer}")


#: What lowers a training step's memory, for a run that ran out of it (cli/main.py, pipeline/run.py)
TRAINING_OOM_ADVICE = ("lower train.batch_size (the global batch under torchrun), loss.sampled_negatives or "
                       "loss.uniform_negatives, set train.gradcache_chunk (e.g. 256) to run the towers a chunk at a "
                       "time, or lower train.threads")


def training_oom_message(detail: str, terms: list[MemoryTerm] | None) -> str:
    """The one line for a training run out of memory: what failed, the estimate made before training (it passed,
    or the run was refused: so something else holds memory, or the estimate is short) and what to lower."""
    said = f" ({detail})" if detail else ""
    estimate = ""
    if terms:
        top = terms[0]
        memory = total_memory_bytes()
        of = f" of this machine's {_size(memory)}" if memory else ""
        estimate = (f"; its peak was estimated at about {_size(sum(t.bytes for t in terms))}{of} before training "
                    f"(largest: {top.what}, {_size(top.bytes)}), so other programs may hold the rest")
    return f"out of memory while training{said}{estimate}; {TRAINING_OOM_ADVICE}"
