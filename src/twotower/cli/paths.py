"""Output paths checked before any work: a bad ``--out`` is one line and exit 2, not a traceback an hour later."""
from __future__ import annotations

import errno
import os
from pathlib import Path

from twotower.errors import ConfigError
from twotower.utils.atomic import _parents_ok, atomic_write_text, check_output_dir, resolve_write_target
# here since the CLI's commands and the Python calls behind them (tt.build_index) check and lock alike
from twotower.utils.output_folders import check_artefact_dir, run_writer

__all__ = ["STDOUT", "artefact_owning", "run_writer", "check_artefact_dir", "check_output_dir", "check_output_file", "write_output_text"]

STDOUT = "-"  # `--out -`: the data goes to standard output, as with most Unix tools


def is_file(path: str | os.PathLike[str]) -> bool:
    """``Path(path).is_file()``, False for a string no file system takes as a name: ``--users`` holds a comma list
    of ids as often as a file, and a long one (ENAMETOOLONG) crashed the checks that ask with a traceback."""
    try:
        return Path(path).is_file()
    except (OSError, ValueError):  # too long, or a NUL byte
        return False


def check_output_file(path: str | os.PathLike[str], flag: str = "--out", example: str = "recs.csv") -> Path:
    """``path`` must be a file (new or to be replaced), a device/FIFO, or ``-``; not a folder. Returns it as a Path.
    ``example`` is the file name a refused folder is suggested with: `evaluate --plot DIR` was told `DIR/recs.csv`."""
    p = Path(path)
    if os.fspath(path) == STDOUT:
        return p
    if p.is_dir():
        raise ConfigError(f"{flag} {p}: is a folder; give a file path such as {p / example}")
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
    from twotower.pipeline.run_files import (CHECKPOINT_DIR, EXPORT_FILES, INDEX_DIR, MANIFEST, MANIFEST_FILES,
                                             RUN_MARKERS, RUN_OUTPUT_FILES)

    folder = path.parent
    if path.name in EXPORT_FILES and (folder / "export.json").is_file():
        return f"ONNX export {str(folder)!r}"
    if (folder / "meta.json").is_file():
        from twotower.index.storage import index_folder_files, is_index_dir

        # an index is built into a folder of any name (`index build --out idx`), its data files as much its own
        # as meta.json: `recommend --out idx/vectors.npy` replaced them, and every later load failed its checksum
        if (folder.name == INDEX_DIR or path.name in index_folder_files(folder)) and is_index_dir(folder):
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
        from twotower.cli.printing import stdout_data_write

        stdout_data_write(text)  # UTF-8, as the file would be, whatever the locale
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
