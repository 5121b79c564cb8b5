"""Folders a command replaces as a whole (an index, an export): checked before any work, one writer at a time.

Shared by the CLI and the Python calls behind its commands (``tt.build_index``), so both refuse and lock alike.
"""
from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path

from twotower.errors import ConfigError
from twotower.utils.atomic import check_output_dir
from twotower.utils.folder_lock import idle_lock_file

__all__ = ["check_artefact_dir", "foreign_files", "refuse_foreign_files", "run_writer"]


def check_artefact_dir(
    path: str | os.PathLike[str],
    *,
    kind: str,
    is_same_kind: Callable[[Path], bool],
    inputs: Mapping[str, str | os.PathLike[str] | None] | None = None,
    flag: str = "--out",
    own_files: Callable[[Path], Collection[str] | None] | None = None,
    force: bool = False,
) -> Path:
    """``path`` for a folder artefact that the command replaces as a whole (atomically) once its work is done.

    Checked before any work, because the replacement removes whatever is there: refused when it is a file, a
    non-empty folder that is not an earlier ``kind`` (``is_same_kind`` recognises one by its marker file), or
    when it overlaps an input folder (``inputs``: flag -> path; ``None`` entries are skipped). An earlier ``kind``
    holding files it did not write (``own_files``: the relative paths an earlier one wrote, None when it cannot
    tell) is refused too unless ``force``, as `twotower export` refuses: they were removed without a word.
    """
    p = check_output_dir(path, flag, swapped=True)
    real = p.resolve()
    for in_flag, src in (inputs or {}).items():
        if src is None:
            continue
        src_real = Path(src).resolve()
        if real == src_real or real in src_real.parents:  # replacing --out would remove the input
            raise ConfigError(f"{flag} {p}: is or contains {in_flag} {src}, which writing {flag} would remove; "
                              "choose a folder outside it")
        if src_real in real.parents:  # the output would be mixed into the input (and read back as one)
            raise ConfigError(f"{flag} {p}: is inside {in_flag} {src}; choose a folder outside it")
    if p.is_dir() and any(not idle_lock_file(c) for c in p.iterdir()) and not is_same_kind(p):  # left locks: empty
        raise ConfigError(f"{flag} {p}: a non-empty folder that is not a {kind}; writing there would replace "
                          f"everything in it; choose a new or empty folder (or an earlier {kind} to replace)")
    own = own_files(p) if own_files is not None and p.is_dir() and not force else None
    if own is not None:
        refuse_foreign_files(p, foreign_files(p, own), flag=flag, what=f"an earlier {kind} with files it did not write",
                             replacer=f"the new {kind}", force_label=_force_label(flag))
    return p


def _force_label(flag: str) -> str:
    """The override as the caller gives it: a command's --force, a Python call's force=True (``flag`` is a
    parameter's name there)."""
    return "--force" if flag.startswith("--") else "force=True"


def foreign_files(folder: Path, own: Collection[str]) -> list[str]:
    """The files under ``folder`` (relative paths, sorted) that are not among ``own``, the artefact's own files,
    and not lock files twotower left there."""
    return sorted(rel for f in folder.rglob("*") if (f.is_file() or f.is_symlink()) and not idle_lock_file(f)
                  and (rel := f.relative_to(folder).as_posix()) not in own)


def refuse_foreign_files(folder: Path, names: Sequence[str], *, flag: str, what: str, replacer: str,
                         force_label: str) -> None:
    """ConfigError naming the user's files ``names`` in ``folder`` (``what`` says what the folder is), which
    ``replacer`` would remove with the rest of the folder; nothing when there are none. One refusal for every
    command that swaps a folder in whole, so each names the files and the override alike."""
    if not names:
        return
    shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
    raise ConfigError(f"{flag} {folder}: {what} ({shown}); {replacer} replaces the whole folder, so they would be "
                      f"lost: choose a new or empty folder, move them out, or pass {force_label} to replace it anyway")


def run_writer(run: str | os.PathLike[str], out: str | os.PathLike[str], what: str) -> contextlib.AbstractContextManager[None]:
    """The writer lock of the folder ``out`` (an index or export folder, swapped in whole) is written to.

    Inside a run folder (``--run``'s or another's), that run's lock, the one `twotower train` holds: `index build`
    (RUN/index by default) and `export --out RUN/onnx` write into the run, and two at once paired one's
    recall_qps.png or tune.json with the other's index, and one beside a `train --out RUN` built from a run being
    rewritten. Elsewhere, a lock of ``out`` itself, kept beside it (``PARENT/.NAME.twotower.lock``: a lock file
    inside would be swapped out with the folder): two builds into one outside folder interleaved as well. Either
    way a second writer is refused at once, naming the folder and the holder; ``run`` is only read when ``out``
    lies outside it (``TrainedRun.load`` keeps a load only when no file changed under it). Under torchrun rank 0
    alone writes and takes it.
    """
    from twotower.utils.folder_lock import exclusive_writer

    if os.environ.get("RANK", "0") not in ("", "0"):
        return contextlib.nullcontext()
    fix = f"wait for it to finish, then run `{what}` again"
    real_out = Path(out).resolve()
    owner = next((p for p in (real_out, *real_out.parents) if (p / "run.json").is_file()), None)
    if owner is None:
        return exclusive_writer(out, what, fix, beside=True)
    return exclusive_writer(run if owner == Path(run).resolve() else owner, what, fix)  # named as the user typed it
