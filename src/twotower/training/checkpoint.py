"""Self-describing, atomic checkpoints: weights, optimizer, trainer state, RNG.

Layout of ``<run>/checkpoint/``: ``model.safetensors`` (weights),
``optimizer.pt`` (optimizer state dicts, tensors and numbers only, read back
with ``torch.load(weights_only=True)``), ``state.json`` (epoch, best metric,
patience, log, NumPy RNG state) and ``rng.safetensors`` (torch RNG state). The
directory is built aside and swapped in, so a crash mid-write leaves the
previous checkpoint intact.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from twotower.errors import IntegrityError
from twotower.utils.atomic import atomic_dir, atomic_path, read_json, sha256_file, verify_files

__all__ = ["save_checkpoint", "load_checkpoint", "save_weights", "load_weights", "state_tensors", "optimizer_steps",
           "RESUME_BEST", "take_back_resume_best"]

#: the best weights of a resume stopped before it sealed its run (pipeline/resume_snapshot.py put the finished
#: run's weights back in model.safetensors), beside the run until the next resume takes them back
RESUME_BEST = ".resume-best.safetensors"


def state_tensors(model: torch.nn.Module | dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A model's state dict (or a state dict) as safetensors stores it: detached, on the CPU, contiguous copies."""
    tensors = model if isinstance(model, dict) else model.state_dict()
    return {k: v.detach().cpu().contiguous().clone() for k, v in tensors.items()}


def save_weights(path: str | Path, model: torch.nn.Module | dict[str, torch.Tensor],
                 metadata: dict[str, str] | None = None) -> None:
    """Atomically write a model's state dict (or a state dict) as safetensors."""
    state = state_tensors(model)
    with atomic_path(path) as tmp:
        save_file(state, str(tmp), metadata=metadata)


def load_weights(path: str | Path, model: torch.nn.Module, *, skip: Callable[[str], bool] | None = None) -> None:
    """Load safetensors weights, refusing corrupt files and shape mismatches clearly. ``skip``: tensors of the
    file that the model may lack (they are then left out, not refused)."""
    path = Path(path)
    try:
        state = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as e:
        raise IntegrityError(f"{path}: cannot read weights ({e}); the file is corrupted or truncated") from e
    own = model.state_dict()
    if skip is not None:
        state = {k: v for k, v in state.items() if k in own or not skip(k)}
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    if missing or unexpected:
        raise IntegrityError(f"{path}: weights do not match this model (missing {missing[:5]}, unexpected {unexpected[:5]})")
    for k, v in state.items():
        if tuple(v.shape) != tuple(own[k].shape):
            raise IntegrityError(f"{path}: tensor {k!r} has shape {tuple(v.shape)}, the model expects {tuple(own[k].shape)}")
    model.load_state_dict(state)  # copies into the model's tensors, on whatever device they live


def save_checkpoint(
    directory: str | Path,
    model: torch.nn.Module,
    optimizers: list[torch.optim.Optimizer],
    state: dict[str, Any],
    rng: np.random.Generator,
    extra: dict[str, dict[str, torch.Tensor]] | None = None,
) -> None:
    """``extra``: more tensor files for the checkpoint (name -> tensors), checksummed like the rest."""
    directory = Path(directory)
    with atomic_dir(directory) as tmp:
        save_weights(tmp / "model.safetensors", model)
        # through save_weights like the weights, so every file gets the same permissions (safetensors' own
        # writer left rng.safetensors at 0600 beside 0644 files)
        for name, tensors in (extra or {}).items():
            save_weights(tmp / name, tensors)
        torch.save([opt.state_dict() for opt in optimizers], tmp / "optimizer.pt")
        save_weights(tmp / "rng.safetensors", {"torch": torch.get_rng_state()})
        full = dict(state)
        full["numpy_rng"] = rng.bit_generator.state
        full["files"] = {p.name: sha256_file(p) for p in sorted(tmp.iterdir())}
        full = json.loads(json.dumps(full, default=_default))  # digest what a reader will see
        full["state_sha256"] = _state_digest(full)
        (tmp / "state.json").write_text(json.dumps(full, indent=2, default=_default))


def _state_digest(state: dict[str, Any]) -> str:
    """sha256 of the state without its own digest (canonical JSON), so an edited state.json is refused."""
    body = {k: v for k, v in state.items() if k != "state_sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=_default).encode("utf-8")).hexdigest()


def _default(o: Any) -> Any:
    if hasattr(o, "item"):
        return o.item()
    raise TypeError(type(o).__name__)


def load_checkpoint(
    directory: str | Path,
    model: torch.nn.Module,
    optimizers: list[torch.optim.Optimizer],
    rng: np.random.Generator,
) -> dict[str, Any]:
    """Restore model, optimizers and RNG from a checkpoint; return the trainer state."""
    directory = Path(directory)
    state_path = directory / "state.json"
    if not state_path.exists():
        raise IntegrityError(f"{directory}: no checkpoint here (state.json missing)")
    state = read_json(state_path)
    if not isinstance(state, dict):
        raise IntegrityError(f"{state_path}: not a checkpoint state (expected a JSON object); the file is corrupted")
    if "state_sha256" in state and state["state_sha256"] != _state_digest(state):
        raise IntegrityError(f"{state_path}: checksum mismatch; state.json was edited or corrupted")
    state.pop("state_sha256", None)
    verify_files(directory, state.get("files", {}), fix="the checkpoint is corrupted or half-written; train without --resume")
    load_weights(directory / "model.safetensors", model)
    try:
        opt_states = torch.load(directory / "optimizer.pt", weights_only=True)
    except Exception as e:  # pickle/zip errors of a damaged file (its checksum was not recorded)
        # one line of ours: torch's own message spans lines, carries ANSI escapes and advises weights_only=False
        why = "it holds pickled objects, which are never loaded" if "weights_only" in str(e) else type(e).__name__
        raise IntegrityError(
            f"{directory / 'optimizer.pt'}: refused ({why}); the checkpoint is corrupted or not ours: "
            "train without --resume"
        ) from None
    if len(opt_states) != len(optimizers):
        # not damage (the checksums passed): the optimizer settings differ, e.g. train.optimizer=sparse_adam adds
        # SparseAdam for the ID tables; the bare counts sent users looking for corruption
        raise IntegrityError(
            f"{directory}: the checkpoint holds {len(opt_states)} optimizer state(s), this training builds "
            f"{len(optimizers)}: the optimizer settings (train.optimizer) differ from the run's; resume with the "
            "run's own config or train without --resume"
        )
    for opt, st in zip(optimizers, opt_states):
        built = [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups]
        groups = st.get("param_groups", []) if isinstance(st, dict) else []
        if len(groups) != len(opt.param_groups):  # torch's ValueError would not say which setting
            raise IntegrityError(
                f"{directory}: the checkpoint's optimizer has {len(groups)} parameter group(s), this training builds "
                f"{len(opt.param_groups)}: train.decay_1d differs from the run's; resume with the run's own config "
                "or train without --resume"
            )
        opt.load_state_dict(st)
        # load_state_dict also restores each group's settings: a resume with another train.lr / weight_decay kept
        # the run's (and its recorded base_lr), while config.json said the new ones. The checkpoint gives the
        # moments and step counts; the settings are the ones these optimizers were built with.
        for group, settings in zip(opt.param_groups, built):
            for key in [k for k in group if k != "params" and k not in settings]:
                del group[key]
            group.update(settings)
    torch.set_rng_state(load_file(str(directory / "rng.safetensors"))["torch"])
    rng.bit_generator.state = state.pop("numpy_rng")
    return state


def optimizer_steps(optimizers: list[torch.optim.Optimizer]) -> int:
    """The most steps any parameter of ``optimizers`` has taken (Adam's per-parameter ``step``; 0 before any)."""
    return max((int(st["step"]) for opt in optimizers for st in opt.state.values() if "step" in st), default=0)


def take_back_resume_best(out: Path) -> bool:
    """Before a resume reads ``out/model.safetensors`` as the checkpoint's best epoch: the weights a stopped resume
    set aside there (:data:`RESUME_BEST`, that epoch's) go back in. Whether there were any."""
    held = Path(out) / RESUME_BEST
    if not held.is_file():
        return False
    held.replace(Path(out) / "model.safetensors")
    return True
