"""HTTP service: recommendations, similar items, item lookups and explanations over a trained run.

``create_app(run_dir, settings=ServiceSettings())`` builds the FastAPI app
(served by ``twotower serve``); :class:`RecommenderService` holds the logic
and can be used without HTTP.
"""
from __future__ import annotations

import importlib
from typing import Any

# public name -> defining module, imported on first use: `twotower serve --help` and the CLI read
# ServiceSettings' defaults without importing FastAPI or torch
_LAZY = {
    "create_app": "twotower.serving.app",
    "ItemCatalog": "twotower.serving.catalog",
    "get_service": "twotower.serving.routes",
    "run_compute": "twotower.serving.routes",
    "RecommenderService": "twotower.serving.service",
    "RecRequest": "twotower.serving.service",
    "ServiceSettings": "twotower.serving.settings",
}

__all__ = [
    "create_app",
    "ServiceSettings",
    "RecommenderService",
    "RecRequest",
    "ItemCatalog",
    "get_service",
    "run_compute",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'twotower.serving' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
