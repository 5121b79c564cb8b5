"""Request and response models, built for the limits in :class:`ServiceSettings`.

The limits (``k <= max_k``, history length, batch size) are part of the
schema, so the OpenAPI document shows them and pydantic rejects violations
with 422 before any work is done. ``make_schemas(settings)`` returns fresh
classes per app. (No ``from __future__ import annotations`` here: the models
are defined inside a function and FastAPI resolves annotations at runtime.)
"""
import json
import math
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Optional

from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, StringConstraints, ValidationInfo,
                      WithJsonSchema, field_validator, model_validator)

from twotower.serving.settings import (MAX_FIELD_NAME_CHARS, MAX_FILTER_FIELDS, MAX_FILTER_VALUES, MAX_ID_CHARS,
                                       MAX_USER_FEATURES, ServiceSettings)

__all__ = ["make_schemas", "Schemas", "coerce_id", "surrogate_refusal", "HealthResponse", "MAX_ID_CHARS", "ERROR_RESPONSES", "ErrorResponse"]


def float_in_words(got: float) -> str:
    """A JSON float a client sent, in words: Python's JSON reader also takes NaN and Infinity (and reads 1e999
    as Infinity), which JSON itself does not allow, and "a number with a fraction" named neither."""
    if math.isnan(got):
        return "NaN, which JSON does not allow"
    if math.isinf(got):
        return "Infinity (or a number too large for a float), which JSON does not allow"
    if not got.is_integer():
        return "a number with a fraction"
    # 5.0 has no fraction: it is the decimal point (or an exponent: 1e3) that makes it a float in JSON. The value
    # sent is quoted, as Python reads it ("5.0: write 5" was said of "k": 1e3 too); a huge one only in words
    if abs(got) < 1e15:
        return f"a number written with a decimal point or an exponent ({got!r}: write {int(got)})"
    return "a number written with a decimal point or an exponent (write an integer without them)"


#: the JSON type of a value that is neither text nor a number, in words (the value itself is never echoed)
_OTHER_JSON_TYPES = {type(None): "null", list: "an array", dict: "an object"}


def surrogate_refusal(text: str, what: str = "an id") -> str:
    """Why ``text`` (``what``: ``"an id"``, ``"a field name"``) is refused: it holds a lone surrogate, named as JSON
    escapes it (the answer said "such as \\ud800" whatever was sent, \\udfff too)."""
    lone = next((c for c in text if "\ud800" <= c <= "\udfff"), None)
    which = f"the lone surrogate \\u{ord(lone):04x}" if lone is not None else "a lone surrogate"
    return f"{what} must be valid Unicode text (it holds {which})"


def coerce_id(value: Any, what: str = "an id") -> Any:
    """Ids may be sent as strings or integers; both become strings (booleans, floats, null, arrays and objects
    are refused, saying which was sent; ``what`` names the value: ``"a filter value"`` for a filter's).

    Surrounding whitespace is dropped, as the file readers drop it (so no stored id has any) and as the
    CLI's comma lists do: ``" 50"`` is item ``"50"`` here too."""
    if isinstance(value, bool):
        raise ValueError(f"{what} must be a string or an integer, not a boolean")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):  # pydantic said only "Input should be a valid string", naming no number
        # a metadata number an answer gave ("price": 68.17) sent back as a filter: say how it matches
        hint = (f": send it as text ({json.dumps(repr(value))}), as filters compare values as text"
                if what == "a filter value" and math.isfinite(value) and not value.is_integer() else "")
        raise ValueError(f"{what} must be a string or an integer, got {float_in_words(value)}{hint}")
    if type(value) in _OTHER_JSON_TYPES:  # ["50"], {...} or null: pydantic's words were "Input should be a valid string"
        raise ValueError(f"{what} must be a string or an integer, got {_OTHER_JSON_TYPES[type(value)]}")
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(surrogate_refusal(value, what)) from None
        return value.strip()
    return value


# The constraints come before the BeforeValidator on purpose: so they are the string schema's own and a
# 300-character id fails as "string_too_long" (errors.py words it "must be at most 256 characters, got 300"). Placed after it, pydantic checks
# them generically on the validator's output and says "Value should have at most 256 items".
Id = Annotated[
    str,
    StringConstraints(strict=True, min_length=1, max_length=MAX_ID_CHARS),
    BeforeValidator(coerce_id),
    # what the service takes (coerce_id): text, or a JSON integer read as its digits; the schema said "string" only,
    # so a client checking its requests against /openapi.json refused {"user_id": 42}
    WithJsonSchema({"anyOf": [{"type": "string", "minLength": 1, "maxLength": MAX_ID_CHARS}, {"type": "integer"}],
                    "description": "an id: text, or an integer (read as its digits: 42 is \"42\")"}),
]


class ErrorDetail(BaseModel):
    loc: list[str] = Field(description="where: body, then the field path (body.history.2)")
    msg: str


class ErrorInfo(BaseModel):
    model_config = ConfigDict(extra="allow")  # a 404's kind / id / field, named per error in serving/errors.py
    code: int = Field(description="the HTTP status")
    type: str = Field(description="what kind of error: invalid_request, not_found, payload_too_large, ...")
    message: str = Field(description="what to fix, in one line")
    details: Optional[list[ErrorDetail]] = Field(None, description="a 422 of request validation: each field's error")


class ErrorResponse(BaseModel):
    """The body of every error answer (serving/errors.py)."""

    error: ErrorInfo


#: The error answers of every route, declared in /openapi.json as they are sent: the schema declared FastAPI's
#: default 422 ({"detail": [...]}, which the service never sends) and none of the other codes
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse, "description": what} for code, what in (
        (400, "a body that cannot be read (not UTF-8, nested too deep, a key given twice), or a Host not allowed"),
        (404, "an unknown id (its kind and id, and in a batch the request it is in) or route"),
        (408, "the body did not arrive within serve --body-timeout"),
        (413, "the body is over serve --max-body-bytes"),
        (415, "the body is not sent as JSON, or is compressed"),
        (422, "the request fails validation: details name each field"),
        (429, "over the server's concurrency limit or expected wait; retry after the Retry-After header's seconds"),
        (503, "over the time budget (serve --time-budget), or the service has not started"),
    )
}
FilterValue = Annotated[str, StringConstraints(strict=True, max_length=MAX_ID_CHARS),
                        BeforeValidator(lambda value: coerce_id(value, "a filter value"))]


#: what an item answer's display_name is (every item record: /recommend, /similar-items, /items, /users, and the
#: item and history entries of /explain's explanation): the explorer page lists items by it
DISPLAY_NAME = ("the item as explanations name it: its title, or where another item of the catalogue has that title "
                "too, the title with the item's year when that alone tells them apart, else with its id "
                "('Kull the Conqueror (1997) [item 680]'); 'item <id>' for an item without a title")


class HealthResponse(BaseModel):
    """``GET /healthz``: the process answers (the same for the recommender and a search-only service)."""

    status: str
    pid: int = Field(description="the answering server process, one of N with `twotower serve --workers N`")


@dataclass(frozen=True)
class Schemas:
    RecommendRequest: type[BaseModel]
    BatchRequest: type[BaseModel]
    SimilarRequest: type[BaseModel]
    ExplainRequest: type[BaseModel]
    ItemHit: type[BaseModel]
    RecommendResponse: type[BaseModel]
    BatchResponse: type[BaseModel]
    SimilarResponse: type[BaseModel]
    ExplainResponse: type[BaseModel]
    ItemResponse: type[BaseModel]
    ReadyResponse: type[BaseModel]
    UserResponse: type[BaseModel]
    ExamplesResponse: type[BaseModel]


def _one_of_user_or_history(model: Any) -> Any:
    if (model.user_id is None) == (model.history is None):
        raise ValueError("give exactly one of user_id (a known user) or history (item ids, oldest first)")
    return model


#: why an ``explain_k`` sent without ``"explain": true`` is refused (the one message, HTTP and Python alike)
EXPLAIN_K_NEEDS_EXPLAIN = ('explain_k needs "explain": true (it says how many of the first items get an explanation, '
                           'and without explain none do); send both, or neither')


def _explain_k_needs_explain(value: Any, info: ValidationInfo) -> Any:
    # silently ignored before: a client sending explain_k expects explanations and got a list without any.
    # explain is declared before explain_k, so it is in info.data unless it was itself invalid (then its own
    # error is reported and this check is moot)
    if value is not None and info.data.get("explain") is False:
        raise ValueError(EXPLAIN_K_NEEDS_EXPLAIN)
    return value


def make_schemas(settings: ServiceSettings) -> Schemas:
    """Pydantic models whose bounds come from ``settings``."""
    K = Annotated[int, Field(ge=1, le=settings.max_k, strict=True, description=f"list length, 1..{settings.max_k}")]
    History = Annotated[
        list[Id],
        # at least one id, checked by the routes (refuse_empty_histories): on a run with user features, [] with
        # user_features serves a user with no history yet from those features alone
        Field(max_length=settings.max_history,
              description=f"item ids of a user unseen in training, oldest first (1..{settings.max_history}; [] "
                          f"with user_features on a run trained with user features: a user with no history yet)"),
    ]
    ExcludeItems = Annotated[
        list[Id],
        Field(max_length=settings.max_exclude,
              description=f"item ids never to list in this answer (already in the cart, already shown; "
                          f"0..{settings.max_exclude}), on top of the seen items exclude_seen leaves out "
                          f"(/similar-items: on top of the item itself)"),
    ]
    Filters = Annotated[
        dict[Annotated[str, StringConstraints(max_length=MAX_FIELD_NAME_CHARS)],
             Annotated[list[FilterValue], Field(max_length=MAX_FILTER_VALUES)]],
        Field(max_length=MAX_FILTER_FIELDS, description='metadata field -> values; an item matches a field holding any value, '
                                         'e.g. {"genres": ["Action"]}'),
    ]

    UserFeatures = Annotated[
        Optional[dict[Annotated[str, StringConstraints(max_length=MAX_FIELD_NAME_CHARS)], Any]],
        Field(max_length=MAX_USER_FEATURES,
              description='with a history: the new user\'s features, column -> value, e.g. {"age": 25, "gender": "F"}; '
                          'with "history": [], a user with no history yet is served from them alone'),
    ]

    class RecommendRequest(BaseModel):
        """A known ``user_id`` or an ad-hoc ``history``; seen items are excluded unless ``exclude_seen`` is false."""

        model_config = ConfigDict(extra="forbid")
        user_id: Optional[Id] = None
        history: Optional[History] = None
        user_features: UserFeatures = None
        k: K = min(settings.default_k, settings.max_k)
        # strict, as /search's rerank: lax pydantic read "exclude_seen": "no" (or "off", 0) as false and
        # "explain": "yes" as true, the one coercion of a flag nothing documented
        exclude_seen: StrictBool = True
        exclude_items: Optional[ExcludeItems] = None
        filters: Optional[Filters] = None
        explain: StrictBool = False
        explain_k: Optional[Annotated[int, Field(ge=1, le=settings.explain_k, strict=True)]] = Field(
            None, description=f"with explain: how many of the first items get an explanation "
                              f"(1..{settings.explain_k}; default {settings.explain_k}); only with "
                              f'"explain": true (422 without it)')

        _check = model_validator(mode="after")(_one_of_user_or_history)
        _check_explain_k = field_validator("explain_k")(_explain_k_needs_explain)

    class BatchRequest(BaseModel):
        model_config = ConfigDict(extra="forbid")
        requests: Annotated[list[RecommendRequest], Field(min_length=1, max_length=settings.max_batch)]

    class SimilarRequest(BaseModel):
        model_config = ConfigDict(extra="forbid")
        item_id: Id
        k: K = min(settings.default_k, settings.max_k)
        exclude_items: Optional[ExcludeItems] = None
        filters: Optional[Filters] = None

    class ExplainRequest(BaseModel):
        model_config = ConfigDict(extra="forbid")
        user_id: Optional[Id] = None
        history: Optional[History] = None
        user_features: UserFeatures = None
        item_id: Id
        # the CLI's --top and --method and tt.explain_by_id(top=, method=): the service refused them as unknown fields
        # no upper bound, as `explain --top` and tt.explain_by_id(top=): the answer lists at most the user tower's
        # window (model.user.history_len items) whatever top is; 500 (max_history) refused what those listed
        top: Annotated[int, Field(ge=0, strict=True)] = Field(
            5, description="history items listed, largest contribution first (0 or more; past the user tower's "
                           "window, at most model.user.history_len items, the whole window is listed; the sentence "
                           "reads every item whatever this is)")
        method: Literal["loo", "gradxinput"] = Field(
            "loo", description="loo: each item's contribution is the score lost when it is deleted from the history "
                               "(exact); gradxinput: the first-order gradient x input estimate")

        _check = model_validator(mode="after")(_one_of_user_or_history)

    class ItemHit(BaseModel):
        """One recommended item; item metadata fields (title, genres, year, ...) follow."""

        model_config = ConfigDict(extra="allow")
        item_id: str
        score: float
        rank: int
        explanation: Optional[dict[str, Any]] = None
        display_name: str = Field(description=DISPLAY_NAME)

    warnings_field = Field(
        None, description="present when user_features hold values training never saw (an unknown category, "
                          "read as unknown; a number far outside the training range): one line a value, "
                          "'user_features.<column>: ...'; and when a known user_id has no rows of known items in the serve --history-from "
                          "files (ranked from an empty input history); and when a history holds more items than the user tower reads "
                          "(its model.user.history_len newest); and when a history holds items without training "
                          "interactions (the user tower leaves them out of the history it reads: the list rests on "
                          "the other items); and when a listed or explained item had no training "
                          "interactions and the item tower reads only the item ID (the model cannot place it)")

    class Shortfall(BaseModel):
        missing: int = Field(description="how many fewer than k items the list holds")
        reason: str = Field(description="why: fewer than k items are left after the filters and exclusions")

    shortfall_field = Field(None, description=(
        "present when the list holds fewer than k items (the index returns k whenever k are eligible): how many are "
        "missing and why"))

    class RecommendResponse(BaseModel):
        items: list[ItemHit]
        user_id: Optional[str]
        k: int
        warnings: Optional[list[str]] = warnings_field
        shortfall: Optional[Shortfall] = shortfall_field

    class BatchResponse(BaseModel):
        results: list[RecommendResponse]

    class SimilarResponse(BaseModel):
        items: list[ItemHit]
        item_id: str
        k: int
        query_space: str = Field("item", description=(
            "what item_id was queried with: 'item' (its served vector) or 'semantic' (its semantic head: an item "
            "without training interactions of a dual-head item tower, unless `serve --cold-similar item`), or "
            "'none': an item without training interactions of an item tower that reads only the item ID, which "
            "the model cannot place; its items are empty and warnings say why"))
        warnings: Optional[list[str]] = Field(None, description=(
            "present when item_id had no training interactions and the item tower reads only the item ID: "
            "its vector comes from the zeroed ID embedding, not from any interaction, so no item is similar to it"))
        shortfall: Optional[Shortfall] = shortfall_field

    class ExplainResponse(BaseModel):
        user_id: Optional[str]
        item_id: str
        explanation: dict[str, Any]
        warnings: Optional[list[str]] = warnings_field

    class ItemResponse(BaseModel):
        model_config = ConfigDict(extra="allow")
        item_id: str
        in_index: bool
        display_name: str = Field(description=DISPLAY_NAME)
        warnings: Optional[list[str]] = Field(None, description=(
            "present when the item had no training interactions and the item tower reads only the item ID: the "
            "model cannot place it (/similar-items returns no items for it)"))

    class HistoryItem(BaseModel):
        model_config = ConfigDict(extra="allow")
        item_id: str
        timestamp: int
        display_name: str = Field(description=DISPLAY_NAME)

    class UserResponse(BaseModel):
        user_id: str
        n_history: int
        history: list[HistoryItem]
        history_source: str | list[str] = Field(
            "training", description='"training", or the names (no folders) of the `serve --history-from` files the user tower '
                        'reads')

    class ExampleUser(BaseModel):
        user_id: str
        n_history: int

    class ExamplesResponse(BaseModel):
        users: list[ExampleUser] = Field(description="the users with the most training history, longest first")
        history: list[str] = Field(description="an ad-hoc history to try: recent item ids of the first user, oldest first")

    class ReadyResponse(BaseModel):
        ready: bool
        model_fingerprint: str
        fingerprint_match: bool
        n_items: int
        n_users: int
        index: dict[str, Any]

    return Schemas(
        RecommendRequest=RecommendRequest, BatchRequest=BatchRequest, SimilarRequest=SimilarRequest,
        ExplainRequest=ExplainRequest, ItemHit=ItemHit, RecommendResponse=RecommendResponse,
        BatchResponse=BatchResponse, SimilarResponse=SimilarResponse, ExplainResponse=ExplainResponse,
        ItemResponse=ItemResponse, ReadyResponse=ReadyResponse, UserResponse=UserResponse,
        ExamplesResponse=ExamplesResponse,
    )
