"""End-to-end pipeline: sources -> prepared data -> training -> saved run -> evaluation.

The names below are imported on first use: most of these modules load torch, and `twotower data split` reads
its input through :mod:`twotower.pipeline.sources`, which does not (importing any submodule runs this file).
"""
from __future__ import annotations

import importlib
from typing import Any

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


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'twotower.pipeline' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
