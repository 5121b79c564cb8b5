"""Checks the ranks of a torchrun training make before their first collective, each refusing on every rank at once.

* ``train.batch_size`` is the global batch, cut into one share per rank: below the number of ranks every batch
  was skipped (a rank without an example), and the run logged loss 0.0 for each epoch and kept untrained weights.
* Every rank reads the data and settings itself (docs/distributed.md), and the ranks must agree on them: a node
  with another copy of the training file (a few rows fewer) trained silently on other examples than rank 0's
  permutation pointed at, or, when its model or batch count differed, stopped in gloo's "Received data size
  doesn't match expected size. Is there a distributed collective mismatch in your code?". The settings compared
  include every ``model.*`` one: a rank given `model.user.seq_positions=left` (or another dropout, or
  `normalize=false`) builds weights of the same shapes, and the gradients of two different models were averaged.
* A ``--resume`` restores every rank from its own copy of ``<out>/checkpoint`` (docs/distributed.md), and the ranks
  must restore the same one (:func:`check_resumed`): a node with a stale copy resumed an earlier epoch, trained rank
  0's broadcast weights with its own optimizer moments, then waited for an epoch rank 0 never ran until
  train.dist_timeout_s, and the run's next --resume read what that mixed training had saved.
"""
from __future__ import annotations

import dataclasses
import hashlib
import socket
from typing import TYPE_CHECKING, Any

import torch.distributed as dist

from twotower.errors import ConfigError, DataError

if TYPE_CHECKING:
    from twotower.training.trainer import Trainer

__all__ = ["check_ranks", "check_resumed", "checkpoint_digest"]

#: Settings each rank may hold for itself: they change nothing that the ranks compute together.
PER_RANK_SETTINGS = frozenset({"threads", "progress", "log_every_s", "device"})


def check_ranks(tr: "Trainer") -> None:
    """Refuse a global batch smaller than the number of ranks, then data or settings that differ between ranks
    (one all-gather of a few numbers and digests); nothing in one process."""
    if tr.world < 2:
        return
    if tr.cfg.batch_size < tr.world:
        raise ConfigError(f"train.batch_size={tr.cfg.batch_size} is the global batch, split over the {tr.world} "
                          f"ranks, and each rank needs an example of every batch: set it to at least {tr.world}")
    mine = _facts(tr)
    every: list[Any] = [None] * tr.world
    dist.all_gather_object(every, mine)
    ref = every[0]
    bad = [r for r, f in enumerate(every) if f["data"] != ref["data"]]
    if bad:
        def said(r: int) -> str:
            f = every[r]
            return f"rank {r}: {f['interactions']:,} interactions, {f['users']:,} users, {f['items']:,} items"

        counts = [tuple(every[r][k] for k in ("interactions", "users", "items")) for r in (0, *bad)]
        same = " (as many, but not the same rows)" if len(set(counts)) == 1 else ""
        raise DataError(f"the ranks read different training data ({'; '.join(said(r) for r in [0, *bad])}{same}); "
                        f"every rank must read the same files: each node needs the same data at the same path "
                        f"(docs/distributed.md)")
    for r, f in enumerate(every):  # before the shapes: a setting named says more than "its shapes differ"
        differ = sorted(k for k in set(f["settings"]) | set(ref["settings"]) if f["settings"].get(k) != ref["settings"].get(k))
        if differ:
            shown = ", ".join(f"{k}={ref['settings'].get(k)!r} on rank 0, {f['settings'].get(k)!r} on rank {r}"
                              for k in differ[:3])
            raise ConfigError(f"the ranks were given different settings ({shown}); start every rank with the same "
                              f"command and config file")
    odd = [r for r, f in enumerate(every) if f["model"] != ref["model"]]
    if odd:  # the same interactions and settings: other feature tables (or item text embeddings)
        raise ConfigError(f"rank {odd[0]} built another model than rank 0 (its weights' shapes differ with the same "
                          f"settings: other feature files or item text embeddings); start every rank with the same "
                          f"command and config file, and give every node the same feature files")


def checkpoint_digest(files: dict[str, str]) -> str:
    """One digest of a checkpoint's files (``state.json``'s name -> sha256 map, verified when it was loaded): two
    copies of one checkpoint give the same, a stale copy (or another run's) another."""
    return hashlib.sha256(repr(sorted(files.items())).encode()).hexdigest()


def check_resumed(tr: "Trainer", done: int, resumed: dict[str, Any] | None) -> None:
    """Refuse ranks that start from different points: another checkpoint (an older copy of ``<out>/checkpoint`` on
    one node), or one rank resuming and another not. ``done``: the epoch this rank continues after (0: a fresh
    start); ``resumed``: what :func:`twotower.training.hooks.resume_state` restored (path, epoch, global step and
    :func:`checkpoint_digest`), None without a resume. One all-gather; nothing in one process."""
    if tr.world < 2:
        return
    mine = {"epoch": done, "step": None, "digest": None, "path": None, **(resumed or {}), "host": socket.gethostname()}
    every: list[Any] = [None] * tr.world
    dist.all_gather_object(every, mine)
    key = [(f["epoch"], f["step"], f["digest"]) for f in every]
    bad = [r for r in range(tr.world) if key[r] != key[0]]
    if not bad:
        return
    hosts = len({f["host"] for f in every}) > 1

    def said(r: int) -> str:
        f = every[r]
        where = f" on {f['host']}" if hosts else ""
        if f["path"] is None:
            return f"rank {r}{where}: no --resume, starts at epoch 1"
        return f"rank {r}{where}: {f['path']}, epoch {f['epoch']}, step {f['step']:,}"

    same = " (the same epoch and step, other contents)" if len({key[r][:2] for r in (0, *bad)}) == 1 else ""
    raise ConfigError(f"the ranks resumed from different checkpoints ({'; '.join(said(r) for r in [0, *bad])}{same}); "
                      f"every rank must restore the same one: copy rank 0's checkpoint folder to the same path on "
                      f"every node (or put --out on a shared filesystem) and run the same command with --resume "
                      f"on every rank (docs/distributed.md); nothing was trained")


def _facts(tr: "Trainer") -> dict[str, Any]:
    """What every rank must agree on: digests of the training interactions and of the model's shapes, and the
    training, loss and model settings (those of :data:`PER_RANK_SETTINGS` left out; no model setting is one)."""
    seqs, model = tr.seqs, tr.model
    h = hashlib.sha256()
    for a in (seqs.indptr, seqs.items, seqs.timestamps):
        h.update(a.tobytes())
    shapes = repr(sorted((k, tuple(v.shape)) for k, v in model.state_dict().items())).encode()
    settings = {f"train.{k}": v for k, v in dataclasses.asdict(tr.cfg).items() if k not in PER_RANK_SETTINGS}
    settings.update({f"loss.{k}": v for k, v in dataclasses.asdict(tr.loss_cfg).items()})
    if dataclasses.is_dataclass(getattr(model, "config", None)):  # ModelConfig, named as the overrides name it
        settings.update(_dotted("model", dataclasses.asdict(model.config)))
    return {"data": h.hexdigest(), "model": hashlib.sha256(shapes).hexdigest(), "interactions": int(seqs.items.size), "users": int(seqs.n_users),
            "items": int(model.n_items), "settings": settings}


def _dotted(prefix: str, tree: dict[str, Any]) -> dict[str, Any]:
    """``{"user": {"dropout": 0.1}}`` -> ``{"model.user.dropout": 0.1}``: a nested config's leaves by their names."""
    out: dict[str, Any] = {}
    for k, v in tree.items():
        out.update(_dotted(f"{prefix}.{k}", v) if isinstance(v, dict) else {f"{prefix}.{k}": v})
    return out
