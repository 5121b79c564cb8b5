"""End-to-end pipeline: sources -> prepared data -> training -> saved run -> evaluation.

The names below are imported on first use: most of these modules load torch, and `twotower data split` reads
its input through :mod:`twotower.pipeline.sources`, which does not (importing any submodule runs this file).
"""
from __future__ import annotations

from twotower.utils.lazy import lazy_exports

# public name -> module that defines it
_LAZY: dict[str, str] = {
    "PROTOCOL_TEXT": "twotower.pipeline.experiment",
    "Prepared": "twotower.pipeline.prepare",
    "Sources": "twotower.pipeline.sources",
    "TrainedRun": "twotower.pipeline.artifacts",
    "baseline_scorers": "twotower.pipeline.experiment",
    "evaluate_run": "twotower.pipeline.evaluate_run",
    "evaluate_scorers": "twotower.pipeline.experiment",
    "load_sources": "twotower.pipeline.sources",
    "model_fingerprint": "twotower.pipeline.artifacts",
    "prepare": "twotower.pipeline.prepare",
    "prepare_data": "twotower.pipeline.run",
    "resume_config": "twotower.pipeline.resume",
    "train_model": "twotower.pipeline.experiment",
    "train_run": "twotower.pipeline.run",
}

__all__ = list(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
