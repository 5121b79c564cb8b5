"""Argument checks shared by the search entry points a Python caller reaches directly (the CLI checks its flags).

Each error names the Python argument, as :mod:`twotower.index` does for its own ``k``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from twotower.config import MAX_K
from twotower.errors import ConfigError

__all__ = ["check_depth", "check_query_texts"]


def check_query_texts(queries: Any, name: str = "queries") -> list[str]:
    """``queries`` as a list of strings; one string is refused.

    A ``str`` is a sequence of characters: ``search("vitamin D", k=3)`` searched 9 one-letter queries and answered
    9 rows without a word.
    """
    if isinstance(queries, (str, bytes)):
        raise ConfigError(f"{name} must be a list of query texts, not one string; pass [{queries!r}]")
    out = list(queries)
    bad = next((q for q in out if not isinstance(q, str)), None)
    if bad is not None:
        raise ConfigError(f"{name} must hold strings, got {type(bad).__name__} {bad!r}")
    return out


def check_depth(value: Any, name: str, n_docs: int) -> int:
    """``value`` (``k``, ``rerank_top``) as an int from 1 to the larger of MAX_K and the corpus size.

    Results are padded to ``k``: a k far above the corpus only buys padding (BM25 allocated [Q, 10**7] for
    k=10**7), and a negative one sliced the list (``k=-1`` answered every hit but the last).
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) < 1:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")
    limit = max(MAX_K, n_docs)
    if int(value) > limit:
        raise ConfigError(f"{name} must be at most {limit} (the larger of twotower.config.MAX_K, {MAX_K}, and the "
                          f"{n_docs} documents: rows are padded to {name}), got {value!r}")
    return int(value)
