"""Service settings: one frozen, keyword-only dataclass validated on creation."""
from __future__ import annotations

from dataclasses import dataclass

from twotower.config import COLD_SIMILAR, MAX_K, MAX_THREADS, SERVE_THREADS
from twotower.errors import ConfigError

_INT64_MAX = 2**63 - 1
#: The largest request body ``ServiceSettings.max_body_bytes`` may allow: 1 GiB
MAX_BODY_BYTES = 1 << 30

#: Most fields in one request's ``filters``, and most values of one field (the HTTP schema's bounds, and the
#: service's from Python: :func:`twotower.serving.catalog.check_filter_sizes`)
MAX_FILTER_FIELDS = 16
MAX_FILTER_VALUES = 1000
#: Longest id (user_id, item_id, a history's or exclude_items' item, a filter's value) and longest field name (of
#: ``filters``, of ``user_features``) one request may send, in characters: the HTTP schema's bounds, and the
#: service's from Python (:meth:`twotower.serving.RecommenderService.check_sizes`)
MAX_ID_CHARS = 256
MAX_FIELD_NAME_CHARS = 64
#: Most columns in one request's ``user_features`` (a new user's features): the HTTP schema's bound, and the
#: service's from Python and `twotower recommend/explain --user-features`' (:func:`twotower.pipeline.refusals.
#: user_features_refusal`)
MAX_USER_FEATURES = 64

__all__ = ["ServiceSettings", "checked_filter_exact_max", "INT_BOUNDS", "INT64_MAX", "TIME_BOUNDS", "host_name", "MAX_FILTER_FIELDS", "MAX_FILTER_VALUES", "MAX_ID_CHARS",
           "MAX_FIELD_NAME_CHARS", "MAX_USER_FEATURES"]


def checked_filter_exact_max(value: object, name: str = "filter_exact_max") -> int:
    """``value`` checked as ``ServiceSettings.filter_exact_max`` is, its refusal naming ``name`` (``--filter-exact-max``
    on the command line, the argument of ``tt.recommend`` / ``tt.similar``): ``filter_exact_max must be >= 0, got
    -1``."""
    try:
        ServiceSettings(filter_exact_max=value)  # type: ignore[arg-type]
    except ConfigError as e:
        raise ConfigError(str(e).replace("ServiceSettings.filter_exact_max", name)) from None
    return value  # type: ignore[return-value]


def host_name(host: str) -> str:
    """The name of a Host header or ``--allow-host`` value, compared as such: ``"LocalHost:8000"`` ->
    ``"localhost"``, ``"[::1]:8000"`` -> ``"::1"``, ``"example.com."`` -> ``"example.com"``."""
    host = host.strip().lower()
    if host.startswith("["):  # an IPv6 literal, with or without a port
        return host[1:].split("]", 1)[0]
    if host.count(":") == 1:  # name:port (a bare IPv6 address holds several colons)
        host = host.split(":", 1)[0]
    return host.rstrip(".")


#: the integer settings' bounds (lowest, highest; None: none past 2**63 - 1), checked by ServiceSettings and by
#: `twotower serve` before it, naming the flag
INT_BOUNDS: dict[str, tuple[int, int | None]] = {
    "port": (0, 65535),
    "max_k": (1, MAX_K),  # the lists of the CLI and tt.recommend are bounded there too
    "default_k": (1, None),
    "max_history": (1, None),
    "max_exclude": (1, None),
    "max_batch": (1, None),
    # a body is read whole and parsed into Python objects (several times its bytes): 1 GiB is far past the
    # largest request the other limits admit (max_batch x max_history ids: 1.5 MB at the defaults), and
    # 1e12 was taken as given, the server then holding whatever a client sent
    "max_body_bytes": (64, MAX_BODY_BYTES),
    # each request computing holds a thread of its own: past MAX_THREADS (the most any setting may ask for)
    # they only queue for the cores in the OS, and 1e12 admitted every request, shedding none with 429
    "max_concurrency": (1, MAX_THREADS),
    "max_queue": (0, None),
    "threads": (1, MAX_THREADS),
    "precompute_users_max": (0, None),
    "filter_exact_max": (0, None),
    "explain_k": (1, None),
    "workers": (1, 1024),
}
#: the largest integer setting of all (pydantic's list bounds overflowed past it)
INT64_MAX = _INT64_MAX
#: the time settings' bounds: more than 0, at most this many (seconds; max_wait_ms: milliseconds)
TIME_BOUNDS = {"time_budget_s": 3600, "body_timeout_s": 3600, "max_wait_ms": 3_600_000}

#: Python's thread switch interval in a serving process (``sys.setswitchinterval``; Python's default is 5 ms). The
#: event loop answers /healthz on its own thread while requests compute on worker threads, and every hand-over of the
#: interpreter lock to it waited up to the interval: behind a 256-batch of k=1000 explained answers (54 MB) /healthz
#: took up to 409-431 ms at 5 ms, 65 ms at 0.5 ms, the batch itself no slower (1.45 s against 1.45-1.57 s), and a
#: batch whose client hung up stopped 0.02 s after, not 1.05-1.11 s (`python bench/bounded_work.py`). Set by `twotower serve` in its own process and in each worker, never by
#: create_app (a Python caller's process keeps its own).
SWITCH_INTERVAL_S = 0.0005


@dataclass(frozen=True, kw_only=True)
class ServiceSettings:
    """Limits and knobs of the HTTP service (the CLI maps its flags onto these fields)."""

    host: str = "127.0.0.1"  # loopback by default; 0.0.0.0 exposes the service to the network
    port: int = 8000
    max_k: int = 1000  # largest list length a request may ask for; at most config.MAX_K (the CLI's and tt.recommend's)
    # list length when a request names none (also `twotower recommend --user`'s); at most max_k
    default_k: int = 10
    max_history: int = 500  # longest ad-hoc history (item ids) in one request
    max_exclude: int = 500  # most item ids in one request's exclude_items (items never to list for it)
    max_batch: int = 256  # most requests in one /recommend/batch call
    max_body_bytes: int = 1 << 20  # larger bodies get 413 before they are parsed
    # seconds a request body may take to arrive in full; beyond that: 408. A client that opens a POST and then
    # sends nothing (or a byte now and then) would otherwise hold its connection and buffer for ever
    body_timeout_s: float = 10.0
    max_concurrency: int = 4  # requests computing at once (worker threads)
    max_queue: int = 16  # more requests may wait for a worker; beyond that: 429 at once
    # 429 at once, too, when the wait a new request would have before a worker is free (requests queued ahead
    # x recent compute time per request / max_concurrency) exceeds this many milliseconds; None: no wait bound.
    # Under overload this keeps the admitted requests' latency near max_wait_ms + their own compute time.
    max_wait_ms: float | None = 25.0
    threads: int = SERVE_THREADS  # torch / FAISS threads per computation (1 is fastest for single queries)
    precompute_users_max: int = 2_000_000  # cache every known user's vector when there are at most this many
    # filters matching at most this many items are scored exactly over those items; a broader filter widens the
    # index's (ANN) search instead (`serve --filter-exact-max`, passed as VectorIndex.search's exact_subset_max)
    filter_exact_max: int = 50_000
    # explanations cost one user-tower pass per request plus a small dict per item, so only the top few are
    # explained: a request with "explain": true gets an explanation on its first explain_k items (it may ask for fewer)
    explain_k: int = 10
    # seconds of computation one HTTP request may use; beyond that it is abandoned and answered 503
    time_budget_s: float = 2.0
    # server processes (`serve --workers N`): each has its own event loop and 429 gate (max_concurrency and
    # max_queue are per worker) and maps the same item/user vectors and index files read-only
    workers: int = 1
    # the names a request's Host header may give (port aside; `serve --allow-host`), others get 400; None: any.
    # `twotower serve` bound to loopback answers localhost, 127.0.0.1 and ::1 only: a page of another site that
    # re-points its own name at 127.0.0.1 (DNS rebinding) is otherwise the same origin to the browser, and reads
    # every answer of this unauthenticated service, users' histories included
    allowed_hosts: tuple[str, ...] | None = None
    # how /similar-items queries an item without training interactions of a dual-head item tower: "semantic"
    # (its semantic head; pipeline/similar.py says why) or "item" (its served vector, the behaviour before)
    cold_similar: str = COLD_SIMILAR[0]

    def __post_init__(self) -> None:
        for name, (lo, hi) in INT_BOUNDS.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"ServiceSettings.{name} must be an integer, got {value!r}")
            if value < lo or (hi is not None and value > hi):
                bound = f">= {lo}" if hi is None else f"between {lo} and {hi}"
                raise ConfigError(f"ServiceSettings.{name} must be {bound}, got {value}")
            if value > _INT64_MAX:  # pydantic's list bounds (max_batch, max_history) raised OverflowError after the load
                raise ConfigError(f"ServiceSettings.{name} must be at most 2**63 - 1, got {value}")
        t = self.time_budget_s
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t <= TIME_BOUNDS["time_budget_s"]:
            raise ConfigError(f"ServiceSettings.time_budget_s must be seconds in (0, 3600], got {t!r}")
        b = self.body_timeout_s
        if isinstance(b, bool) or not isinstance(b, (int, float)) or not 0 < b <= TIME_BOUNDS["body_timeout_s"]:
            raise ConfigError(f"ServiceSettings.body_timeout_s must be seconds in (0, 3600], got {b!r}")
        w = self.max_wait_ms
        if w is not None and (isinstance(w, bool) or not isinstance(w, (int, float)) or not 0 < w <= TIME_BOUNDS["max_wait_ms"]):
            raise ConfigError(f"ServiceSettings.max_wait_ms must be milliseconds in (0, 3600000] or None, got {w!r}")
        if self.cold_similar not in COLD_SIMILAR:
            raise ConfigError(f"ServiceSettings.cold_similar must be one of {', '.join(COLD_SIMILAR)}, "
                              f"got {self.cold_similar!r}")
        if not isinstance(self.host, str) or not self.host:
            raise ConfigError(f"ServiceSettings.host must be a non-empty string, got {self.host!r}")
        hosts = self.allowed_hosts
        if hosts is not None:  # a list too: the settings of `serve --workers N` travel to the workers as JSON
            if (isinstance(hosts, str) or not isinstance(hosts, (tuple, list)) or not hosts
                    or not all(isinstance(h, str) and h.strip() for h in hosts)):
                raise ConfigError(f"ServiceSettings.allowed_hosts must be a non-empty list of host names or None, "
                                  f"got {hosts!r}")
            object.__setattr__(self, "allowed_hosts", tuple(dict.fromkeys(host_name(h) for h in hosts)))

    @property
    def max_in_flight(self) -> int:
        """Requests admitted at once: computing plus waiting; one more gets 429."""
        return self.max_concurrency + self.max_queue
