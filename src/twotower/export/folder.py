"""Where an export may go, checked without torch: `twotower export --out X` is refused (or the run folder is) at
once, before the towers' modules are imported."""
from __future__ import annotations

from pathlib import Path

from twotower.errors import ConfigError
from twotower.pipeline.run_files import EXPORT_FILES, RUN_MARKERS, run_owning_folder
from twotower.utils.folder_lock import idle_lock_file
from twotower.utils.output_folders import refuse_foreign_files

__all__ = ["CLI_LABELS", "PY_LABELS", "check_export_dir"]

#: How a refusal names the destination and the override: the Python arguments (as train_run names ``out``)
PY_LABELS = ("out", "force=True")
#: ... and `twotower export`'s flags
CLI_LABELS = ("--out", "--force")


def _is_export_leftover(name: str) -> bool:
    """A file an export writes, or a temporary of an export killed mid-write (older exports staged in DIR)."""
    return name in EXPORT_FILES or (name.startswith(".") and name.endswith(".tmp"))


def check_export_dir(out: str | Path, *, run_dir: str | Path | None = None, force: bool = False,
                     labels: tuple[str, str] = PY_LABELS) -> tuple[str, ...]:
    """What exporting into ``out`` would remove (sorted names; empty for a new or empty folder), checked before any
    work; ConfigError when the export must not go there.

    ``out`` is replaced whole, so it is refused when it is a file, when it is or contains the run being exported
    (``run_dir``), holds any training run or is one of a run's own folders (``force`` overrides none of these: a run
    would be deleted or damaged) and, unless ``force``, when it is a non-empty folder holding anything but an
    earlier export's files (recognised by their names, and export.json when there is one): unrelated files are
    never removed unasked. ``labels``: as :func:`export_onnx`'s.
    """
    out = Path(out)
    flag, force_flag = labels
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{flag} {out}: exists and is a file, not a folder; choose another path")
    if run_dir is not None:
        real, run_real = out.resolve(), Path(run_dir).resolve()
        if real == run_real or real in run_real.parents:
            raise ConfigError(f"{flag} {out}: is or contains the run folder {run_dir}, which the export would replace; "
                              f"choose a folder of its own, e.g. {Path(run_dir) / 'onnx'}")
    owner = run_owning_folder(out)
    if owner is not None:  # force is for stray files, never a run's own (--force over RUN/vocab broke the run)
        raise ConfigError(f"{flag} {out}: is a folder of the run {owner}, whose files the export would replace; "
                          f"choose a folder of its own, e.g. {owner / 'onnx'}")
    if not out.is_dir():
        return ()
    markers = [m for m in RUN_MARKERS if (out / m).exists()]
    if markers:  # force is for stray files, never a whole run
        raise ConfigError(f"{flag} {out}: holds a training run ({', '.join(markers)}), which the export would replace; "
                          f"choose a folder of its own, e.g. {out / 'onnx'}")
    # a lock file twotower left there (`export --out DIR/x` keeps DIR/.x.twotower.lock) is not the user's file
    names = sorted(p.name for p in out.iterdir() if not idle_lock_file(p))
    if not names or force:
        return tuple(names)
    what = "an earlier export with files it did not write" if (out / "export.json").is_file() else \
        "a non-empty folder that is not an ONNX export"
    refuse_foreign_files(out, [n for n in names if not _is_export_leftover(n)], flag=flag, what=what,
                         replacer="the export", force_label=force_flag)
    return tuple(names)
