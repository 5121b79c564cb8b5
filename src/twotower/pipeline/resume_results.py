"""What ``twotower train --resume`` does with the evaluation of the weights it started from.

Those files (``metrics.json``, ``eval.txt``, ``recall_at_k.png``) scored the run's saved weights. A resume that
trains them further makes them stale, and they must not sit beside the new model; but a resume that trains
nothing (``train.epochs`` at or below the checkpoint's epoch, early stopping or the time budget already reached)
or finds no better epoch leaves the weights as they were, byte for byte, and removing the files then threw away
a valid evaluation (with ``--no-eval`` nothing wrote it again). So they are set aside while the resume runs and
settled once its weights are saved: put back when ``model.safetensors`` is what they scored, removed otherwise.

Files put back that were also scored on the same split with the same eval settings are the evaluation `twotower
train` would compute again: it shows them instead (it said "kept", then evaluated and rewrote them anyway, minutes
on a large catalogue). Other eval settings given to the resume are evaluated anew, as asked.
"""
from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from twotower.config import RunConfig, config_to_dict
from twotower.errors import ConfigError
from twotower.pipeline.artifacts import EVAL_OUTPUT_FILES, derived_folders, read_saved_config
from twotower.pipeline.run_files import DATA_COPIES
from twotower.utils.atomic import sha256_file

__all__ = ["HeldResults", "hold_old_results", "weights_digest", "scored_on"]

log = logging.getLogger(__name__)

WEIGHTS = "model.safetensors"
_HELD = ".{}.before-resume"  # a hidden name beside the file while the resume runs


@dataclass(frozen=True)
class HeldResults:
    """The evaluation files set aside by :func:`hold_old_results`, and the digest of the weights they scored."""

    out: Path
    files: tuple[str, ...]
    weights_sha256: str | None
    scored_on: str | None = None  # :func:`scored_on` the run as it was, None where its config.json was unreadable

    def settle(self, config: RunConfig) -> tuple[str, ...]:
        """Put the files back when the weights are those they scored (and no new evaluation replaced them yet);
        remove them otherwise. Said in one log line either way. Returns the files put back that score the run as
        ``config`` (the resume's settings) would have it scored again: those an evaluation now need not redo."""
        if not self.files:
            return ()
        weights = self.out / WEIGHTS
        same = self.weights_sha256 is not None and weights.is_file() and sha256_file(weights) == self.weights_sha256
        kept, removed = [], []
        for rel in self.files:
            held = self.out / _HELD.format(rel)
            if same and not (self.out / rel).exists():
                os.replace(held, self.out / rel)
                kept.append(rel)
            else:
                held.unlink(missing_ok=True)
                removed.append(rel)
        current = bool(kept) and self.scored_on is not None and self.scored_on == scored_on(self.out, config)
        if kept:
            log.info("resume: kept %s: the weights are those they scored (this resume trained none further, or "
                     "found no better epoch)%s", ", ".join(kept),
                     "" if current else ", on another split or with other eval settings than this resume's")
        if removed:
            log.info("resume: removed %s (they scored the weights before this resume)", ", ".join(removed))
        return tuple(kept) if current else ()

    def discard(self) -> None:
        """Remove the set-aside files (a resume that failed: which weights they fit is not checked)."""
        for rel in self.files:
            (self.out / _HELD.format(rel)).unlink(missing_ok=True)


def weights_digest(out: Path) -> str | None:
    """sha256 of the run's saved weights, or None without them: taken before the checkpoint is restored, which
    may rewrite ``model.safetensors`` (the checkpoint's weights lack the item-item term fitted after training)."""
    weights = out / WEIGHTS
    return sha256_file(weights) if weights.is_file() else None


def scored_on(out: Path, config: RunConfig) -> str:
    """What an evaluation of the run in ``out`` reads besides its weights, in one string to compare: ``config``'s
    eval.* settings, its train.seed (the baselines tune on a sample of the validation users drawn from it) and the
    digests of the run's copies of its split (the baselines fit on them; the towers read the users' histories)."""
    settings = config_to_dict(config)
    parts = [json.dumps({"eval": settings["eval"], "seed": settings["train"]["seed"]}, sort_keys=True)]
    parts += [sha256_file(out / rel) if (out / rel).is_file() else "-" for rel in DATA_COPIES]
    return "\n".join(parts)


def _scored_on_before(out: Path) -> str | None:
    """:func:`scored_on` the run as its ``config.json`` has it, before the resume rewrites it; None if unreadable
    (its evaluation is then never taken for the resume's)."""
    try:
        return scored_on(out, read_saved_config(out / "config.json")[0])
    except (ConfigError, OSError, ValueError):
        return None


def hold_old_results(out: Path, folders: list[Path] | None, weights_sha256: str | None
                     ) -> tuple[HeldResults, list[Path]]:
    """Set the evaluation files of ``out`` aside before a resume trains (module docstring); return them with the
    index and export folders built from the old weights (kept: serve and recommend refuse them by fingerprint, and
    the caller says which are stale). ``folders``: those folders as :func:`derived_folders` found them earlier;
    ``weights_sha256``: :func:`weights_digest` of the weights the files scored, taken as early."""
    held = []
    for rel in EVAL_OUTPUT_FILES:
        (out / _HELD.format(rel)).unlink(missing_ok=True)  # set aside by a resume that was killed: settled never
        path = out / rel
        if path.is_file() and not path.is_symlink():
            os.replace(path, out / _HELD.format(rel))
            held.append(rel)
    before = _scored_on_before(out) if held else None  # before the resume writes its config.json and split copies
    return HeldResults(out, tuple(held), weights_sha256, before), derived_folders(out) if folders is None else folders
