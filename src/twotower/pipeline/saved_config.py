"""How a run's ``config.json`` reads: as the run was trained, whichever version saved it.

A run's config.json records every setting of the version that saved it; the settings added since, and the switches
refused since that an earlier version wrote, read as that version trained (serve, recommend, ``--resume``), and so
does ``train --config RUN/config.json``, which is to train as that run did. Apart from
:mod:`twotower.pipeline.artifacts` (which loads torch): :func:`twotower.config.load_config` reads a run's file here.
"""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from twotower.config import MAX_ITEM_ITEM_WEIGHT, TRANSFORMER_ONLY, LossConfig, RunConfig, TowerConfig, TrainConfig, check_known_settings
from twotower.errors import ConfigError
from twotower.pipeline.run_files import RUN_MARKERS
from twotower.utils.version import installed_version

log = logging.getLogger(__name__)

__all__ = ["AS_BEFORE_THEY_CAME", "check_run_settings", "is_run_record", "run_record_as_trained", "saved_config_dict"]


#: Settings added since runs were first saved whose default does otherwise than the runs saved before them did, at
#: the value those runs trained with. A run's config.json records every setting of the version that saved it, so
#: a key it lacks came later; read with today's default, `--resume` and `train --config RUN/config.json` trained
#: another model without a word (history dropout on), or built a tower its weights do not fit (a second pool).
AS_BEFORE_THEY_CAME: dict[str, Any] = {
    "model.user.extra_pools": [],  # one history pool: the default [1.0] adds a second
    "model.user.dropout_rng": "torch",  # PyTorch's own dropout masks, which pcg64's replaced
    "model.item.dropout_rng": "torch",
    "model.item_item": {"enabled": False},  # the term fitted after training came later
    "model.item_item.low_rank_max_items": 2**31 - 1,  # the term had no catalogue ceiling before it
    "train.history_dropout": 0.0,  # came with its default, 0.2
    "train.ema_decay": None,  # the weight average came later (its default 0.99 later still)
    "train.budget_schedule": False,  # a time budget ended the fit with the schedule aimed at train.epochs
    "eval.ease_solver": "dense",  # above eval.ease_max_items the EASE baseline was skipped, not solved low-rank
    "eval.ease_tune_max_users": None,  # the baselines tuned on every validation user
}


def _with_settings_before_they_came(data: Any) -> Any:
    """``data`` with each setting of :data:`AS_BEFORE_THEY_CAME` its section lacks set to that value (copied, not
    changed in place); a section the file lacks is left to the defaults."""
    for key, value in AS_BEFORE_THEY_CAME.items():
        *path, name = key.split(".")
        sections = [data]
        for part in path:
            sections.append(sections[-1].get(part) if isinstance(sections[-1], dict) else None)
        if not isinstance(sections[-1], dict) or name in sections[-1]:
            continue
        filled: Any = {**sections[-1], name: value}
        for part, section in zip(reversed(path), reversed(sections[:-1])):
            filled = {**section, part: filled}
        data = filled
    return data


def saved_config_dict(data: Any) -> Any:
    """A saved run's ``config.json`` with the settings added since at the values the runs saved before them were
    trained with (:data:`AS_BEFORE_THEY_CAME`), and switches refused since read as those runs trained."""
    data = _with_settings_before_they_came(data)
    # switches of another loss kind or example mode, refused since (config.py) but written by runs saved before:
    # they trained without them, so they read as off and such a run still loads (serve, recommend, --resume)
    loss = data.get("loss") if isinstance(data, dict) else None
    if isinstance(loss, dict):
        kind = loss.get("kind", LossConfig.kind)
        off = {**({"uniform_negatives": 0} if kind != "inbatch" else {}),
               **({"sampler": LossConfig.sampler} if kind != "sampled" else {})}
        if any(k in loss and loss[k] != v for k, v in off.items()):
            data = {**data, "loss": {**loss, **{k: v for k, v in off.items() if k in loss}}}
    train = data.get("train") if isinstance(data, dict) else None
    if isinstance(train, dict) and train.get("random_windows") and train.get("examples", TrainConfig.examples) != "sequence":
        data = {**data, "train": {**train, "random_windows": False}}
    train = data.get("train") if isinstance(data, dict) else None
    if (isinstance(train, dict) and "denoise_keep" in train and train["denoise_keep"] != TrainConfig.denoise_keep
            and train.get("examples", TrainConfig.examples) not in ("denoising", "both")):
        data = {**data, "train": {**train, "denoise_keep": TrainConfig.denoise_keep}}
    model = data.get("model") if isinstance(data, dict) else None
    for tower in ("user", "item"):  # transformer switches beside another history (TRANSFORMER_ONLY): built without
        conf = model.get(tower) if isinstance(model, dict) else None
        if isinstance(conf, dict) and conf.get("history") != "transformer":
            reset = {k: getattr(TowerConfig, k) for k in TRANSFORMER_ONLY if k in conf}
            if any(conf[k] != v for k, v in reset.items()):
                model = {**model, tower: {**conf, **reset}}
                data = {**data, "model": model}
    item = model.get("item") if isinstance(model, dict) else None
    if isinstance(item, dict) and item.get("dual_head") and item.get("normalize") is False:
        data = {**data, "model": {**model, "item": {**item, "normalize": True}}}  # the dual head normalised anyway
    train = data.get("train") if isinstance(data, dict) else None
    if isinstance(train, dict) and train.get("precision") == "bf16" and train.get("device", TrainConfig.device) != "cpu":
        data = {**data, "train": {**train, "precision": "fp32"}}  # a GPU run trained in float32
    return _item_item_weights_bounded(data)


def _item_item_weights_bounded(data: Any) -> Any:
    """``data`` with the item-item weights tried past MAX_ITEM_ITEM_WEIGHT (refused since) read as that bound: the
    term alone orders the lists there as it did at theirs, and the weight chosen is in the run's model weights."""
    model = data.get("model") if isinstance(data, dict) else None
    term = model.get("item_item") if isinstance(model, dict) else None
    weights = term.get("weights") if isinstance(term, dict) else None
    if not isinstance(weights, list) or not any(isinstance(w, (int, float)) and w > MAX_ITEM_ITEM_WEIGHT for w in weights):
        return data
    bounded = [min(w, MAX_ITEM_ITEM_WEIGHT) if isinstance(w, (int, float)) else w for w in weights]
    return {**data, "model": {**model, "item_item": {**term, "weights": bounded}}}




def is_run_record(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a run folder's own ``config.json``, beside a file only a run writes (RUN_MARKERS); a
    config file the user wrote, which takes today's defaults for the settings it leaves out, is not."""
    path = Path(path)
    return path.name == "config.json" and any((path.parent / rel).is_file() for rel in RUN_MARKERS)


def check_run_settings(settings: Any, source: str) -> None:
    """:func:`~twotower.config.check_known_settings` for a run's ``config.json`` (``source``: where it is named).

    Nobody typed a run's settings: one this version does not know was most likely added by a newer twotower, and
    the refusal listed this version's keys as for a typo (`recommend` and `serve` without naming the file)."""
    if not isinstance(settings, dict):
        return  # not a table: config_from_dict names what it is
    try:
        check_known_settings(RunConfig, settings, source)
    except ConfigError as e:
        raise ConfigError(f"{e}; the run may have been saved by a newer twotower than this one (version "
                          f"{installed_version()}): upgrade twotower to read it") from None


def run_record_as_trained(path: str | os.PathLike[str], settings: dict[str, Any]) -> dict[str, Any]:
    """``settings``, read from the config file ``path``, as :func:`saved_config_dict` reads them where the file is a
    run's record (:func:`is_run_record`), saying which settings read otherwise than today's defaults would; as they
    are for any other file. `train --config OLD_RUN/config.json` trained a bigger model than OLD_RUN (a second
    history pool, the item-item term, history dropout) without a word, where --resume and serve read the run's."""
    if not is_run_record(path):
        return settings
    read = saved_config_dict(settings)
    changed = [(key, value) for key, value in _leaves(read) if _leaf(settings, key) != (True, value)]
    if changed:
        said = ", ".join(f"{key}={value if isinstance(value, str) else json.dumps(value)}" for key, value in changed)
        log.info("config file %s is the record of a run saved by an earlier version, read as that run was trained: "
                 "%s (today's defaults would train another model)", path, said)
    return read


def _leaves(tree: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """``(dotted key, value)`` of every leaf of ``tree``."""
    out: list[tuple[str, Any]] = []
    for key, value in tree.items():
        out += _leaves(value, f"{prefix}{key}.") if isinstance(value, dict) else [(f"{prefix}{key}", value)]
    return out


def _leaf(tree: Any, dotted: str) -> tuple[bool, Any]:
    """``(True, value)`` of the dotted key in ``tree``, ``(False, None)`` where it lacks it."""
    for part in dotted.split("."):
        if not isinstance(tree, dict) or part not in tree:
            return False, None
        tree = tree[part]
    return True, tree
