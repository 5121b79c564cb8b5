"""Explanations of recommendations, grounded in the model, the item metadata and the user's history.

- :func:`explain_recommendation` / :func:`explain_by_id`: one (user, item) pair as a JSON-safe dict:
  history contributions read off the user tower (exact leave-one-out, or gradient x input), metadata
  the item shares with the history, each head's share for the dual-head item tower, and one sentence
  built from those facts by template.
- :func:`faithfulness`: removing the top-attributed history item must lower the score more than
  removing a random one.
"""
from __future__ import annotations

from twotower.utils.lazy import lazy_exports

# public name -> module that defines it; imported on first use, as most load torch (the pipeline's sources read
# :mod:`twotower.explain.names` for `twotower data split`, which must not; importing a submodule runs this file)
_LAZY: dict[str, str] = {
    "METHODS": "twotower.explain.attribution",
    "Attribution": "twotower.explain.attribution",
    "attribute_history": "twotower.explain.attribution",
    "attribute_history_many": "twotower.explain.attribution",
    "explain_recommendation": "twotower.explain.explainer",
    "explain_recommendations": "twotower.explain.explainer",
    "explain_by_id": "twotower.explain.explainer",
    "user_window": "twotower.explain.explainer",
    "faithfulness": "twotower.explain.faithfulness",
    "removal_scores": "twotower.explain.faithfulness",
    "MetadataColumns": "twotower.explain.metadata",
    "shared_metadata": "twotower.explain.metadata",
}

__all__ = [
    "METHODS",
    "Attribution",
    "attribute_history",
    "attribute_history_many",
    "explain_recommendation",
    "explain_recommendations",
    "explain_by_id",
    "user_window",
    "faithfulness",
    "removal_scores",
    "MetadataColumns",
    "shared_metadata",
]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
