"""twotower: train, evaluate, index, serve and explain two-tower retrieval models."""
from twotower.errors import ConfigError, DataError, IntegrityError, NotFoundError, OverloadError, TwoTowerError
from twotower.results import Results

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "ConfigError",
    "DataError",
    "IntegrityError",
    "NotFoundError",
    "OverloadError",
    "TwoTowerError",
    "Results",
]
