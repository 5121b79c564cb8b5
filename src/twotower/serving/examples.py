"""Real ids to try first, and the request bodies built from them.

``GET /examples`` lists the users with the longest history (the one the service reads) and one of
their recent histories, so a newcomer does not have to guess which ids the run
knows. :func:`body_examples` turns such ids into each JSON route's example
bodies: the ones ``/docs`` fills in for "Try it out" (:func:`install_body_examples`,
with the served run's ids) and the one an error message quotes (with
:data:`STATIC_IDS`, the same shapes).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from twotower.serving.settings import ServiceSettings

if TYPE_CHECKING:
    from fastapi import FastAPI

__all__ = ["example_ids", "ExampleIds", "STATIC_IDS", "body_examples", "served_ids", "install_body_examples"]

#: words of a search example taken from the served corpus's first title
_QUERY_WORDS = 8


def example_ids(run: Any, n_users: int = 5, n_history: int = 3, *, histories: Any = None) -> dict[str, Any]:
    """``{"users": [{"user_id", "n_history"}], "history": [item ids, oldest first]}``.

    ``users``: the ``n_users`` users with the longest history (ties: the earlier row). ``history``: the last
    ``n_history`` items with training interactions of the first of them (else of the next), a realistic ad-hoc
    history for someone the model has never seen.
    Users without history are never listed; a run with none gives empty lists. ``histories``: the
    :class:`~twotower.models.history.UserSequences` the service reads (``serve --history-from``'s; default the
    training history), so a user is listed with the ``n_history`` GET /users/{id} gives them.
    """
    histories = run.history if histories is None else histories
    lengths = histories.lengths()  # [U]
    have = int(np.count_nonzero(lengths))
    rows = np.argsort(-lengths, kind="stable")[: min(n_users, have)]  # longest first, ties by row
    user_ids = run.user_vocab.ids
    users = [{"user_id": str(user_ids[r]), "n_history": int(lengths[r])} for r in rows]
    history: list[str] = []
    if rows.size:
        from twotower.pipeline.similar import untrained_items

        # items with training interactions only: an input file's others are left out of what the tower reads, and
        # an example of only such items was refused (422, "every item had no training interactions")
        trained = ~untrained_items(run)
        item_ids = run.item_vocab.ids
        for row in rows:
            items = [int(i) for i in histories.of(int(row)) if trained[int(i)]]
            if items:
                history = [str(item_ids[i]) for i in items[-n_history:]]
                break
    return {"users": users, "history": history}


@dataclass(frozen=True)
class ExampleIds:
    """The ids an example body names: a known user, an ad-hoc history, an item, a search query."""

    user_id: str
    history: tuple[str, ...]
    item_id: str
    query: str


#: MovieLens 100K ids (user 42; items 50, Star Wars, and 181): what error messages quote, which have no run at hand
STATIC_IDS = ExampleIds(user_id="42", history=("50", "181"), item_id="50", query="vitamin D and bone density")


def body_examples(ids: ExampleIds, settings: ServiceSettings | None = None, *,
                  rerank: bool = False) -> dict[str, dict[str, dict[str, Any]]]:
    """route -> example name -> ``{"summary", "value"}`` (OpenAPI's media-type ``examples``), the first the one
    to try first. Lengths are cut to ``settings``' limits, so every body validates on the app they are for.
    ``rerank``: the served search has a cross-encoder (``serve --rerank``), so /search also shows a reranked query."""
    s = settings or ServiceSettings()
    k = min(10, s.max_k)
    user, history = {"user_id": ids.user_id}, {"history": list(ids.history[: s.max_history])}

    def ex(summary: str, value: dict[str, Any]) -> dict[str, Any]:
        return {"summary": summary, "value": value}

    return {
        "/recommend": {
            "known_user": ex("a known user", {**user, "k": k}),
            "history": ex("a new user, from an ad-hoc history (item ids, oldest first)", {**history, "k": k}),
            "explained": ex("with explanations of the first items",
                            {**user, "k": k, "explain": True, "explain_k": min(3, s.explain_k, k)}),
        },
        "/recommend/batch": {"two": ex("a known user and an ad-hoc history, in one call",
                                       {"requests": [user, history][: s.max_batch]})},
        "/similar-items": {"item": ex("an item", {"item_id": ids.item_id, "k": k})},
        "/explain": {
            "known_user": ex("a known user", {**user, "item_id": ids.item_id}),
            "history": ex("a new user, from an ad-hoc history", {**history, "item_id": ids.item_id}),
        },
        "/search": {
            "query": ex("a query", {"query": ids.query, "k": k}),
            **({"reranked": ex("a query, its first candidates rescored by the cross-encoder",
                               {"query": ids.query, "k": k, "rerank": True})} if rerank else {}),
        },
    }


def served_ids(service: Any, search: Any) -> ExampleIds:
    """Ids of the loaded run and search corpus (None: not loaded, or not served), :data:`STATIC_IDS` where
    there are none: the user with the longest history, their last items, an item the user has not seen."""
    ids = STATIC_IDS
    if service is not None:
        found = example_ids(service.run, histories=service.read_histories)
        if found["users"] and found["history"]:  # none: every listed user's items untrained (the static ids stand)
            user_id = found["users"][0]["user_id"]
            ids = replace(ids, user_id=user_id, history=tuple(found["history"]),
                          item_id=_unseen_item(service, service.run.user_vocab.index(user_id), found["history"][-1]))
    if search is not None:
        corpus = search.index.corpus
        text = next((t for t in (*corpus.titles[:1], *corpus.texts[:1]) if t.strip()), "")
        if text:
            ids = replace(ids, query=" ".join(text.split()[:_QUERY_WORDS]))
    return ids


def _unseen_item(service: Any, user_row: int, fallback: str) -> str:
    """The first item (in catalogue order) the user's list does not leave out as seen: /explain then explains a
    recommendation, not a past choice (the last few history items alone were checked, and the example user was
    told "You already watched ..."); ``fallback`` where they have seen every item."""
    seen = service.seen_of(user_row)
    rows = np.setdiff1d(np.arange(min(len(seen) + 1, service.run.n_items)), seen)
    return str(service.run.item_vocab.ids[int(rows[0])]) if rows.size else fallback


def install_body_examples(app: FastAPI) -> None:
    """Give each JSON route of ``app``'s OpenAPI document its example bodies, with the served run's ids.

    Swagger UI fills "Try it out" with the first (the others in a drop-down); without them it made one up from
    the schema, every field set ("user_id" and "history", "explain": false with "explain_k": 1; item "string"),
    which POST /recommend refused with 422 and /similar-items with 404. The document is cached once the run is loaded (before, the static ids stand in)."""
    base: Callable[[], dict[str, Any]] = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = base()
        service, search = getattr(app.state, "service", None), getattr(app.state, "search", None)
        examples = body_examples(served_ids(service, search), app.state.settings,
                                 rerank=search is not None and search.reranker is not None)
        for path, named in examples.items():
            body = schema.get("paths", {}).get(path, {}).get("post", {}).get("requestBody")
            if body is not None:
                body["content"]["application/json"]["examples"] = named
        if search is not None:  # the served index's own BM25 settings and fusion
            from twotower.serving.search_service import describe_served_index

            describe_served_index(schema, search.index)
        paths = schema.get("paths", {})
        if ("/recommend" in paths and service is None) or ("/search" in paths and search is None):
            app.openapi_schema = None  # asked before the lifespan loaded them: built again, with their ids, after
        return schema

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way to extend the document
