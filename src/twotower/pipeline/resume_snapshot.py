"""A finished run kept whole while ``twotower train --resume`` continues it.

A resume rewrites the run in place: the checkpoint's weights go into ``model.safetensors`` (without the item-item
term fitted after training), ``config.json`` takes the new settings, the manifest goes until the run is sealed
again, the old evaluation is set aside. A resume stopped before it sealed (Ctrl-C, SIGTERM, a divergence, any
error) left that state behind: a run whose weights had changed, whose term and metrics were gone and whose index
no longer matched it, while the message said only that the checkpoint could be resumed.

So the files a resume rewrites are set aside first, as hard links (free, whatever the weights' size: every writer
replaces a file rather than writing into it), and put back when it stops before sealing; the checkpoint keeps the
epochs the resume did train, for the next ``--resume``. A resume killed outright (SIGKILL) leaves them set aside:
the next resume puts them back before it starts.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from twotower.pipeline.run_files import MANIFEST, MANIFEST_FILES, RUN_OUTPUT_FILES
from twotower.training.checkpoint import RESUME_BEST

__all__ = ["SealedRun", "hold_sealed_run", "put_back_leftover", "resume_leftover"]

log = logging.getLogger(__name__)

#: where the set-aside files wait, inside the run (hidden: no listing of the run's files shows it)
HELD_DIR = ".before-resume"
#: the files a resume may rewrite, relative to the run (the checkpoint is the resume's own, and kept)
_HELD_FILES = tuple(dict.fromkeys((MANIFEST, *MANIFEST_FILES, *RUN_OUTPUT_FILES)))


def resume_leftover(rel: str) -> bool:
    """Whether ``rel`` (a path relative to a run) is what a resume sets aside while it runs: the finished run's files
    (:data:`HELD_DIR`), its old evaluation (``.metrics.json.before-resume``, pipeline/resume_results.py) or its best
    weights (``.resume-best.safetensors``). They belong to the run they were set aside from: a new run written into
    the folder carried them over, and the next ``--resume`` put the replaced run back over it."""
    first = rel.split("/", 1)[0]
    return first == HELD_DIR or rel == RESUME_BEST or ("/" not in rel and first.startswith(".")
                                                        and first.endswith(".before-resume"))


@dataclass(frozen=True)
class SealedRun:
    """The files of a sealed run set aside by :func:`hold_sealed_run`."""

    out: Path
    files: tuple[str, ...]

    @property
    def folder(self) -> Path:
        return self.out / HELD_DIR

    def put_back(self) -> None:
        """The run as it was before the resume, unless the resume sealed it again (a new manifest: then the new run
        stands, and the set-aside files are dropped)."""
        manifest, held = self.out / MANIFEST, self.folder / MANIFEST
        if manifest.is_file() and held.is_file() and not os.path.samefile(manifest, held):
            self.release()
            return
        _put_back(self.out, self.files)
        log.warning("%s: the resume stopped before it finished, so the run is as it was before it (its weights, "
                    "settings, evaluation and manifest); the epochs it trained are in %s, for the next --resume",
                    self.out, self.out / "checkpoint")

    def release(self) -> None:
        """Drop the set-aside files: the resume sealed the run."""
        shutil.rmtree(self.folder, ignore_errors=True)


def put_back_leftover(out: Path) -> bool:
    """The files a resume killed outright (SIGKILL) set aside, put back: the run as it was before that resume. Called
    before a resume reads anything of the run; whether there were any."""
    leftover = out / HELD_DIR
    if not leftover.is_dir():
        return False
    _put_back(out, tuple(rel for rel in _HELD_FILES if (leftover / rel).is_file()))
    log.warning("%s: a resume killed earlier had set the run's files aside; they were put back (the run is as it "
                "was before that resume)", out)
    return True


def hold_sealed_run(out: Path) -> SealedRun | None:
    """Set aside the files of the sealed run in ``out`` that a resume rewrites (None for a run that is not sealed:
    an interrupted first training has nothing finished to keep)."""
    put_back_leftover(out)
    if not (out / MANIFEST).is_file():
        return None
    leftover = out / HELD_DIR
    held = []
    for rel in _HELD_FILES:
        src = out / rel
        if src.is_file() and not src.is_symlink():
            dst = leftover / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(src, dst)
            except OSError:  # a file system without hard links: a copy
                shutil.copy2(src, dst)
            held.append(rel)
    return SealedRun(out, tuple(held))


def _put_back(out: Path, files: tuple[str, ...]) -> None:
    """Move the set-aside ``files`` back over what the resume wrote, then remove the folder that held them.

    The resume's own ``model.safetensors`` holds the weights of its checkpoint's best epoch, which the next resume
    reads there (a best epoch before the checkpoint's last one is kept only in that file): it is set aside as
    :data:`~twotower.training.checkpoint.RESUME_BEST`, which that resume takes back first."""
    folder = out / HELD_DIR
    weights, held_weights = out / "model.safetensors", folder / "model.safetensors"
    if (weights.is_file() and held_weights.is_file() and not os.path.samefile(weights, held_weights)
            and not _best_is_last(out)):
        os.replace(weights, out / RESUME_BEST)
    for rel in files:
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        os.replace(folder / rel, out / rel)
    shutil.rmtree(folder, ignore_errors=True)


def _best_is_last(out: Path) -> bool:
    """Whether the checkpoint's last epoch is its best: the next resume then writes that epoch's weights into
    ``model.safetensors`` itself, and a stopped resume's copy of them need not be kept."""
    try:
        state = json.loads((out / "checkpoint" / "state.json").read_text(encoding="utf-8"))
        return state.get("best_epoch") == state.get("epoch")
    except (OSError, ValueError, AttributeError):
        return False
