"""Small helpers with no model knowledge: atomic files, hashing, seeding, threads.

The names below are imported on first use (:mod:`twotower.utils.lazy`): ``runtime`` loads numpy and the config,
and ``import twotower`` (which the CLI's entry points do before setting their SIGTERM handler) imports this package
for ``lazy``.
"""
from twotower.utils.lazy import lazy_exports

_LAZY: dict[str, str] = {
    "atomic_write_bytes": "twotower.utils.atomic",
    "atomic_write_json": "twotower.utils.atomic",
    "atomic_write_text": "twotower.utils.atomic",
    "atomic_dir": "twotower.utils.atomic",
    "read_json": "twotower.utils.atomic",
    "sha256_file": "twotower.utils.atomic",
    "seed_everything": "twotower.utils.runtime",
    "set_threads": "twotower.utils.runtime",
}

__all__ = list(_LAZY)

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
