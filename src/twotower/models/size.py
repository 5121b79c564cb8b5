"""How much memory a model's parameters take, estimated from its config and the data's sizes before it is built.

Every size is bounded in the config (config.MAX_WIDTH, ...), but sizes under the bounds can still add up to more
than a machine holds: `model.item.hidden=[65536, 65536, 65536]` is 8.6e9 weights. Built, torch ended in its
out-of-memory traceback or the machine swapped for minutes. The count here follows the modules in towers.py,
mlp.py, sequence.py and feature_block.py closely enough to size them (biases and layer norms included; a tied
history table counted once); it is an estimate of the parameters only, not of activations.
"""
from __future__ import annotations

import os

from twotower.config import ModelConfig, TowerConfig
from twotower.errors import ConfigError
from twotower.models.feature_block import FeatureArrays

__all__ = ["parameter_counts", "total_memory_bytes", "check_model_fits", "TRAINING_COPIES"]

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


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:,.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    raise AssertionError  # pragma: no cover


def check_model_fits(config: ModelConfig, n_users: int, n_items: int, *, user_features: FeatureArrays | None = None,
                     item_features: FeatureArrays | None = None, text_dim: int = 0, copies: int = TRAINING_COPIES,
                     memory: int | None = None) -> None:
    """ConfigError when ``copies`` float32 copies of the model's parameters exceed the machine's memory.

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
    need = total * _BYTES * copies
    if need <= memory:
        return
    main = sorted(counts.items(), key=lambda kv: -kv[1])[:3]
    parts = ", ".join(f"{key} {n:,}" for key, n in main)
    what = ("weights, gradients and AdamW's two moments" if copies == TRAINING_COPIES
            else "float32 weights" if copies == 1 else f"{copies} float32 copies")
    raise ConfigError(
        f"{main[0][0]}: the model would have about {total:,} parameters ({parts}; for {n_users:,} users and "
        f"{n_items:,} items), about {_size(need)} as {what}, more than this machine's {_size(memory)} of memory; "
        f"make {main[0][0]} smaller")
