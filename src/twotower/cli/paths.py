"""Output paths checked before any work: a bad ``--out`` is one line and exit 2, not a traceback an hour later."""
from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from twotower.errors import ConfigError
from twotower.utils.atomic import _parents_ok, atomic_write_text, check_output_dir, resolve_write_target

__all__ = ["STDOUT", "artefact_owning", "run_writer", "check_artefact_dir", "check_output_dir", "check_output_file", "write_output_text"]

STDOUT = "-"  # `--out -`: the data goes to standard output, as with most Unix tools


def check_artefact_dir(
    path: str | os.PathLike[str],
    *,
    kind: str,
    is_same_kind: Callable[[Path], bool],
    inputs: Mapping[str, str | os.PathLike[str] | None] | None = None,
    flag: str = "--out",
) -> Path:
    """``path`` for a folder artefact that the command replaces as a whole (atomically) once its work is done.

    Checked before any work, because the replacement removes whatever is there: refused when it is a file, a
    non-empty folder that is not an earlier ``kind`` (``is_same_kind`` recognises one by its marker file), or
    when it overlaps an input folder (``inputs``: flag -> path; ``None`` entries are skipped).
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
    if p.is_dir() and any(p.iterdir()) and not is_same_kind(p):
        raise ConfigError(f"{flag} {p}: a non-empty folder that is not a {kind}; writing there would replace "
                          f"everything in it; choose a new or empty folder (or an earlier {kind} to replace)")
    return p


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


def is_file(path: str | os.PathLike[str]) -> bool:
    """``Path(path).is_file()``, False for a string no file system takes as a name: ``--users`` holds a comma list
    of ids as often as a file, and a long one (ENAMETOOLONG) crashed the checks that ask with a traceback."""
    try:
        return Path(path).is_file()
    except (OSError, ValueError):  # too long, or a NUL byte
        return False


def check_output_file(path: str | os.PathLike[str], flag: str = "--out") -> Path:
    """``path`` must be a file (new or to be replaced), a device/FIFO, or ``-``; not a folder. Returns it as a Path."""
    p = Path(path)
    if os.fspath(path) == STDOUT:
        return p
    if p.is_dir():
        raise ConfigError(f"{flag} {p}: is a folder; give a file path such as {p / 'recs.csv'}")
    try:
        real, atomic = resolve_write_target(p)
    except OSError as e:
        if e.errno != errno.ELOOP:
            raise
        raise ConfigError(f"{flag} {p}: a symbolic link loop; point the link at a file or remove it") from e
    if not atomic:  # written straight into (e.g. /dev/stdout): its folder needs no write permission
        if not os.access(p, os.W_OK):
            raise ConfigError(f"{flag} {p}: cannot write to it (permission denied)")
        return p
    _parents_ok(real, flag)  # the temporary file goes beside the real file (a symlink's target)
    owner = artefact_owning(Path(os.path.abspath(real))) or _split_owning(Path(os.path.abspath(real)))
    if owner is not None:  # `recommend --out runs/ml/model.safetensors` replaced the weights with a CSV
        raise ConfigError(f"{flag} {p}: is a file of the {owner}, which writing there would damage; choose another "
                          "file name")
    return p


#: What `twotower data split --out DIR` writes (cli/data_cmd.py), split_report.json marking the folder as a split.
SPLIT_FILES = ("train.csv", "valid.csv", "test.csv", "items.csv", "users.csv", "split_report.json")


def _split_owning(path: Path) -> str | None:
    """``"split '/d'"`` when ``path`` is a file `data split` wrote (`recommend --out data/loo/valid.csv` replaced the
    split it was reading its histories from), else None."""
    if path.name in SPLIT_FILES and (path.parent / "split_report.json").is_file():
        return f"split {str(path.parent)!r}"
    return None


def artefact_owning(path: Path) -> str | None:
    """What owns ``path`` when it is a file a run, its index or an export reads or writes (``"run '/r'"``, ...), else
    None: a new file of the user's own beside them (runs/ml/recs.csv) is theirs to write."""
    from twotower.pipeline.artifacts import (CHECKPOINT_DIR, EXPORT_FILES, INDEX_DIR, INDEX_EXTRA_FILES, MANIFEST,
                                             MANIFEST_FILES, RUN_MARKERS, RUN_OUTPUT_FILES)

    folder = path.parent
    if path.name in EXPORT_FILES and (folder / "export.json").is_file():
        return f"ONNX export {str(folder)!r}"
    if (folder / "meta.json").is_file() and (path.name in INDEX_EXTRA_FILES or folder.name == INDEX_DIR):
        from twotower.index.storage import is_index_dir

        if is_index_dir(folder):
            return f"index {str(folder)!r}"
    for run in list(path.parents)[:3]:  # a run's files lie at most two folders down (vocab/, checkpoint/)
        if any((run / m).is_file() for m in RUN_MARKERS):
            rel = path.relative_to(run).as_posix()
            if rel in (MANIFEST, *MANIFEST_FILES, *RUN_OUTPUT_FILES) or rel.startswith(f"{CHECKPOINT_DIR}/"):
                return f"run {str(run)!r}"
    return None


def write_output_text(path: str | os.PathLike[str], text: str) -> str:
    """Write ``text`` to ``path`` atomically, or to standard output for ``-``; returns where, for messages."""
    if os.fspath(path) == STDOUT:
        sys.stdout.write(text)
        return "standard output"
    atomic_write_text(path, text)
    return os.fspath(path)


def _check_out_is_no_input(out: str, inputs: dict[str, list], flag: str = "--out") -> None:
    """Refuse an --out that is one of the command's own input files: it was read, then replaced by the output
    (`--exclude valid.csv --out valid.csv` lost the user's validation split)."""
    if out == STDOUT or not is_file(out):
        return
    for in_flag, files in inputs.items():
        for f in files:
            if f and is_file(f) and Path(f).samefile(out):
                raise ConfigError(f"{flag} {out}: is the {in_flag} file {f}, which writing the output there would "
                                  "replace; choose another file name")
