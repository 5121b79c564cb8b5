"""Explanations of recommendations, grounded in the model, the item metadata and the user's history.

- :func:`explain_recommendation` / :func:`explain_by_id`: one (user, item) pair as a JSON-safe dict:
  history contributions read off the user tower (exact leave-one-out, or gradient x input), metadata
  the item shares with the history, each head's share for the dual-head item tower, and one sentence
  built from those facts by template.
- :func:`faithfulness`: removing the top-attributed history item must lower the score more than
  removing a random one.
"""
from twotower.explain.attribution import METHODS, Attribution, attribute_history, attribute_history_many
from twotower.explain.explainer import explain_by_id, explain_recommendation, explain_recommendations, user_window
from twotower.explain.faithfulness import faithfulness, removal_scores
from twotower.explain.metadata import MetadataColumns, shared_metadata

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
