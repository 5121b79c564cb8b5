"""The names of the files in a run folder, its index and an export: what reads and writes them agrees on these.

Apart from :mod:`twotower.pipeline.artifacts` (which loads torch) so that commands which only check an output
path against them (`twotower data split --out`, cli/paths.py) do not import torch.
"""
from __future__ import annotations

import os
from pathlib import Path

MANIFEST = "manifest.json"
#: environment switch read by :meth:`TrainedRun.load` (set by the CLI's ``--no-verify``)
NO_VERIFY_ENV = "TWOTOWER_NO_VERIFY"
#: Files of a run folder that loading reads (relative paths; absent optional ones are skipped).
MANIFEST_FILES = ("config.json", "run.json", "model.safetensors", "vocab/users.json", "vocab/items.json",
                  "features/users.json", "features/items.json", "items.jsonl", "history.npz")
#: The run's copies of its split: checked with the manifest, though loading the model does not read them (evaluate
#: and resume do). Not in MANIFEST_FILES: manifests written before list none, and are not refused for that.
DATA_COPIES = ("data/train.csv", "data/valid.csv", "data/test.csv")
#: What else a run writes into its folder: training (data, log, curves), `twotower train`'s test evaluation,
#: the demo's plot and the baselines `twotower evaluate` tuned on the run's data.
# (not TUNED_FILE: a cache whose every entry is keyed by digests of the train and valid data it was tuned on,
# so a retrained run on the same data reuses it and one on other data re-tunes; `make demo` re-runs stay fast)
RUN_OUTPUT_FILES = ("data/train.csv", "data/valid.csv", "data/test.csv", "log.jsonl", "curves.png", "metrics.json",
                    "eval.txt", "recall_at_k.png")
#: Files only a run writes: one of them says a folder holds a run (a config.json alone may be the user's own).
RUN_MARKERS = ("run.json", "model.safetensors", "history.npz", "vocab/users.json", "checkpoint/state.json")
#: Folder the trainer's checkpoint is swapped into whole (training/checkpoint.py), so all of it is the run's.
CHECKPOINT_DIR = "checkpoint"
#: Where `twotower index build` saves a run's index by default (pipeline/index_build.py), and the files it adds
#: there besides those meta.json lists (tune.json, recall_qps.png).
INDEX_DIR = "index"
INDEX_EXTRA_FILES = ("meta.json", "tune.json", "recall_qps.png")
#: What `twotower export` writes into its --out folder (export/onnx.py); export.json names the run and model.
EXPORT_FILES = ("export.json", "user_tower.onnx", "item_tower.onnx", "item_embeddings.npy", "item_ids.json",
                "user_ids.json", "cold_similar_queries.npy", "new_user_tower.onnx")

#: The folders a run keeps inside its own: whatever is written into one as a folder of its own damages that run.
RUN_OWN_FOLDERS = ("checkpoint", "vocab", "data", "features", INDEX_DIR)


def run_owning_folder(folder: str | os.PathLike[str]) -> Path | None:
    """The run ``folder`` is one of the own folders of (``RUN`` for ``RUN/checkpoint``), else None: a checkpoint
    folder holds model.safetensors, so it read as a run of its own to the commands that replace a folder."""
    base = Path(folder)
    if base.name in ("", ".", ".."):
        base = Path(os.path.realpath(base))
    if base.name in RUN_OWN_FOLDERS and any((base.parent / rel).is_file() for rel in RUN_MARKERS):
        return base.parent
    return None
