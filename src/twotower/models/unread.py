"""The start-up warnings for tower sizes that the built model does not read (one place, one wording).

config.py refuses a *switch* that a tower does not read (USER_TOWER_ONLY, ITEM_TOWER_ONLY, TRANSFORMER_ONLY): it
asks for a part the model would not have. A *size* of a part that is not there (how many layers, how wide, which
decay) is warned of instead, as ``loss.sampled_negatives`` is beside a loss that draws none: it changes nothing,
and a config that keeps its sizes while switching the part off (examples/sasrec.toml with ``history = "gru"``) is
fair. Each warning is said only for a value set away from its default, which no one set by accident.

* the sequence encoders' sizes (SEQUENCE_SIZES) beside a user history that does not read them;
* ``model.user.recency_decay`` beside any history but ``recency`` (``mean`` pools every item with weight 1);
* ``model.user.extra_pools`` beside a history that pools nothing (transformer, gru, none). A list of decays, the
  sizes of the pooled history's extra pools, so warned: a sequence config inherits the user tower's default
  ``[1.0]`` (``--print-config`` shows it beside a transformer), and refusing the decays beside a sequence history
  would also make saved runs that carried them unloadable. Set on the item tower it is refused (USER_TOWER_ONLY):
  that tower reads no history at all;
* ``model.*.id_dim`` beside ``use_id = false``;
* the item tower's history sizes (``history_len``, ``history_dim``, ``recency_decay``, the sequence sizes): it reads
  no history, but config.py keeps them free on both towers for Python configs that build both towers from one
  dict of sizes, so they are warned of only when a config file or an override set them
  (:func:`twotower.config.settings_given`).
"""
from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from twotower.config import SEQUENCE_SIZES, ModelConfig, TowerConfig, settings_given

__all__ = ["unread_sequence_sizes", "unread_tower_sizes"]

#: the user histories that pool the window (models/towers.py): they read recency_decay / extra_pools
POOLED = ("mean", "recency")
#: the TowerConfig sizes of a history, which the item tower never reads (history itself is refused there)
HISTORY_SIZES = ("history_len", "history_dim", "recency_decay",
                 *dict.fromkeys(k for keys in SEQUENCE_SIZES.values() for k in keys))


def unread_tower_sizes(model: ModelConfig, given: Collection[str] | None = None) -> list[str]:
    """Every start-up warning of a tower size ``model`` does not read (the module docstring lists them).
    ``given``: the ``model.*`` keys a config file or override set; None: those :func:`load_config` recorded."""
    given = settings_given(model) if given is None else given
    user_default = ModelConfig().user  # the user tower's own defaults (extra_pools [1.0], use_id false)
    said = unread_sequence_sizes(model.user, "user")
    u = model.user
    if u.history != "recency" and u.recency_decay != user_default.recency_decay:
        said.append(_unread("user", "recency_decay", u.recency_decay, "only the recency history pool reads it",
                            f"model.user.history={u.history}", "model.user.history=recency"))
    if u.history not in POOLED and u.extra_pools and u.extra_pools != user_default.extra_pools:
        said.append(_unread("user", "extra_pools", u.extra_pools,
                            f"only the pooled histories ({', '.join(POOLED)}) read it",
                            f"model.user.history={u.history}", f"model.user.history={' or '.join(POOLED)}"))
    for name, tower, default in (("user", u, user_default), ("item", model.item, TowerConfig())):
        if not tower.use_id and tower.id_dim != default.id_dim:
            said.append(_unread(name, "id_dim", tower.id_dim, "only the ID embedding reads it",
                                f"model.{name}.use_id=false", f"model.{name}.use_id=true"))
    item = model.item
    for key in HISTORY_SIZES:
        value = getattr(item, key)
        if f"model.item.{key}" in given and value != getattr(TowerConfig, key):
            said.append(_unread("item", key, value, "only the user tower reads a history", "the item tower",
                                f"model.user.{key}={_shown(value)}", use="if the user tower's was meant"))
    return said


def unread_sequence_sizes(tower: TowerConfig, name: str = "user") -> list[str]:
    """The start-up warnings for sequence-encoder sizes set away from their defaults that ``tower``'s history does
    not read: examples/sasrec.toml's ``seq_heads = 2`` with ``model.user.history=gru`` trained the same GRU as
    without it, without a word. None at a default, which no one set."""
    read = SEQUENCE_SIZES.get(tower.history, ())
    said = []
    for key in dict.fromkeys(k for keys in SEQUENCE_SIZES.values() for k in keys):
        value, default = getattr(tower, key), getattr(TowerConfig, key)
        if key in read or value == default:
            continue
        readers = [kind for kind, keys in SEQUENCE_SIZES.items() if key in keys]
        who = ("only the transformer history encoder reads it" if readers == ["transformer"] else
               f"only the sequence history encoders ({', '.join(readers)}) read it")
        said.append(_unread(name, key, value, who, f"model.{name}.history={tower.history}",
                            f"model.{name}.history={' or '.join(readers)}"))
    return said


def _unread(name: str, key: str, value: Any, who: str, ignored_by: str, fix: str, *, use: str = "to use it") -> str:
    """The one wording: what has no effect, who reads it, what ignores it here, and the two ways out."""
    # a key a config file sets cannot be dropped on the command line: its default there says the same
    return (f"model.{name}.{key}={_shown(value)} has no effect: {who}, and {ignored_by} would ignore it; set {fix} "
            f"{use}, or drop model.{name}.{key} (from a config file's settings: model.{name}.{key}="
            f"{_shown(getattr(getattr(ModelConfig(), name), key))}, its default)")


def _shown(value: Any) -> str:
    """A value as an override types it: 0.5, 64, [1.0, 0.5]."""
    if isinstance(value, (tuple, list)):
        return json.dumps(list(value))
    return f"{value:g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)
