"""A new run trained into a folder that holds a finished one: trained beside it, swapped in only once finished.

`twotower train --out RUN` (without --resume) removed the earlier run's files once its data was read, so a new
run that failed, diverged or was stopped (Ctrl-C, SIGTERM, kill -9) left neither run. It now trains into
``.RUN.staging-PID-sSTART`` beside RUN (the same filesystem; pid and start time as in the temporary names of
:mod:`twotower.utils.atomic`, so a later run tells a dead writer's folder from a live one) and replaces RUN in
one atomic exchange once sealed: RUN holds the earlier run or the new one, whole, whenever it is looked at.
"""
from __future__ import annotations

import contextlib
import logging
import os
import shutil
from pathlib import Path

from twotower.errors import ConfigError
from twotower.models.size import _size
from twotower.pipeline.artifacts import derived_folders, previous_run_files
from twotower.pipeline.resume_snapshot import resume_leftover
from twotower.pipeline.run_files import (CHECKPOINT_DIR, MANIFEST, MANIFEST_FILES, RUN_MARKERS, RUN_OUTPUT_FILES,
                                         run_owning_folder)
from twotower.pipeline.tuned_baselines import TUNED_FILE
from twotower.utils.atomic import _fsync_dir, _old_path, _rename_exchange, _start_ticks, _writer_alive
from twotower.utils.folder_lock import LOCK_FILE, active_writer
from twotower.utils.run_folder import STAGING_NAME as _NAME
from twotower.utils.shell import shell_arg

__all__ = ["staging_path", "staged_target", "needs_staging", "sweep_stale_staging", "swap_in",
           "discard_if_empty", "check_room_to_stage", "check_new_run_dir", "ROOM_FOR_BOTH"]

log = logging.getLogger(__name__)


def _real(folder: str | os.PathLike[str]) -> Path:
    return Path(os.path.realpath(folder))


def _base(out: str | os.PathLike[str]) -> Path:
    """``out`` as given where that names the folder itself (messages show the path typed), else its real path."""
    base = Path(out)
    return _real(base) if base.is_symlink() or base.name in ("", ".", "..") else base


def staging_path(out: str | os.PathLike[str]) -> Path:
    """Where this process trains a new run meant for ``out``: ``PARENT/.NAME.staging-PID-sSTART``."""
    base = _base(out)
    start = _start_ticks(os.getpid())
    return base.parent / (f".{base.name}.staging-{os.getpid()}" + ("" if start is None else f"-s{start}"))


def staged_target(folder: str | os.PathLike[str]) -> Path | None:
    """The run folder a staging folder was made for (``RUN`` for ``.RUN.staging-123-s456``), else None."""
    m = _NAME.fullmatch(Path(folder).name)
    return None if m is None else _real(folder).parent / m.group("name")


def needs_staging(out: Path, *, resume: bool) -> bool:
    """A new run (not a resume) into a folder that holds an earlier run trains beside it."""
    return not resume and any((out / rel).is_file() for rel in RUN_MARKERS)


#: what a run writes into its folder (an earlier attempt stopped before it saved weights leaves some of them)
_RUN_WRITES = frozenset((MANIFEST, *MANIFEST_FILES, *RUN_OUTPUT_FILES, TUNED_FILE, LOCK_FILE))
_RUN_SUBFOLDERS = frozenset(rel.split("/")[0] for rel in _RUN_WRITES if "/" in rel)


def _foreign_files(out: Path, inputs: set[Path]) -> list[str]:
    """The files (and empty folders) in ``out`` that no run writes, relative to it; the run's own ``inputs`` (the
    data files it was pointed at) and temporaries of a killed writer are not counted."""
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(out):
        here = Path(dirpath)
        rel_dir = here.relative_to(out)
        if rel_dir == Path("."):
            dirnames[:] = [d for d in dirnames if d != CHECKPOINT_DIR]
        links = [d for d in dirnames if (here / d).is_symlink()]  # named, not walked
        dirnames[:] = [d for d in dirnames if d not in links]
        if rel_dir != Path(".") and not filenames and not dirnames and not links \
                and rel_dir.as_posix() not in _RUN_SUBFOLDERS:
            found.append(rel_dir.as_posix() + "/")
        for name in sorted((*filenames, *links)):
            rel = (rel_dir / name).as_posix()
            if rel in _RUN_WRITES or ".tmp-" in name or (name.startswith(".") and name.endswith(".tmp")):
                continue
            with contextlib.suppress(OSError, RuntimeError):
                if (here / name).resolve() in inputs:
                    continue
            found.append(rel)
    return sorted(found)


def check_new_run_dir(out: Path, inputs: tuple[str | None, ...], *, resume: bool, flag: str = "out") -> None:
    """Refuse a new run into a folder that holds files of the user's and no run (ConfigError, before the data is
    read): `twotower train --out tr` over `tr/mine.txt` trained into it without a word, the run's files mixed with
    the user's, while `export` and `index build` refuse such a folder. A folder holding an earlier run is
    replaced by the new one with the user's files kept beside it (:func:`swap_in`), as before; ``inputs``: the
    data files the run reads, which may sit in the folder."""
    if resume:
        return
    _refuse_run_subfolder(out, flag)
    if not out.is_dir() or any((out / rel).is_file() for rel in RUN_MARKERS):
        return
    wanted = set()
    for value in inputs:
        if value:
            with contextlib.suppress(OSError, RuntimeError):
                wanted.add(Path(value).resolve())
    found = _foreign_files(out, wanted)
    if not found:
        return
    shown = ", ".join(found[:8]) + (f" and {len(found) - 8} more" if len(found) > 8 else "")
    raise ConfigError(f"{flag} {out}: a non-empty folder that holds no run ({shown}); a run trained there would mix "
                      "its files with these: choose a new or empty folder, or move them out")


def _refuse_run_subfolder(out: Path, flag: str) -> None:
    """Refuse ``out`` when it is one of the folders a run keeps inside its own (``RUN/checkpoint``, ``RUN/vocab``):
    `train --out runs/ml/checkpoint` took that folder (it holds model.safetensors) for an earlier run and replaced
    runs/ml's checkpoint with the new run's weights, and runs/ml no longer resumed."""
    run = run_owning_folder(out)
    if run is not None:
        raise ConfigError(f"{flag} {out}: is the {_base(out).name}/ folder of the run {run}, which a new run trained "
                          f"there would damage; choose a folder outside it (or {run} itself, to replace that run)")


def stale_staging(out: Path) -> list[Path]:
    """The staging folders for ``out`` whose writer is gone (killed, or interrupted and not resumed); not one being
    resumed (its lock held)."""
    base, found = _base(out), []
    with contextlib.suppress(OSError):
        for p in sorted(base.parent.iterdir()):
            m = _NAME.fullmatch(p.name)
            if m is None or m.group("name") != base.name or p.is_symlink() or not p.is_dir():
                continue
            pid, start = int(m.group("pid")), m.group("start")
            if pid == os.getpid() or _writer_alive(pid, None if start is None else int(start)) or active_writer(p):
                continue
            found.append(p)
    return found


def sweep_stale_staging(out: Path) -> list[Path]:
    """Remove :func:`stale_staging`'s folders: a new run into ``out`` starts over, as it did before staging."""
    return [p for p in stale_staging(out) if _remove(p, f"the staging folder of an earlier `twotower train --out "
                                                     f"{shell_arg(out)}` that did not finish")]


def _remove(folder: Path, what: str) -> bool:
    """Remove ``folder`` (``what`` it is, in words); True when it is gone. What cannot be removed (a read-only folder
    inside) is said, naming the folder: left in silence, a hidden copy of the earlier run stayed for good, while the
    warnings said it had been replaced."""
    shutil.rmtree(folder, ignore_errors=True)
    if not folder.exists():
        return True
    log.warning("could not remove all of %s, %s (a folder in it is read-only?); remove it yourself: rm -r %s",
                folder, what, shell_arg(folder))
    return False


#: float32 copies of the weights a checkpoint holds: the weights, their average and Adam's two moments
_CHECKPOINT_COPIES = 4

#: what to do when the disk cannot hold the earlier run and the new one at once (``{out}``: the run folder)
ROOM_FOR_BOTH = ("free space, train into another --out, or remove the earlier run first (`rm -r {out}`) and train "
                 "into {out} again")


def _run_size(out: Path) -> tuple[int, int]:
    """(bytes of the earlier run's files a new run writes again, of which weights: model.safetensors, checkpoint/);
    the index and export folders built from it are not rewritten by training."""
    derived = [d.relative_to(out).as_posix() + "/" for d in derived_folders(out) if d.is_relative_to(out)]
    total = weights = 0
    for rel in previous_run_files(out):
        if any(rel.startswith(d) for d in derived):
            continue
        path = out / rel
        files = [p for p in path.rglob("*") if p.is_file() and not p.is_symlink()] if rel.endswith("/") else [path]
        for f in files:
            with contextlib.suppress(OSError):
                n = f.stat().st_size
                total += n
                weights += n if rel in ("model.safetensors", f"{CHECKPOINT_DIR}/") else 0
    return total, weights


def check_room_to_stage(out: Path, stage: Path, *, same_settings: bool, weight_bytes: int, checkpoint: bool) -> None:
    """ConfigError, before training, when the filesystem of ``stage`` cannot hold the new run beside the earlier
    one in ``out``: the earlier run stays until the new one is swapped in, so both take space at once (removed
    first, as before staging, a new run that just fit beside it filled the disk mid-training instead).

    The new run's size is the earlier one's where the model and checkpoint settings match (``same_settings``);
    otherwise its other files plus ``weight_bytes`` (the new model's parameters) in model.safetensors and, with
    ``checkpoint``, the checkpoint's copies: a low estimate, so a run that may fit is not refused."""
    old, old_weights = _run_size(out)
    need = old if same_settings else old - old_weights + weight_bytes * (1 + (_CHECKPOINT_COPIES if checkpoint else 0))
    try:
        free = shutil.disk_usage(stage.parent).free
    except OSError:
        return
    if need <= free:
        return
    raise ConfigError(f"not enough free space for the new run: {out} holds an earlier run ({_size(old)}), which "
                      f"it replaces only once finished, so it trains beside it in {stage} and needs about "
                      f"{_size(need)} there; {_size(free)} is free on that filesystem. "
                      + "F" + ROOM_FOR_BOTH.format(out=shell_arg(out))[1:])


def discard_if_empty(stage: Path) -> bool:
    """After a failed or stopped run: remove its staging folder when it holds nothing to resume or read (no
    checkpointed epoch, no saved weights); True when removed."""
    if not stage.is_dir() or (stage / CHECKPOINT_DIR / "state.json").is_file() or (stage / "model.safetensors").is_file():
        return False
    shutil.rmtree(stage, ignore_errors=True)
    return True


def swap_in(stage: Path, out: Path, *, keep: tuple[Path, ...] = ()) -> list[str]:
    """Put the finished run in ``stage`` in place of ``out``; the earlier run's files replaced (relative paths).

    The folder's other files (the user's own, ``tuned_baselines.json``, an input in ``keep``) are linked into
    ``stage`` first, and so is its lock file, so the lock ``out``'s writer holds still names the folder after
    the swap. On Linux the swap is one ``renameat2(RENAME_EXCHANGE)``; elsewhere two renames, the earlier run
    kept in ``.NAME.old.PID-hHOST`` between them (as :func:`twotower.utils.atomic.atomic_dir` does).
    """
    real = _real(out)
    if not real.exists():
        os.replace(stage, real)
        _fsync_dir(real.parent)
        return []
    replaced = previous_run_files(real, keep=keep)
    _carry_over(real, stage, set(replaced))
    if _rename_exchange(stage, real):
        _fsync_dir(real.parent)
        _remove(stage, "the earlier run's files the new run replaced")  # the earlier run, now under the staging name
        return replaced
    old = _old_path(real)
    os.replace(real, old)
    os.replace(stage, real)
    _fsync_dir(real.parent)
    _remove(old, "the earlier run's files the new run replaced")
    return replaced


def _carry_over(src: Path, dst: Path, owned: set[str]) -> None:
    """Hard-link into ``dst`` every file of ``src`` that is not the earlier run's (``owned``) nor one the new run
    wrote; the lock file replaces ``dst``'s own (the same inode keeps the writer's flock)."""
    ckpt = f"{CHECKPOINT_DIR}/" in owned
    for dirpath, dirnames, filenames in os.walk(src):
        here = Path(dirpath)
        rel_dir = here.relative_to(src)
        if ckpt and rel_dir == Path("."):
            dirnames[:] = [d for d in dirnames if d != CHECKPOINT_DIR]
        if rel_dir == Path("."):  # what a resume of the earlier run set aside is that run's (resume_snapshot.py)
            dirnames[:] = [d for d in dirnames if not resume_leftover(d)]
        links = [d for d in dirnames if (here / d).is_symlink()]  # carried as links, not walked
        for name in (*filenames, *links):
            rel = (rel_dir / name).as_posix()
            if rel in owned or ".tmp-" in name or resume_leftover(rel):  # the earlier run's, or a dead writer's temporary
                continue
            source, target = here / name, dst / rel
            if rel == LOCK_FILE:
                tmp = dst / f"{LOCK_FILE}.carried"
                tmp.unlink(missing_ok=True)
                os.link(source, tmp)
                os.replace(tmp, target)
                continue
            if target.exists() or target.is_symlink():
                continue  # the new run's own file
            target.parent.mkdir(parents=True, exist_ok=True)
            if source.is_symlink():
                os.symlink(os.readlink(source), target)
            else:
                try:
                    os.link(source, target)
                except OSError:  # a filesystem without hard links
                    shutil.copy2(source, target)
