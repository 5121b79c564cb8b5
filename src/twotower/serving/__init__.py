"""HTTP service: recommendations, similar items, item lookups and explanations over a trained run.

``create_app(run_dir, settings=ServiceSettings())`` builds the FastAPI app
(served by ``twotower serve``); :class:`RecommenderService` holds the logic
and can be used without HTTP.
"""
from twotower.serving.app import create_app
from twotower.serving.catalog import ItemCatalog
from twotower.serving.routes import get_service, run_compute
from twotower.serving.service import RecommenderService, RecRequest
from twotower.serving.settings import ServiceSettings

__all__ = [
    "create_app",
    "ServiceSettings",
    "RecommenderService",
    "RecRequest",
    "ItemCatalog",
    "get_service",
    "run_compute",
]
