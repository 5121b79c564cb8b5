"""The one interface every vector index implements, and its shared exclusion logic.

Legend: ``Q`` queries, ``K`` results per query, ``N`` catalogue vectors,
``D`` embedding dimension, ``F`` candidates fetched per query.

Every backend answers :meth:`VectorIndex.search` with the caller's own int64
ids in a :class:`~twotower.results.Results`; rows with fewer than ``k`` hits are
padded with ``PAD_ID`` (-1) and ``-inf``. Vectors are two-tower embeddings (L2-normalised,
or with the item-item term a unit vector and its factors side by side) and the metric is inner product
(``metric == "ip"``).

Per-query exclusions (for example the items a user has already seen) and
allow-lists (metadata filters) are handled here once for all backends, and
every caller (``twotower recommend``, ``evaluate``, the HTTP service) goes
through it: fetch ``k + len(exclude[q])`` candidates (over-fetched by the
inverse share of allowed ids), drop the excluded / not-allowed ones, and if
fewer than ``k`` survive (an ANN index may also return fewer than asked)
double the fetch, and widen an IVF search, until ``k`` survive or the whole
catalogue has been fetched. Small allow-lists are scored exactly by backends
that hold the vectors.
"""
from __future__ import annotations

import functools
import inspect
import logging
from abc import ABC, abstractmethod
from pathlib import Path
from types import FunctionType
from typing import Any, Callable, Mapping, Optional, Sequence, Union

import numpy as np

from twotower.config import MAX_K
from twotower.errors import ConfigError, DataError
from twotower.results import PAD_ID, Results

__all__ = ["VectorIndex", "AllowList", "check_vectors", "check_ids", "check_queries", "shortfall"]

log = logging.getLogger(__name__)

#: An allow-list: one id array for every query, or one array (None = everything) per query.
AllowList = Union[np.ndarray, Sequence[Optional[np.ndarray]], None]

_EMPTY = np.empty(0, dtype=np.int64)
#: Without ``exact_subset_max``, allow-lists up to this size (or 1/8 of the catalogue) are scored exactly when
#: the backend holds vectors. The service passes its own limit (``ServiceSettings.filter_exact_max``).
_SUBSET_EXACT_MAX = 4096


def _is_flat_ids(values: Any) -> bool:
    """True for a list or tuple of plain values (``[5, 7]``; ``[1.5]`` or ``["a"]`` too, which the id check then
    refuses as no integer ids), as opposed to one id array (or None) per query."""
    return (isinstance(values, (list, tuple)) and len(values) > 0
            and all(isinstance(v, (int, float, str, np.number)) and not isinstance(v, (bool, np.bool_)) for v in values))


def _query_ids(values: Any, name: str) -> np.ndarray:
    """One query's ids (``exclude[q]``, ``allow[q]``) as a flat int64 array, or DataError naming ``name``.

    ``np.asarray(values, dtype=np.int64)`` raised numpy's "invalid literal for int()" for external string ids and
    cut a float id such as 1.5 to 1 without a word."""
    arr = _as_array(values).ravel()
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise DataError(f"{name} must hold integer ids (the rows the index was built with), got dtype {arr.dtype}; "
                        "map external ids to rows first (e.g. with the run's item vocabulary)")
    return arr.astype(np.int64, copy=False)


def _allow_per_query(allow: AllowList, n_q: int) -> list[np.ndarray | None] | None:
    """One sorted unique int64 id array (or None) per query, or None when nothing is filtered."""
    if allow is None:
        return None
    # a list of ids is one allow-list for every query, as the same ids in an array are: read per query, allow=[5, 7]
    # for two queries allowed only 5 to the first and only 7 to the second, without a word
    if _is_flat_ids(allow) or (isinstance(allow, np.ndarray) and allow.ndim == 1
                               and (allow.size == 0 or np.issubdtype(allow.dtype, np.integer))):
        shared = np.unique(_query_ids(allow, "allow"))
        return [shared] * n_q  # the same object: queries sharing it are searched together
    if len(allow) != n_q:
        raise DataError(f"allow needs one id array (or None) per query ({n_q}), or one array for all; got {len(allow)}")
    out = [None if a is None else np.unique(_query_ids(a, f"allow[{q}]")) for q, a in enumerate(allow)]
    return None if all(a is None for a in out) else out


def _fetch_bucket(n: int) -> int:
    """``n`` rounded up to a power of two: the fetch of a query with ``n - k`` exclusions.

    Queries share a backend call only at the same fetch, and each call of an exact (or flat) index scans the
    whole catalogue: fetching exactly ``k + len(exclude)`` made a batch of users with as many distinct history
    lengths as many scans (51 passes over 1M items for 99 users). Rounding up bounds the groups to a few per
    batch and the over-fetch to 2x; the extra candidates are filtered like the rest, so exact lists are unchanged.
    """
    return 1 << max(int(n) - 1, 0).bit_length()


def _groups(
    pending: np.ndarray, fetch: np.ndarray, depth: np.ndarray, allow: list[np.ndarray | None]
) -> list[np.ndarray]:
    """Pending queries that can share one backend call: same fetch, same depth, same allow-list object."""
    buckets: dict[tuple[int, int, int], list[int]] = {}
    for q in pending.tolist():
        a = allow[q]
        buckets.setdefault((int(fetch[q]), int(depth[q]), 0 if a is None else id(a)), []).append(q)
    return [np.asarray(g, dtype=np.int64) for g in buckets.values()]


def shortfall(res: Results, k: int) -> np.ndarray:
    """``[Q]`` how many of the ``k`` asked-for hits each row lacks (0 when ``k`` were found).

    After :meth:`VectorIndex.search` a positive count means fewer than ``k``
    ids were eligible (the catalogue, minus exclusions, outside the filters).
    """
    return (k - (res.ids[:, :k] != PAD_ID).sum(axis=1)).astype(np.int64)


def _as_array(values: Any) -> np.ndarray:
    """``np.asarray``, taking a torch tensor too (one that requires grad, or lives on a GPU)."""
    if hasattr(values, "detach") and hasattr(values, "cpu"):  # torch.Tensor, without importing torch
        values = values.detach().cpu().numpy()
    return np.asarray(values)


def describe(value: Any) -> str:
    """A value in a few words for an error message: its type, and its shape when it has one."""
    shape = getattr(value, "shape", None)
    return f"a {type(value).__name__}" + (f" of shape {tuple(shape)}" if shape is not None else "")


def check_vectors(vectors: np.ndarray, dim: int | None = None, *, name: str = "vectors") -> np.ndarray:
    """Return ``vectors[N, D]`` as C-contiguous float32, or raise DataError naming ``name``.

    A torch tensor is taken as its values (detached, on the CPU)."""
    arr = _as_array(vectors)
    if arr.ndim != 2:
        hint = ""
        if arr.ndim == 1 and np.issubdtype(arr.dtype, np.integer):
            hint = ("; this looks like ids: the order is build(vectors, ids)" if name == "vectors"
                    else "; expected float vectors")
        elif arr.ndim == 1:
            hint = f"; one vector is {name}[None, :] (shape [1, D])"
        raise DataError(f"{name} must be a 2-D array [N, D], got shape {arr.shape}{hint}")
    if not np.issubdtype(arr.dtype, np.floating):
        raise DataError(f"{name} must be floating point (float32), got dtype {arr.dtype}")
    if dim is not None and arr.shape[1] != dim:
        raise DataError(f"{name} have dimension {arr.shape[1]} but the index holds dimension {dim}")
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    if arr.size and not np.isfinite(arr).all():
        raise DataError(f"{name} contain NaN or inf; check the encoder output")
    return arr


def check_ids(ids: np.ndarray, n: int, *, name: str = "ids") -> np.ndarray:
    """Return ``ids[N]`` as int64, checking length, sign and uniqueness."""
    arr = _as_array(ids)
    if arr.ndim == 1 and arr.shape[0] != n:
        raise DataError(f"{name} holds {arr.shape[0]} ids for {n} vectors; give one id per row of vectors")
    if arr.ndim != 1:
        raise DataError(f"{name} must be a 1-D array with one id per vector ({n}), got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise DataError(f"{name} must be integers (int64 row ids), got dtype {arr.dtype}; map external ids to "
                        "integer rows first (e.g. with the run's item vocabulary)")
    arr = arr.astype(np.int64, copy=False)
    if arr.size and arr.min() < 0:
        raise DataError(f"{name} must be >= 0 ({PAD_ID} is reserved for padding), got {int(arr.min())}")
    if np.unique(arr).size != arr.size:
        raise DataError(f"{name} contain duplicates; every vector needs its own id")
    return arr


def check_queries(queries: np.ndarray, dim: int) -> np.ndarray:
    """Accept ``queries[Q, D]`` or a single ``[D]`` query; return float32 [Q, D]."""
    arr = _as_array(queries)
    if arr.ndim == 1:
        arr = arr[None, :]  # [D] -> [1, D]
    return check_vectors(arr, dim, name="queries")


def check_depth(value: Any, name: str, n: int, held: str) -> int:
    """``value`` (a ``k``, a ``rerank_top``) as an int, or ConfigError naming ``name``: an integer from 1 to the
    larger of MAX_K and the ``n`` things searched (``held``: "ids in the index", "documents").

    Rows are padded to it, so a k far above the catalogue only bought padding: 10**9 on a 20-item index
    tried to allocate 15 GiB ([Q, k] ids and scores), 2**70 was numpy's "pad_width must be of integral
    type", and BM25 allocated [Q, 10**7] for k=10**7; a negative one sliced a list (``k=-1`` answered every hit
    but the last). Padding is bounded by MAX_K, the bound of ``tt.recommend`` and the CLI; a k the catalogue can
    fill (a deep candidate list over a large corpus) stays allowed.

    Worded as the configs word theirs, the name then a colon (``k: must be at most 10000 ...``, ``MiningConfig.depth:
    ...``, ``--mining-depth: ...``): "k must be at most" read unlike every other refusal."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) < 1:
        raise ConfigError(f"{name}: must be a positive integer, got {value!r}")
    limit = max(MAX_K, n)
    if int(value) > limit:
        raise ConfigError(f"{name}: must be at most {limit} (the larger of twotower.config.MAX_K, {MAX_K}, and the "
                          f"{n} {held}: rows are padded to {name}), got {value!r}")
    return int(value)


def _check_k(k: Any, n: int) -> int:
    """:func:`check_depth` of an index's ``k`` over its ``n`` stored ids."""
    return check_depth(k, "k", n, "ids in the index")


def _empty(q: int, k: int) -> Results:
    return Results(np.full((q, k), PAD_ID, dtype=np.int64), np.full((q, k), -np.inf, dtype=np.float32))


#: Methods that need an index object: called on the class, their first argument was taken as ``self``
#: (``FaissIndex.build(vectors, ids)`` failed with "missing 1 required positional argument: 'ids'").
INSTANCE_METHODS = ("build", "add", "remove", "search", "save", "set_search_params")


class _IndexMethod:
    """An index method that, read off the class and called with something that is not an index, says so.

    Read off an instance it is the plain bound method; ``FaissIndex.build(index, vectors, ids)`` (an
    explicit index first) works as before.
    """

    def __init__(self, fn: Callable[..., Any], name: str) -> None:
        self.fn, self.name = fn, name
        functools.update_wrapper(self, fn)  # docs, signature and __isabstractmethod__

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is not None:
            return self.fn.__get__(obj, owner)
        fn, name, cls = self.fn, self.name, owner

        @functools.wraps(fn)
        def unbound(*args: Any, **kwargs: Any) -> Any:
            if args and isinstance(args[0], VectorIndex):
                return fn(*args, **kwargs)
            raise ConfigError(_class_call_message(cls, name, fn, args))

        return unbound


def _class_call_message(cls: type | None, name: str, fn: Callable[..., Any], args: tuple[Any, ...]) -> str:
    cls_name = cls.__name__ if cls is not None else "VectorIndex"
    params = [p.name for p in list(inspect.signature(fn).parameters.values())[1:]
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
    make = f"{cls_name}({getattr(cls, '_example_args', '')})"
    first = params[0] if params else "the first argument"
    got = f"its first argument, {first} ({describe(args[0])}), was taken as the index" if args else "no index was given"
    return (f"{cls_name}.{name}() was called on the class, not on an index, so {got}; create the index "
            f"first and call the method on it: index = {make}; index.{name}({', '.join(params)})")


class VectorIndex(ABC):
    """Build once from ``(vectors[N, D], ids[N])``, then search by inner product.

    Subclasses implement :meth:`_search_candidates` (plain top-``F`` without
    exclusions); :meth:`search` adds exclusions and padding on top.
    """

    #: Similarity used by every backend: inner product (the two-tower score, whether or not vectors are unit length).
    metric: str = "ip"
    #: Name written to ``meta.json`` and used by :func:`twotower.index.load_index`.
    backend: str = ""
    #: True when search returns the exact top-k (ties broken by smaller id).
    is_exact: bool = False
    #: Files ``_read`` opens: loading refuses a saved index whose checksum table does not list each of them.
    stored_files: tuple[str, ...] = ()

    #: constructor arguments of the example in error messages (``FaissIndex('flat')``)
    _example_args: str = ""

    def __init__(self) -> None:
        #: Fingerprint of the model whose embeddings are indexed (see ``fingerprint_arrays``).
        self.model_fingerprint: str | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in INSTANCE_METHODS:
            fn = cls.__dict__.get(name)
            if isinstance(fn, FunctionType):
                if fn.__doc__ is None:  # help(FaissIndex.build) showed none: the wrapper hid VectorIndex's
                    fn.__doc__ = inspect.getdoc(VectorIndex.__dict__.get(name))
                setattr(cls, name, _IndexMethod(fn, name))

    def _not_built(self) -> ConfigError:
        """The error of an index asked for its dimension (searched, saved) before anything was built."""
        return ConfigError(f"this {type(self).__name__} is empty: nothing was built yet, so it has no dimension; "
                           "call index.build(vectors, ids) before search or save")

    # ------------------------------------------------------------------ abstract
    @abstractmethod
    def build(self, vectors: np.ndarray, ids: np.ndarray) -> "VectorIndex":
        """Replace the contents with ``vectors[N, D]`` (float32) and ``ids[N]`` (int64); returns self."""

    @abstractmethod
    def add(self, vectors: np.ndarray, ids: np.ndarray) -> None:
        """Add more vectors; every id must be new."""

    @abstractmethod
    def remove(self, ids: np.ndarray) -> int:
        """Remove vectors by id; unknown ids are ignored. Returns how many were removed."""

    @abstractmethod
    def __len__(self) -> int:
        """Number of searchable vectors."""

    @property
    @abstractmethod
    def dim(self) -> int:
        """Embedding dimension ``D``."""

    @abstractmethod
    def _search_candidates(self, queries: np.ndarray, fetch: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``fetch`` of ``queries[Q, D]`` -> ``(scores[Q, F], ids[Q, F])``, PAD_ID where missing."""

    @abstractmethod
    def _write(self, directory: Path) -> tuple[dict[str, Any], dict[str, Any]]:
        """Write the backend's files into ``directory``; return ``(config, build_params)`` for meta.json."""

    @classmethod
    @abstractmethod
    def _read(cls, directory: Path, meta: dict[str, Any]) -> "VectorIndex":
        """Rebuild an index from verified files in ``directory``."""

    # ------------------------------------------------------------------ shared
    def _stored_vectors(self, ids: np.ndarray) -> np.ndarray | None:
        """``[B, D]`` the vectors stored under ``ids`` (every one held), as they were given; None when the backend
        keeps them only approximately (PQ, SQ) or cannot read them back (:mod:`twotower.index.content_check`)."""
        return None

    def _scores_exact(self) -> bool:
        """Whether the scores searches return are the exact inner products of the stored vectors (a PQ index
        returns its own estimates, which the content check then does not compare)."""
        return bool(self.is_exact)

    def _hidden_ids(self) -> np.ndarray:
        """Ids still stored by the backend but removed by the caller (filtered like exclusions)."""
        return np.empty(0, dtype=np.int64)

    @property
    def search_params(self) -> dict[str, Any]:
        """Runtime search knobs currently in force (empty for exact search)."""
        return {}

    def set_search_params(self, **params: Any) -> None:
        """Set runtime knobs (``nprobe``, ``efSearch``, ``k_factor``); exact search has none."""
        if params:
            raise ConfigError(f"{type(self).__name__} has no search parameters; got {sorted(params)}")

    def search(
        self,
        queries: np.ndarray,
        k: int,
        exclude: Sequence[np.ndarray] | None = None,
        allow: AllowList = None,
        *,
        exact_subset_max: int | None = None,
    ) -> Results:
        """Top-``k`` ids and scores for each of ``queries[Q, D]``: the one top-K path of the project.

        ``exclude[q]`` (optional, one int64 array per query, None for none) lists ids that
        must not be returned for query ``q`` (a user's seen items).
        ``allow`` (optional) is an allow-list: one id array shared by every
        query, or one array (or None for "everything") per query; only those
        ids may be returned (metadata filters). An allow-list of at most
        ``exact_subset_max`` ids is scored exactly over those ids when the backend
        can read its vectors back (exact, flat, HNSW, refined FAISS); a larger one
        widens the (ANN) search instead. None: at most 4096 ids or 1/8 of the
        index. Returns ``Results(ids[Q, K],
        scores[Q, K])`` sorted by descending score, ties by smaller id.

        Every row holds ``k`` hits unless fewer than ``k`` ids are eligible
        (stored, allowed, not excluded): the search deepens (and an IVF index
        probes more lists) until ``k`` survive or nothing is left to fetch, so
        a short row means the catalogue ran out; :func:`shortfall` counts it.
        So ``k`` larger than the index is allowed: the rows end in ``PAD_ID`` (-1)
        with score ``-inf`` (the service and CLI report such a list's shortfall).
        ``k`` is an integer from 1 to the larger of ``twotower.config.MAX_K``
        (10,000) and ``len(index)``, so the padding stays bounded; ConfigError otherwise.
        """
        k = _check_k(k, len(self))
        if exact_subset_max is not None and (
            isinstance(exact_subset_max, bool) or not isinstance(exact_subset_max, (int, np.integer))
            or exact_subset_max < 0
        ):
            raise ConfigError(f"exact_subset_max must be an integer >= 0 (or None), got {exact_subset_max!r}")
        queries = check_queries(queries, self.dim)  # [Q, D]
        n_q = queries.shape[0]
        n = len(self)
        if (isinstance(exclude, np.ndarray) and exclude.ndim == 1 and exclude.dtype != object) or _is_flat_ids(exclude):
            # a flat id array (or list: exclude=[5, 7] for two queries) was read as one id per query, or refused by
            # its length
            kind = "array" if isinstance(exclude, np.ndarray) else "list"
            raise DataError(f"exclude takes one id array per query (a list of {n_q}), got one flat {kind} of "
                            f"{len(exclude)} ids; for the same ids on every query pass [ids] * {n_q}")
        if exclude is not None and len(exclude) != n_q:
            raise DataError(f"exclude needs one array per query ({n_q}), got {len(exclude)}")
        # checked before any search; None for a query excludes nothing there (as None in allow allows everything)
        excl_rows = None if exclude is None else [
            _EMPTY if e is None else _query_ids(e, f"exclude[{q}]") for q, e in enumerate(exclude)]
        allow_rows = _allow_per_query(allow, n_q)
        hidden = self._hidden_ids()
        if n == 0 or n_q == 0:
            return _empty(n_q, k)
        if exclude is None and allow_rows is None and hidden.size == 0:
            scores, ids = self._search_candidates(queries, min(k, n))
            res = Results.from_scores_and_ids(scores, ids, k)
            short = np.flatnonzero((res.ids != PAD_ID).sum(axis=1) < min(k, n))
            if short.size == 0:
                return res
            # an ANN index may return fewer than asked (an IVF probing too few lists): deepen those rows
            log.debug("%d of %d queries came back short; deepening", short.size, n_q)
            redo = self._search_filtered(queries[short], k, [_EMPTY] * short.size, None)
            res.ids[short], res.scores[short] = redo.ids, redo.scores
            return res
        excl = [np.union1d(hidden, e) for e in excl_rows] if excl_rows is not None else [hidden] * n_q
        return self._search_filtered(queries, k, excl, allow_rows, exact_subset_max)

    def _search_deeper(
        self, queries: np.ndarray, fetch: int, depth: int, allow: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Candidates after ``depth`` deepenings; an ANN backend may also widen its search (e.g. nprobe).

        ``allow`` (sorted ids, one shared list for the group) lets a backend
        restrict the search itself; returning other ids is allowed too, they
        are filtered out by the caller.
        """
        return self._search_candidates(queries, fetch)

    def _search_allowed_exactly(
        self, query: np.ndarray, k: int, allow: np.ndarray, exclude: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """Exact top-``k`` of one ``query[D]`` over a small allow-list, or None if the backend cannot score ids."""
        return None

    def ranks_filter_exactly(self, n_allowed: int, exact_subset_max: int) -> bool:
        """Whether a search restricted to ``n_allowed`` ids (a filter) returns their exact top-k: exact search,
        or an allow-list of at most ``exact_subset_max`` ids that the backend scores one by one. Otherwise the
        filter is applied within the approximate search, whose recall was measured without one."""
        return bool(self.is_exact) or (n_allowed <= exact_subset_max and self._scores_allowed_exactly())

    def _scores_allowed_exactly(self) -> bool:
        """Whether :meth:`_search_allowed_exactly` answers (a backend that can read its vectors back)."""
        return False

    def _exhausted(self, fetch: int, depth: int) -> bool:
        """True when deepening further cannot return more candidates."""
        return fetch >= len(self) + len(self._hidden_ids())

    def _search_filtered(
        self, queries: np.ndarray, k: int, excl: list[np.ndarray], allow: list[np.ndarray | None] | None,
        exact_subset_max: int | None = None,
    ) -> Results:
        """Fetch, drop excluded / not-allowed ids, deepen the short rows: ``Results[Q, K]``."""
        n_q = queries.shape[0]
        total = len(self) + len(self._hidden_ids())  # vectors the backend can return
        # the caller's limit decides when given (the service's filter_exact_max), else the index's own rule
        exact_max = max(_SUBSET_EXACT_MAX, total // 8) if exact_subset_max is None else int(exact_subset_max)
        out_ids = np.full((n_q, k), PAD_ID, dtype=np.int64)  # [Q, K]
        out_scores = np.full((n_q, k), -np.inf, dtype=np.float32)
        allow = allow if allow is not None else [None] * n_q
        fetch = np.zeros(n_q, dtype=np.int64)  # [Q]
        for q in range(n_q):
            a = allow[q]
            if a is None:
                fetch[q] = min(_fetch_bucket(k + len(excl[q])), total)
                continue
            if a.size <= exact_max:
                # a small allow-list: score exactly those ids when the backend can (ExactIndex)
                got = self._search_allowed_exactly(queries[q], k, a, excl[q])
                if got is not None:
                    s, i = got
                    out_ids[q, : i.size], out_scores[q, : s.size] = i, s
                    fetch[q] = -1  # done
                    continue
            # over-fetch by the inverse share of allowed ids so one pass usually suffices
            fetch[q] = min(total, int((k + len(excl[q])) * total / max(a.size, 1) * 1.5) + k)
        depth = np.zeros(n_q, dtype=np.int64)  # [Q] times each query has been deepened
        pending = np.flatnonzero(fetch > 0)
        while pending.size:
            still: list[int] = []
            for group in _groups(pending, fetch, depth, allow):
                f, d, a = int(fetch[group[0]]), int(depth[group[0]]), allow[group[0]]
                scores, ids = self._search_deeper(queries[group], f, d, a)  # [G, F]
                keep = ids != PAD_ID  # [G, F]
                # without an allow-list the answer is the top-k of the backend's whole top-(k + excluded) minus the
                # excluded, as a plain search that deep: an ANN search returning fewer (an IVF whose probed lists hold
                # fewer vectors) is deepened like it, not stopped at the first k survivors of a shallow probe
                # (1M x 64, IVF16384 nprobe 6, each query's top-500 excluded: recall@10 0.05 against exact)
                need = np.asarray([min(k + excl[q].size, total) if allow[q] is None and excl[q].size else 0
                                   for q in group.tolist()])  # [G]
                short = keep.sum(axis=1) < need
                for row, q in enumerate(group):
                    if excl[q].size:
                        keep[row] &= ~np.isin(ids[row], excl[q])
                    if allow[q] is not None:
                        keep[row] &= np.isin(ids[row], allow[q])
                ids = np.where(keep, ids, PAD_ID)
                got = Results.from_scores_and_ids(scores, ids, k)  # [G, K]
                out_ids[group], out_scores[group] = got.ids, got.scores
                if not self._exhausted(f, d):
                    still.extend(int(q) for q in group[(keep.sum(axis=1) < k) | short])
            pending = np.asarray(still, dtype=np.int64)
            fetch[pending] = np.minimum(fetch[pending] * 2, total)
            depth[pending] += 1
        if depth.max(initial=0):
            log.debug("filtered search deepened up to %d times", int(depth.max()))
        return Results(out_ids, out_scores)

    # ------------------------------------------------------------------ storage
    def save(self, directory: str | Path, *, model_fingerprint: str | None = None,
             tuning: dict[str, Any] | None = None, extra: Mapping[str, Callable[[Path], Any]] | None = None) -> Path:
        """Write the index atomically to ``directory`` (see :mod:`twotower.index.storage`).

        ``model_fingerprint`` (if given) replaces :attr:`model_fingerprint`
        before writing, so a later ``load(expected_fingerprint=...)`` can
        refuse an index built for another model. ``tuning`` (the autotune
        summary: measured recall, target, timings) is saved as ``tune.json``
        under the same checksums as the index, since serving trusts its recall. ``extra``: files written into
        the new folder before it is swapped in (:func:`twotower.index.storage.save_index`).
        """
        from twotower.index.storage import save_index

        if model_fingerprint is not None:
            self.model_fingerprint = model_fingerprint
        return save_index(self, directory, tuning=tuning, extra=extra)

    @classmethod
    def load(cls, directory: str | Path, *, expected_fingerprint: str | None = None) -> "VectorIndex":
        """Load and verify an index saved by :meth:`save`; must match this class's backend."""
        from twotower.index.storage import load_index

        index = load_index(directory, expected_fingerprint=expected_fingerprint)
        if cls is not VectorIndex and not isinstance(index, cls):
            raise ConfigError(
                f"{directory} holds a {type(index).__name__}, not a {cls.__name__}; "
                "use twotower.index.load_index to load any backend"
            )
        return index

    def __repr__(self) -> str:
        try:
            dim: int | str = self.dim
        except ConfigError:  # not built yet: a notebook cell ending in `tt.FaissIndex("flat")` showed a traceback
            dim = "None (not built)"
        return f"{type(self).__name__}(n={len(self)}, dim={dim}, exact={self.is_exact})"


for _name in INSTANCE_METHODS:  # the base class's own (search, save, ...): subclasses are wrapped as they are made
    _fn = VectorIndex.__dict__.get(_name)
    if isinstance(_fn, FunctionType):
        setattr(VectorIndex, _name, _IndexMethod(_fn, _name))
