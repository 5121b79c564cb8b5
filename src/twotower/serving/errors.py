"""The one place mapping errors to HTTP answers.

=============================  =====  ==========================================
error                          code   body ``{"error": {...}}``
=============================  =====  ==========================================
NotFoundError                  404    message names the unknown id (+ kind, id)
UnknownIdAt (a NotFoundError)  404    ... and where it was sent: ``history[2]: ...`` (+ field)
DataError, ConfigError         422    message says what to fix
request validation (pydantic)  422    details: ``[{"loc", "msg"}]`` (no input echo)
body not sent as JSON          415    send ``Content-Type: application/json`` (+ ``Accept`` header)
body sent compressed           415    send it uncompressed (+ ``Accept-Encoding: identity``)
body unreadable as JSON        400    why: not UTF-8, nested too deep, a key given twice, ... (type unreadable_body)
PayloadTooLarge                413    the limit in bytes
HostNotAllowed                 400    the Host header names none of --allow-host
OverloadError                  429    retry later (+ ``Retry-After: 1``)
BudgetExceeded                 503    over the time budget: what to ask for instead
ClientGone                     499    the client left; nobody reads it (metrics do)
FeatureUnavailable             501    what is missing and how to add it
HTTPException (404 route ...)  its    its detail
anything else                  500    a generic message; details only in the log
=============================  =====  ==========================================

An IntegrityError while loading refuses to start the service (see
:mod:`twotower.serving.app`); during a request it is a 500 like any bug.
"""
from __future__ import annotations

import difflib
import email.message
import json
import logging
import re
import sys
from typing import Any

from fastapi import FastAPI, Request
from pydantic import BaseModel
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from twotower.config import MAX_K
from twotower.errors import ConfigError, DataError, NotFoundError, OverloadError, TwoTowerError
from twotower.pipeline.refusals import (
    COUNT_NOT_TEXT,
    EMPTY_ID,
    empty_history_refusal,
    empty_user_id_refusal,
    filter_values_refusal,
    filters_shape_refusal,
    id_list_refusal,
    k_refusal,
    too_long,
    top_refusal,
    too_many,
    user_features_shape_refusal,
)
from twotower.serving.budget import BudgetExceeded, ClientGone
from twotower.serving.examples import STATIC_IDS, body_examples
from twotower.serving.schemas import float_in_words, surrogate_refusal
from twotower.serving.settings import ServiceSettings
from twotower.utils.unique_keys import DuplicateKey

__all__ = [
    "PayloadTooLarge",
    "BodyTimeout",
    "UnknownIdAt",
    "FeatureUnavailable",
    "HostNotAllowed",
    "status_for",
    "error_body",
    "error_response",
    "install_error_handlers",
    "CatchAllMiddleware",
    "json_bytes",
]

log = logging.getLogger(__name__)


class PayloadTooLarge(TwoTowerError):
    """The request body is larger than ``ServiceSettings.max_body_bytes``."""


class BodyTimeout(TwoTowerError):
    """The request body did not arrive within ``ServiceSettings.body_timeout_s``."""


class HostNotAllowed(TwoTowerError):
    """The request's Host header is not among ``ServiceSettings.allowed_hosts``."""


class FeatureUnavailable(TwoTowerError):
    """An endpoint needs an optional part that is not installed (e.g. ``twotower.explain``)."""


class UnknownIdAt(NotFoundError):
    """An unknown id at a named place of the request: ``history[2]: unknown item '9' (...)``.

    A NotFoundError (same 404, ``kind`` and ``id``) whose message starts with ``field``, so a client
    sending many ids learns which one is wrong. Wrapping one again (a batch naming its request) keeps
    a single location: ``requests[1].history[2]: ...``.
    """

    def __init__(self, field: str, cause: NotFoundError, note: str = "") -> None:
        super().__init__(cause.kind, cause.id)
        self.field = field
        #: the cause's message without any location, so re-wrapping does not repeat it
        self.reason: str = cause.reason if isinstance(cause, UnknownIdAt) else cause.message
        self.message = f"{field}: {self.reason}" + (f"; {note}" if note else "")
        self.args = (self.message,)  # so logs and repr() show the located message too


#: Domain error -> (HTTP status, machine-readable type). First match in order wins.
ERROR_MAP: tuple[tuple[type[BaseException], int, str], ...] = (
    (NotFoundError, 404, "not_found"),
    (PayloadTooLarge, 413, "payload_too_large"),
    (BodyTimeout, 408, "request_timeout"),
    (HostNotAllowed, 400, "host_not_allowed"),
    (OverloadError, 429, "overloaded"),
    (BudgetExceeded, 503, "over_time_budget"),
    (ClientGone, 499, "client_closed_request"),
    (FeatureUnavailable, 501, "not_implemented"),
    (DataError, 422, "invalid_request"),
    (ConfigError, 422, "invalid_request"),
)
GENERIC_500 = "internal server error; the service log has the details"


def status_for(exc: BaseException) -> tuple[int, str]:
    for cls, status, kind in ERROR_MAP:
        if isinstance(exc, cls):
            return status, kind
    return 500, "internal_error"


def error_body(status: int, error_type: str, message: str, **extra: Any) -> dict[str, Any]:
    """``{"error": {"code", "type", "message", ...extra}}``: the body of every error answer."""
    return {"error": {"code": status, "type": error_type, "message": message, **extra}}


def json_bytes(body: Any) -> bytes:
    """UTF-8 JSON; text that cannot be UTF-8 (a lone surrogate sent as ``"\\ud800"``) is \\u-escaped instead."""
    try:
        return json.dumps(body, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(body, ensure_ascii=True).encode("ascii")


def _json(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> Response:
    return Response(json_bytes(body), status_code=status, media_type="application/json", headers=headers)


def error_response(exc: BaseException) -> Response:
    """The HTTP answer for any exception (never echoes internals of an unexpected one)."""
    status, kind = status_for(exc)
    if status == 500:
        return _json(500, error_body(500, kind, GENERIC_500))
    extra: dict[str, Any] = {}
    if isinstance(exc, NotFoundError):
        extra = {"kind": exc.kind, "id": str(exc.id)}
        if isinstance(exc, UnknownIdAt):
            extra["field"] = exc.field
    headers = {"Retry-After": "1"} if status == 429 else None
    return _json(status, error_body(status, kind, str(exc), **extra), headers)


#: The smallest body each JSON route takes, quoted when a body is empty or not an object: the first of the route's
#: /docs examples (twotower.serving.examples), with MovieLens ids, as a message has no run at hand
_BODY_EXAMPLES = {path: json.dumps(next(iter(named.values()))["value"])
                  for path, named in body_examples(STATIC_IDS).items()}


def _body_example(path: str) -> str:
    example = _BODY_EXAMPLES.get(path.rstrip("/"))
    return f", such as {example}" if example else " (each route's fields are listed at /docs)"


#: request field -> the server setting its upper bound comes from, named when a value is over it: "less than or
#: equal to 1000" alone did not say that the bound is this server's (another may allow more) nor how to raise it
_BOUND_BY = {"k": "max_k", "rerank_top": "max_k", "explain_k": "explain_k"}


def _body_model(request: Request) -> type[BaseModel] | None:
    """The request model of the route that refused the body (None: a route without one)."""
    body_field = getattr(request.scope.get("route"), "body_field", None)
    model = getattr(getattr(body_field, "field_info", None), "annotation", None)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _model_at(model: type[BaseModel] | None, loc: list[str]) -> type[BaseModel] | None:
    """The model holding the field at ``loc`` (``["body", "requests", "1", "kk"]``: a batch's request model)."""
    for part in loc[1:-1]:
        if model is None:
            return None
        if part.isdigit():  # a list position: the list's model was found with the list's name
            continue
        field = model.model_fields.get(part)
        inner = [a for a in getattr(field.annotation, "__args__", ()) if isinstance(a, type)] if field else []
        model = next((a for a in inner if issubclass(a, BaseModel)), None)
    return model


def _unknown_field(model: type[BaseModel] | None, loc: list[str]) -> str:
    """The words for a field the request model does not have: its fields, and the nearest to the one sent."""
    holder = _model_at(model, loc)
    if holder is None:
        return "not a field of this request (the fields are listed at /docs)"
    fields = list(holder.model_fields)
    near = difflib.get_close_matches(loc[-1], fields, n=1, cutoff=0.6)
    hint = f"; did you mean {near[0]!r}?" if near else ""
    return f"not a field of this request{hint} (the fields: {', '.join(fields)})"


#: a batch's list of requests as the /docs example has it, quoted when ``requests`` is no list or an empty one
_BATCH_REQUESTS = json.dumps(body_examples(STATIC_IDS)["/recommend/batch"]["two"]["value"]["requests"])


def _requests_words(kind: str, got: Any) -> str | None:
    """Why a batch's ``requests`` itself was refused (None: another error, said elsewhere): pydantic said "Input
    should be a valid list" for an object and "List should have at least 1 item after validation, not 0" for []."""
    if kind == "list_type":
        return f"must be a list of requests, e.g. {_BATCH_REQUESTS}, got {_sent(got)}"
    if kind == "too_short":
        return f"must hold at least 1 request, got an empty list; send one per user, e.g. {_BATCH_REQUESTS}"
    return None


#: the words for an empty value at a field (pydantic: "String should have at least 1 character", even for "  ": an
#: id loses its surrounding spaces first, schemas.coerce_id), with what to send instead
_EMPTY_AT = {
    "user_id": empty_user_id_refusal(),  # the words of `recommend --user ''`, tt.recommend and RecRequest
    "item_id": f"{EMPTY_ID}; send the id of an item of the run's catalogue",
    "query": "is empty; send the words to search for",
}


def _empty_words(loc: list[str]) -> str:
    """``is empty ...``: a value of no characters at ``loc`` (``body.history[2]``, ``body.user_id``)."""
    if len(loc) >= 2 and loc[-1].isdigit() and loc[-2] in ("history", "exclude_items"):
        return f"{EMPTY_ID}, which is no item id; leave it out of the list"
    return _EMPTY_AT.get(loc[-1] if loc else "", "is empty; send at least 1 character")


def _is_request_object(loc: list[str]) -> bool:
    """``loc`` is a request body's own place: the body, or a batch's request (``body.requests.2``)."""
    return loc == ["body"] or (len(loc) == 3 and loc[:2] == ["body", "requests"] and loc[2].isdigit())


def _validation_details(exc: RequestValidationError, path: str = "", max_k: int = MAX_K,
                        explain_k: int = ServiceSettings.explain_k,
                        body_model: type[BaseModel] | None = None) -> list[dict[str, Any]]:
    """The 422's details; ``max_k``: the server's, the upper bound of every ``k`` its schemas read; ``explain_k``:
    the server's, the upper bound of /recommend's ``explain_k``; ``body_model``: the route's request model, whose
    fields an unknown field's answer lists."""
    out = []
    for err in exc.errors():
        loc = [str(p) for p in err.get("loc", ())]
        if err.get("type") == "json_invalid":
            return [{"loc": ["body"], "msg": "malformed JSON: " + str(err.get("ctx", {}).get("error", "cannot parse"))}]
        msg = str(err.get("msg", "invalid value"))
        if loc == ["body"] and err.get("type") == "missing":  # pydantic's "Field required" for no body at all
            msg = f"nothing was sent; send a JSON object{_body_example(path)}"
        elif loc == ["body"] and err.get("type") in ("model_attributes_type", "dict_type"):
            msg = f"must be a JSON object {{...}}, got {_sent(err.get('input'))}; send one{_body_example(path)}"
        elif (len(loc) == 3 and loc[:2] == ["body", "requests"] and loc[2].isdigit()
              and err.get("type") in ("model_type", "model_attributes_type", "dict_type")):
            # "requests": [null]: pydantic's "Input should be a valid dictionary or object to extract fields from";
            # each request is a POST /recommend body, so the words (and example) of one sent as no object
            msg = f"must be a JSON object {{...}}, got {_sent(err.get('input'))}; send one{_body_example('/recommend')}"
        elif loc == ["body", "requests"] and (words := _requests_words(err.get("type"), err.get("input"))):
            msg = words
        elif err.get("type") == "string_too_short" and err.get("ctx", {}).get("min_length") == 1:
            msg = _empty_words(loc)
        elif err.get("type") == "value_error" and msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]  # pydantic's prefix for our own validators' messages
        elif err.get("type") in ("int_type", "int_parsing"):
            # one coercion rule: ids accept strings or integers; counts (k, explain_k) must be JSON integers
            got = err.get("input")
            # 5.5, true, null, a list: say what was sent rather than blame a string
            # (an object or an array in JSON's words: "a JSON dict" / "a JSON list" were Python's)
            sent = ("a string" if isinstance(got, str) else "a boolean" if isinstance(got, bool)
                    else float_in_words(got) if isinstance(got, float) else _sent(got))
            if loc and loc[-1] == "k":  # the words of tt.recommend and RecommenderService (pipeline/refusals.py)
                msg = k_refusal(got, max_k, sent=sent) or msg
            elif loc and loc[-1] == "explain_k":  # RecommenderService's (check_explain_k), its bound this server's
                msg = k_refusal(got, explain_k, sent=sent) or msg
            elif isinstance(got, str):
                msg = f"must be a JSON integer such as 5, got a string ({COUNT_NOT_TEXT})"
            else:
                msg = f"must be a JSON integer such as 5, got {sent}"
        elif err.get("type") in ("less_than_equal", "greater_than_equal") and loc and loc[-1] in _BOUND_BY:
            # the words of `recommend --k` and tt.recommend (pipeline/refusals.py), the bound named as this server's
            upper = err.get("ctx", {}).get("le", MAX_K)
            msg = k_refusal(err.get("input"), upper, server_setting=_BOUND_BY[loc[-1]]) or msg
        elif err.get("type") == "greater_than_equal" and loc and loc[-1] == "top":
            # /explain's top: pydantic's "Input should be greater than or equal to 0" named no value; the words of
            # `explain --top` and tt.explain_by_id
            msg = top_refusal(err.get("input")) or msg
        elif err.get("type") == "too_short" and loc and loc[-1] == "history":
            # the words of `recommend --history` and tt.recommend; on a run with user features, that they alone serve
            # a user with no history yet (routes.refuse_empty_histories)
            msg = empty_history_refusal(err.get("ctx", {}).get("feature_columns", ()))
        elif err.get("type") == "too_long" and (words := _too_long_words(loc)) is not None:
            # the words of the service's Python API (RecommenderService refuses the same request alike)
            ctx, got = err.get("ctx", {}), err.get("input")
            n = len(got) if isinstance(got, (list, dict)) else ctx.get("actual_length") or "more"
            msg = too_many(ctx.get("max_length"), words[0], n, words[1])
        elif err.get("type") == "string_too_long":
            # the words of the service's Python API; pydantic's "String should have at most 256 characters" named
            # neither the length sent nor, for a mapping's key, anything but the key itself, echoed whole
            got, upper = err.get("input"), err.get("ctx", {}).get("max_length")
            n = len(got) if isinstance(got, str) else "more"
            if len(loc) >= 2 and loc[-1] == "[key]":  # a filter field's (a user feature's) name: the mapping's place
                loc = loc[:-2]
                msg = too_long(upper, n, "a column name" if loc[-1:] == ["user_features"] else "a field name")
            else:
                msg = too_long(upper, n)
        elif err.get("type") == "string_unicode" and (loc[-1:] == ["[key]"] or _is_request_object(loc)):
            # a key holding a lone surrogate: pydantic's "unable to parse raw data as a unicode string", at a place
            # naming the key itself, which no UTF-8 answer can hold ("body.filters.\ufffd\ufffd\ufffd.[key]"), or
            # at the request object whose field name it is
            loc = loc[:-2] if loc[-1:] == ["[key]"] else loc
            got = err.get("input")
            msg = surrogate_refusal(got if isinstance(got, str) else "",
                                    "a column name" if loc[-1:] == ["user_features"] else "a field name")
        elif err.get("type") == "list_type" and len(loc) >= 2 and loc[-2] == "filters":
            # a field's values that are no list ({"genres": "Comedy"}): the words of tt.recommend and the service
            msg = filter_values_refusal(loc[-1], _sent(err.get("input")), err.get("input"))
        elif err.get("type") == "dict_type" and loc and loc[-1] == "filters":
            # "filters": "genres=Comedy": pydantic's "Input should be a valid dictionary" named no shape to send
            msg = filters_shape_refusal(_sent(err.get("input")))
        elif err.get("type") == "list_type" and loc and loc[-1] in ("history", "exclude_items"):
            # "history": "i1": pydantic's "Input should be a valid list" named no shape to send (after filters': a
            # metadata field may be named "history")
            msg = id_list_refusal(_sent(err.get("input")), err.get("input"), oldest_first=loc[-1] == "history")
        elif err.get("type") == "dict_type" and loc and loc[-1] == "user_features":
            # "user_features": "age=3": the words of tt.recommend and the service, as "filters" has them
            msg = user_features_shape_refusal(_sent(err.get("input")))
        elif err.get("type") == "extra_forbidden" and loc[:1] == ["body"]:
            # pydantic's "Extra inputs are not permitted" named neither the fields there are nor the one meant
            msg = _unknown_field(body_model, loc)
        elif err.get("type") == "bool_type":  # flags are strict: "no", 0 or null is not a boolean
            msg = f"must be a JSON boolean, true or false, got {_sent(err.get('input'))}"
        elif (words := _shape_words(err, loc, path)) is not None:
            msg = words
        out.append({"loc": loc, "msg": msg})
    return out


#: what a field of each JSON type must be, by pydantic's error type, for a value of another type that no rule above
#: words (a field added later, a router plugged in: POST /search's "query": {"text": ...} read "Input should be a
#: valid string", which said neither what was sent nor, for an object, that the field itself takes the text)
_EXPECTED = {
    "string_type": "a JSON string",
    "list_type": "a JSON array [...]",
    "dict_type": "a JSON object {...}",
    "model_type": "a JSON object {...}",
    "model_attributes_type": "a JSON object {...}",
    "float_type": "a JSON number",
}


def _shape_words(err: Any, loc: list[str], path: str) -> str | None:
    """A value of the wrong JSON type, or a field left out, in the service's words (None: another error): what the
    field takes and what was sent, as every other refusal says it (``must be a JSON string, got an object``)."""
    kind, got = err.get("type"), err.get("input")
    if kind in _EXPECTED:
        return f"must be {_EXPECTED[kind]}, got {_sent(got)}"
    if kind == "literal_error":  # "mode": ["bm25"] or "hybird": pydantic named the values, not what was sent
        expected = str(err.get("ctx", {}).get("expected", "one of the values listed at /docs"))
        if not isinstance(got, str):
            return f"must be {expected}, got {_sent(got)}"
        values = re.findall(r"'([^']*)'", expected)
        near = difflib.get_close_matches(got, values, n=1, cutoff=0.6)
        # the string itself, bounded: "got another string" did not show which value was refused
        return f"must be {expected}, got {_shown_key(got)}" + (f"; did you mean {near[0]!r}?" if near else "")
    if kind == "missing" and len(loc) >= 2:
        # {"item": {"id": "50"}} left item_id out (the unknown "item" is its own detail): "Field required" showed no
        # body that has it
        return f"is missing; send it{_body_example(path) if len(loc) == 2 else ''}"
    return None


def _too_long_words(loc: list[str]) -> tuple[str, str | None] | None:
    """``(what, server setting)`` of a list over its bound at ``loc`` (None: another list, pydantic's words)."""
    if loc == ["body", "requests"]:
        return "requests", "max_batch"
    if len(loc) >= 2 and loc[-2] == "filters":  # first: a metadata field may be named "history"
        return "values", None
    if loc and loc[-1] == "filters":
        return "fields", None
    if loc and loc[-1] == "user_features":  # pydantic's "Dictionary should have at most 64 items ..., not more"
        return "columns", None
    if loc and loc[-1] in ("history", "exclude_items"):  # the CLI and Python functions take any length
        return "item ids", {"history": "max_history", "exclude_items": "max_exclude"}[loc[-1]]
    return None


def _location(loc: Any) -> str:
    """``body.requests[1].k``: pydantic's location with list positions in brackets, as the 404s name a field
    (``requests[1].history[2]``); it read ``body.requests.1.k``. Only ints are positions: a dict key such as a
    filter field stays a name."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _sent(got: Any) -> str:
    """The JSON type a client sent, in words (the value itself is never echoed)."""
    if got is None:
        return "null"
    if isinstance(got, bool):  # "user_features": true is no number (the words of `--user-features true`)
        return "a boolean"
    if isinstance(got, (int, float)):
        return "a number"
    return {str: "a string", list: "an array", dict: "an object"}.get(type(got), "another type")


def _is_json_type(content_type: str | None) -> bool:
    """Does FastAPI read a body of this Content-Type as JSON? ``application/json`` and ``application/*+json``
    only: FastAPI's strict rule, kept on purpose. A body without a type is not read as JSON, because a browser
    page of another site may send one to this unauthenticated (often localhost) service without a CORS
    preflight; the same holds for ``text/plain`` and form types."""
    if not content_type:
        return False
    parsed = email.message.Message()
    parsed["content-type"] = content_type
    subtype = parsed.get_content_subtype()
    return parsed.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json"))


def _not_json_body(request: Request, exc: RequestValidationError) -> Response | None:
    """415 for a body refused because it was not sent as JSON (``curl -d`` sends a form type).

    FastAPI hands such a body to the model as raw bytes, and the model's "Input should be a valid
    dictionary" hides the real cause: the Content-Type header.
    """
    content_type = request.headers.get("content-type")
    if _is_json_type(content_type):
        return None
    if not any(tuple(e.get("loc", ()))[:1] == ("body",) for e in exc.errors()):
        return None  # the body was not what failed (a path id): the usual 422 says what did
    if content_type is None:
        got = "the request has no Content-Type header"
    else:
        shown = content_type if len(content_type) <= 100 else content_type[:100] + "..."  # a bounded echo
        got = f"not {shown!r}"
    message = (f"the request body must be JSON sent with `Content-Type: application/json`; {got} "
               "(with curl: -H 'Content-Type: application/json', or --json instead of -d)")
    return _json(415, error_body(415, "unsupported_media_type", message), {"Accept": "application/json"})


def _route_hint(request: Request) -> str:
    """A 404 for a route this server does not have: say which start-up flag would add it."""
    path = request.url.path
    state = request.app.state
    if path.rstrip("/") == "/search" and getattr(state, "search", None) is None:
        return ("POST /search needs a search index, and this server was started without one; restart it with "
                "`twotower serve --search-index DIR` (DIR from `twotower search index`)")
    run_route = (path.rstrip("/") in ("/recommend", "/recommend/batch", "/similar-items", "/explain", "/examples")
                 or path.startswith(("/items/", "/users/")))  # GET /items/{id}, /users/{id}: the run's catalogue
    if run_route and getattr(state, "service", None) is None:
        return f"{request.method} {path} needs a recommender run; restart the server with `twotower serve --run DIR`"
    return f"no route {request.method} {path}; the endpoints are listed at /docs"


def _unparsable_body(cause: BaseException) -> str | None:
    """Why Python's JSON reader refused a body that is JSON by its syntax (FastAPI answers those 400 with no
    reason): bytes that are not UTF-8, nesting too deep, an integer longer than Python converts, or a key given
    twice in one object (serving/json_body.py)."""
    if isinstance(cause, DuplicateKey):
        return (f"the request body gives the key {_shown_key(cause.key)} twice in one object; send each field once "
                "(the later value would silently replace the earlier)")
    if isinstance(cause, UnicodeDecodeError):
        return "the request body is not valid JSON text: it holds bytes that are not UTF-8 (send UTF-8 JSON)"
    if isinstance(cause, RecursionError):
        return "the request body nests JSON arrays or objects too deeply to be read (a request needs only a few levels)"
    if isinstance(cause, ValueError) and "digits" in str(cause):
        return (f"the request body holds an integer of more than {sys.get_int_max_str_digits()} digits, which cannot "
                "be read; ids are at most 256 characters and counts are small integers")
    return None


def _shown_key(key: object) -> str:
    """A repeated key, or a string a field of set values does not take, as the refusal shows it: quoted, at most 40
    characters (a bounded echo)."""
    text = str(key)
    return repr(text if len(text) <= 40 else text[:40] + "...")


def _encoded_body(request: Request) -> Response | None:
    """415 for a body sent compressed (``Content-Encoding: gzip``), which the server does not decode: its bytes
    were refused as "not UTF-8" or as malformed JSON, naming neither the header nor the fix (RFC 7694: 415)."""
    coding = request.headers.get("content-encoding", "").strip().lower()
    if coding in ("", "identity"):
        return None
    shown = coding if len(coding) <= 40 else coding[:40] + "..."  # a bounded echo
    message = (f"the request body is sent with Content-Encoding {shown!r}, which this server does not decode; "
               "send it uncompressed (bodies are small: at most the --max-body-bytes limit)")
    return _json(415, error_body(415, "unsupported_media_type", message), {"Accept-Encoding": "identity"})


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers for domain errors, validation errors and HTTP exceptions."""

    async def on_domain(request: Request, exc: Exception) -> Response:
        status, _ = status_for(exc)
        if status == 500:
            log.error("unhandled %s on %s %s", type(exc).__name__, request.method, request.url.path, exc_info=exc)
        return error_response(exc)

    async def on_validation(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        refused = _encoded_body(request) or _not_json_body(request, exc)
        if refused is not None:
            return refused
        settings = getattr(request.app.state, "settings", None)
        details = _validation_details(exc, request.url.path, getattr(settings, "max_k", MAX_K),
                                      getattr(settings, "explain_k", ServiceSettings.explain_k), _body_model(request))
        first = details[0] if details else {"loc": [], "msg": "invalid request"}
        errors = exc.errors()
        raw = tuple(errors[0].get("loc", ())) if errors else ()
        # the details keep pydantic's loc as strings (their JSON shape); the message names the field as a 404 does
        raw = raw[:len(first["loc"])]  # a key's error names the mapping (_validation_details)
        where = _location(raw) if first["loc"] == [str(p) for p in raw] else ".".join(first["loc"])
        message = f"{where or 'body'}: {first['msg']}"
        return _json(422, error_body(422, "invalid_request", message, details=details))

    async def on_http(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        kind = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        detail = str(exc.detail)
        if exc.status_code == 404 and detail == "Not Found":
            detail = _route_hint(request)
        elif exc.status_code == 405:  # Starlette's "Method Not Allowed" did not say which method the route takes
            allowed = (exc.headers or {}).get("Allow", "")
            detail = f"{request.method} {request.url.path} is not allowed; this route answers {allowed or 'other methods'}"
        elif exc.status_code == 400 and exc.__cause__ is not None:
            encoded = _encoded_body(request)
            if encoded is not None:
                return encoded
            # FastAPI's "There was an error parsing the body" does not say what was wrong with it
            why = _unparsable_body(exc.__cause__)
            if why is not None:  # a type a client can branch on, as every other error has ("http_error" before)
                detail, kind = why, "unreadable_body"
        return _json(exc.status_code, error_body(exc.status_code, kind, detail), exc.headers)

    app.add_exception_handler(TwoTowerError, on_domain)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)


class CatchAllMiddleware:
    """Turn any exception that escaped the handlers into a generic 500 (logged with its traceback).

    Pure ASGI, placed inside the metrics and limit middlewares so they see the 500.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as exc:  # noqa: BLE001 - the last line of defence; logged, never echoed
            log.error("unhandled %s on %s %s", type(exc).__name__, scope.get("method"), scope.get("path"), exc_info=exc)
            if started:
                raise
            await error_response(exc)(scope, receive, send)
