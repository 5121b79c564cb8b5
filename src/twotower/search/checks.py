"""Argument checks shared by the search entry points a Python caller reaches directly (the CLI checks its flags).

Each error names the Python argument, as :mod:`twotower.index` does for its own ``k``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from twotower.errors import ConfigError, DataError
from twotower.index.base import check_depth as index_depth
from twotower.results import PAD_ID

__all__ = ["FIRST_STAGE_ORDER", "check_corpus_rows", "check_depth", "check_query_texts", "first_stage_orders",
           "rerank_top_needs_rerank", "wordless"]

#: what orders a reranked list's hits past its rerank depth, by mode: nothing is fused in a single retriever's list
#: (`search query`'s mark of them and POST /search's schema say it in these words)
FIRST_STAGE_ORDER = {"bm25": "BM25's order", "dense": "the dense order", "hybrid": "fused order"}


def check_query_texts(queries: Any, name: str = "queries") -> list[str]:
    """``queries`` as a list of strings; one string is refused.

    A ``str`` is a sequence of characters: ``search("vitamin D", k=3)`` searched 9 one-letter queries and answered
    9 rows without a word.
    """
    if isinstance(queries, (str, bytes)):
        raise ConfigError(f"{name} must be a list of query texts, not one string; pass [{queries!r}]")
    out = list(queries)
    # the position, not the value, marks the first bad one: a None element looked like "none found" and reached the
    # retrievers ("'NoneType' object has no attribute 'strip'")
    at = next((i for i, q in enumerate(out) if not isinstance(q, str)), None)
    if at is not None:
        bad = out[at]
        raise ConfigError(f"{name}[{at}] must be a string (a query text), got "
                          f"{'None' if bad is None else f'{type(bad).__name__} {bad!r}'}")
    return out


def wordless(text: str) -> str | None:
    """Why a query holds nothing to search for, or None: empty or only white space, or (``"\\u0000\\u0001"``) only
    control characters and white space, which the dense retriever embedded and ranked the corpus by all the same.
    The one rule of ``SearchIndex.search``, ``twotower search query`` and ``POST /search``."""
    if not text.strip():
        return "is empty or only white space"
    if not any(c.isprintable() and not c.isspace() for c in text):
        return "holds only control characters and white space"
    return None


def check_depth(value: Any, name: str, n_docs: int) -> int:
    """``value`` (``k``, ``rerank_top``) as an int from 1 to the larger of MAX_K and the corpus size: the index's
    rule (:func:`twotower.index.base.check_depth`), over documents."""
    return index_depth(value, name, n_docs, "documents")


def check_corpus_rows(rows: Any, n_docs: int, name: str) -> None:
    """``rows`` (a pair's hard negatives, the pairs' positives) are corpus rows in [0, ``n_docs``); else a DataError
    naming ``name`` and the first bad row.

    Python indexes from the end: a -1, the padding of a Results row (``PAD_ID``) that negatives are naturally taken
    from, read the corpus's last document, which was trained on as a negative without a word, even for the pair
    whose positive it is."""
    values = np.asarray(rows).ravel()
    bad = values[(values < 0) | (values >= n_docs)] if values.size else values
    if bad.size:
        pad = "; -1 is the padding of a Results row (PAD_ID): leave it out" if bad[0] == PAD_ID else ""
        raise DataError(f"{name} holds the row {bad[0].item()}: rows must lie in [0, {n_docs}), the corpus rows{pad}")


def rerank_top_needs_rerank(top: str, rerank: str, rerank_short: str, verb: str) -> str:
    """Why a rerank depth given without reranking is refused, in one wording for ``POST /search`` (``rerank_top``
    without ``"rerank": true``) and ``search query`` / ``search evaluate`` (``--rerank-top`` without ``--rerank``)."""
    return (f"{top} needs {rerank} (it says how many candidates the cross-encoder rescores, and without {rerank_short} "
            f"it rescores none); {verb} both, or neither")


def first_stage_orders() -> str:
    """:data:`FIRST_STAGE_ORDER` for every mode, as POST /search's schema lists per-mode meanings (its hits'
    ``score``): "mode bm25, BM25's order; dense, the dense order; hybrid, fused order"."""
    return "; ".join(f"{'mode ' if i == 0 else ''}{mode}, {order}" for i, (mode, order) in
                     enumerate(FIRST_STAGE_ORDER.items()))
