"""`twotower serve`: the HTTP service over a run (uvicorn; imports are lazy)."""
from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from twotower.cli.printing import say

__all__ = ["register", "cmd_serve"]

log = logging.getLogger("twotower")


def register(sub: argparse._SubParsersAction) -> None:
    from twotower.cli.main import add_no_verify
    from twotower.cli.search_cmd import rerank_backend_flag
    from twotower.config import COLD_SIMILAR, MAX_K
    from twotower.serving.settings import ServiceSettings  # every default is declared there, once (no heavy imports)

    d = ServiceSettings()
    p = sub.add_parser("serve", help="serve recommendations over HTTP (FastAPI + uvicorn)")
    p.add_argument("--run", help="recommender run folder")
    p.add_argument("--search-index", help="search index folder from `twotower search index` (adds POST /search)")
    p.add_argument("--rerank", help="cross-encoder folder for POST /search with rerank=true")
    rerank_backend_flag(p)
    p.add_argument("--index", help="index folder (default RUN/index if built, else exact search)")
    p.add_argument("--exact", action="store_true",
                   help="rank the whole catalogue exactly, ignoring RUN/index (as `twotower recommend --exact`); "
                        "not with --index")
    p.add_argument("--history-from", nargs="+", metavar="FILE",
                   help="known users' input histories from these interaction files (e.g. train.csv valid.csv), read "
                        "in time order instead of the training history; their items count as seen (as `twotower "
                        "recommend --history-from`)")
    p.add_argument("--allow-low-recall", action="store_true",
                   help="serve an index whose recall measured at build time missed its target (refused otherwise)")
    p.add_argument("--host", default=d.host, help="bind address (default %(default)s: this machine only)")
    p.add_argument("--port", type=int, default=d.port, help="TCP port (default %(default)s)")
    p.add_argument("--allow-host", action="append", metavar="NAME",
                   help="a name requests may give in their Host header besides localhost, 127.0.0.1 and ::1 (a "
                        "reverse proxy's public name, say); repeatable. Bound to loopback (the default) the server "
                        "answers those three only, so a web page cannot reach it by pointing its own name at "
                        "127.0.0.1 (DNS rebinding); bound to another address it answers any name unless given")
    p.add_argument("--max-concurrency", type=int, default=d.max_concurrency, help="requests computing at once, per worker process with --workers N (default %(default)s)")
    p.add_argument("--max-queue", type=int, default=d.max_queue,
                   help="requests waiting beyond those, per worker process; more get 429 (default %(default)s)")
    # one or the other: `--no-max-wait --max-wait-ms 30` dropped the 30 without a word (argparse refuses the pair,
    # an explicit value equal to the default included, and each flag alone keeps its meaning)
    wait = p.add_mutually_exclusive_group()
    wait.add_argument("--max-wait-ms", type=float, default=d.max_wait_ms,
                      help="429 when a new request's expected wait for a compute slot exceeds this, each worker process "
                           "estimating its own (default "
                           "%(default)s ms); not with --no-max-wait")
    wait.add_argument("--no-max-wait", action="store_true",
                      help="bound the queue by --max-queue only, not by time; not with --max-wait-ms")
    p.add_argument("--max-k", type=int, default=d.max_k,
                   help=f"largest k a request may ask for, at most {MAX_K} (default %(default)s)")
    p.add_argument("--max-batch", type=int, default=d.max_batch,
                   help="most requests in one /recommend/batch (default %(default)s)")
    p.add_argument("--max-history", type=int, default=d.max_history,
                   help="longest ad-hoc history in item ids (default %(default)s)")
    p.add_argument("--max-exclude", type=int, default=d.max_exclude,
                   help="most item ids in one request's exclude_items (default %(default)s)")
    p.add_argument("--max-body-bytes", type=int, default=d.max_body_bytes,
                   help="larger bodies get 413 (default %(default)s bytes)")
    p.add_argument("--body-timeout", type=float, default=d.body_timeout_s,
                   help="seconds a request body may take to arrive; a slower one gets 408 (default %(default)s)")
    # TWOTOWER_THREADS is not read, deliberately: set for training (say 8), it would give each of --max-concurrency
    # requests 8 threads on the same cores; the --help said nothing, while every other command reads it
    p.add_argument("--threads", type=int, default=d.threads,
                   help="torch/FAISS threads per request (default %(default)s: the fastest for single queries with "
                        "--max-concurrency requests computing side by side). TWOTOWER_THREADS, which the other "
                        "commands read, does not apply to serve: give --threads N")
    p.add_argument("--explain-k", type=int, default=d.explain_k,
                   help='"explain": true explains at most this many of the first items (default %(default)s)')
    from twotower.cli.flags import add_filter_exact_max_flag

    add_filter_exact_max_flag(p, serve=True)  # the words and default `recommend` and `similar` read
    p.add_argument("--time-budget", type=float, default=d.time_budget_s,
                   help="seconds of computation one request may use; past it the answer is 503 (default %(default)s)")
    p.add_argument("--workers", type=int, default=d.workers,
                   help="server processes sharing one memory-mapped copy of the vectors and index; "
                        "--max-concurrency and --max-queue apply per worker (default %(default)s)")
    p.add_argument("--cold-similar", choices=COLD_SIMILAR, default=d.cold_similar,
                   help="how /similar-items queries an item without training interactions of a dual-head item "
                        "tower: its semantic head, or its served vector as before (default %(default)s)")
    p.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"],
                   help="uvicorn log level (default info; warning under -q)")
    add_no_verify(p)
    p.set_defaults(func=cmd_serve)


def _bind_port(host: str, port: int, *, every_address: bool, copies: int = 1) -> list[Any]:
    """Bind and listen on the port before the (slow) load, and keep it until the server serves on these very
    sockets: a port taken is one line now, and no other process can take it while the run loads (the port was
    checked with a socket closed at once, and uvicorn's own bind after the load could find it taken).
    ``copies``: one socket a worker where the kernel spreads connections over them (``listen.bind_listening``)."""
    from twotower.serving.listen import bind_listening

    return bind_listening(host, port, every_address=every_address, copies=copies)


def _note_threads_env(threads: int) -> None:
    """One line where TWOTOWER_THREADS is set: serve does not read it (see ``--threads``), and a user who exported
    it for training saw no sign that the server computes on ``threads`` instead. An information line: ``-q`` leaves
    it out, as :func:`say` does; logged at DEBUG too, so that ``-v`` logs have it in their order."""
    env = os.environ.get("TWOTOWER_THREADS", "").strip()  # as set, not checked: serve does not read it
    if not env:  # blank counts as unset, as everywhere
        return
    msg = (f"note: TWOTOWER_THREADS={env} is not read by serve; each request computes on --threads {threads} "
           "(give --threads N to change it)")
    say(msg)
    log.debug(msg)


def _binds_every_interface(host: str) -> bool:
    """Does binding ``host`` listen on every interface? Decided by the address it resolves to, not by its
    spelling: ``--host 0`` (a common shorthand), ``0:0::0`` or ``0.0.0.00`` bind the wildcard address just as
    ``0.0.0.0`` and ``::`` do, and were served to the network without the warning."""
    import ipaddress
    import socket

    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return host in ("0.0.0.0", "::")  # unresolvable: _bind_port refuses it next, in one line
    # an IPv6 address may carry a zone ("fe80::1%eth0"), which ip_address does not read
    return any(ipaddress.ip_address(str(info[4][0]).split("%")[0]).is_unspecified for info in infos)


#: the flags whose name is not the setting's with dashes
_FLAG_OF = {"time_budget_s": "--time-budget", "body_timeout_s": "--body-timeout", "allowed_hosts": "--allow-host",
            "max_wait_ms": "--max-wait-ms"}
#: the names this machine goes by on loopback, always answered when the Host header is checked
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def _binds_loopback_only(host: str) -> bool:
    """Does ``host`` resolve to loopback addresses only (127.0.0.1, ::1, localhost)?"""
    import ipaddress
    import socket

    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return False
    return all(ipaddress.ip_address(str(info[4][0]).split("%")[0]).is_loopback for info in infos)


def _allowed_hosts(host: str, extra: list[str] | None) -> tuple[str, ...] | None:
    """The Host header names to answer: the loopback names and ``--allow-host``'s for a server bound to
    loopback, or given ``--allow-host``; None (any) for one bound to another address without it."""
    if not extra and not _binds_loopback_only(host):
        return None
    return (*LOOPBACK_NAMES, host, *(extra or ()))


def _check_number_flags(args: argparse.Namespace) -> None:
    """The number flags in ServiceSettings' bounds, said as `recommend --k 0` is (``--max-k: must be between 1 and
    10000 (twotower.config.MAX_K), got 0``); ServiceSettings' own words, re-named by flag, read "--max-k must be
    between 1 and 10000, got 0", and are kept for Python."""
    from twotower.cli.flags import check_range
    from twotower.serving.settings import INT64_MAX, INT_BOUNDS, TIME_BOUNDS

    for name, (lo, hi) in INT_BOUNDS.items():
        flag = _FLAG_OF.get(name, "--" + name.replace("_", "-"))
        value = getattr(args, name, None)
        check_range(flag, value, lo, hi, why="twotower.config.MAX_K" if name == "max_k" else "")
        check_range(flag, value, hi=INT64_MAX, hi_said="2**63 - 1")  # pydantic's list bounds overflow past it
    times = {"time_budget_s": args.time_budget, "body_timeout_s": args.body_timeout,
             "max_wait_ms": None if args.no_max_wait else args.max_wait_ms}
    for name, value in times.items():
        check_range(_FLAG_OF.get(name, "--" + name.replace("_", "-")), value, 0, TIME_BOUNDS[name], lo_open=True,
                    why="milliseconds" if name == "max_wait_ms" else "seconds")


def _settings(args: argparse.Namespace) -> Any:
    """The service settings of the flags; a refused value is named by its flag (``--max-k: must be between 1 and
    10000 (twotower.config.MAX_K), got 0``), not by the ``ServiceSettings`` field a command-line user never typed."""
    from twotower.errors import ConfigError
    from twotower.serving.settings import ServiceSettings

    _check_number_flags(args)
    try:
        return ServiceSettings(
            host=args.host, port=args.port, max_concurrency=args.max_concurrency, max_queue=args.max_queue,
            max_wait_ms=None if args.no_max_wait else args.max_wait_ms,
            max_k=args.max_k, max_batch=args.max_batch, max_history=args.max_history,
            max_exclude=args.max_exclude,
            max_body_bytes=args.max_body_bytes, body_timeout_s=args.body_timeout, threads=args.threads, explain_k=args.explain_k,
            time_budget_s=args.time_budget, workers=args.workers, filter_exact_max=args.filter_exact_max,
            cold_similar=args.cold_similar,
            allowed_hosts=_allowed_hosts(args.host, args.allow_host),
        )
    except ConfigError as e:
        from twotower.cli.flags import fields_as_flags

        def flag_of(name: str) -> str:
            return _FLAG_OF.get(name, "--" + name.replace("_", "-"))

        raise ConfigError(fields_as_flags(str(e), "ServiceSettings", flag_of)) from None


def cmd_serve(args: argparse.Namespace) -> int:
    from twotower.errors import ConfigError

    if args.log_level == "info" and logging.getLogger().getEffectiveLevel() > logging.INFO:
        # `-q` (warnings, errors and the output only) left uvicorn's four start-up INFO lines in: its level follows
        # the command's unless --log-level names another
        args.log_level = "warning"
    settings = _settings(args)
    if _binds_every_interface(settings.host):
        msg = (f"WARNING: binding {settings.host} exposes the service to every network this machine is on; "
               "it has no authentication. Use 127.0.0.1 behind a reverse proxy unless you mean it.")
        print(msg, file=sys.stderr)
        log.warning(msg)
    _note_threads_env(settings.threads)
    for flag, value in (("--run", args.run), ("--search-index", args.search_index), ("--rerank", args.rerank),
                        ("--index", args.index)):
        if value is not None and not value.strip():  # `--run ""` was taken as no run: a TypeError from create_app
            raise ConfigError(f"{flag}: an empty path; give the folder, or leave {flag} out")
    if args.rerank and args.search_index is None:
        # the cross-encoder reranks POST /search hits, which only a search index gives: without one it was
        # dropped without a word, and the server started as if it would rerank (checked first: `serve --rerank X`
        # alone was told it needs --run and/or --search-index, not that --rerank needs the index)
        raise ConfigError("--rerank reranks the hits of POST /search: give the search index too, --search-index DIR "
                          "(from `twotower search index`), or drop --rerank")
    if args.run is None and args.search_index is None:
        raise ConfigError("serve needs --run DIR (recommender) and/or --search-index DIR (text search)")
    if args.history_from and args.run is None:
        raise ConfigError("--history-from gives the known users of a recommender run their input histories: "
                          "give the run too, --run DIR")
    if args.exact and args.index:
        raise ConfigError("--exact ranks the whole catalogue exactly; --index names an index to serve from: "
                          "use one or the other")
    _refuse_search_index_as_index(args.index)
    from twotower.cli.search_cmd import rerank_settings

    rerank = rerank_settings(args)  # --rerank-backend checked (and warned about without --rerank) before the load
    if args.rerank:  # a wrong folder is one line now, not after the search index and its encoder are loaded
        from twotower.search.artefacts import check_cross_encoder_dir, index_it_hint

        check_cross_encoder_dir(args.rerank, "--rerank", bi_encoder_hint=index_it_hint(args.rerank))
    # a taken port is one line now, not uvicorn's errno after the load; held until the server serves on it
    sockets = _bind_port(settings.host, settings.port, every_address=settings.workers == 1,
                         copies=settings.workers)
    from twotower.serving.listen import close_all

    try:
        return _load_and_serve(args, settings, rerank, sockets)
    finally:  # a load that failed (or a stop before serving) leaves no port bound; uvicorn closed them otherwise
        close_all(sockets)


def _refuse_search_index_as_index(index: str | None) -> None:
    """--index names the run's vector index: a search index there was called corrupted once the run had loaded, with
    a rebuild into that folder which `index build` refused, where --search-index was meant."""
    if index is None:
        return
    from twotower.errors import ConfigError
    from twotower.index.storage import other_artefact
    from twotower.search.artefacts import is_search_index

    other = other_artefact(index)
    if other is not None:
        where = "give it to --search-index" if is_search_index(index) else "a search index is served with --search-index"
        raise ConfigError(f"--index {index}: {index} is {other}, not a vector index; {where}")


def _load_and_serve(args: argparse.Namespace, settings: Any, rerank: Any, sockets: list[Any]) -> int:
    """Load the run and/or search index, then serve on ``sockets`` (bound by :func:`_bind_port`)."""
    from twotower.cli.flags import refuse_missing_inputs

    refuse_missing_inputs({"--history-from": args.history_from})
    if args.run is not None:  # a wrong folder is one line at once, not after torch and the service are imported
        from twotower.utils.run_folder import check_run_folder

        check_run_folder(args.run)
    from twotower.serving import RecommenderService, create_app
    from twotower.utils.runtime import set_threads

    # the whole process's counts, as every command sets them (a service in a Python host's process holds them only
    # while it works): the requests, the load's user vectors and the warm-up searches run on them
    set_threads(settings.threads)
    # load before serving: a corrupted run or a mismatched index fails here with a clean message
    service = (RecommenderService.load(args.run, args.index, settings=settings, allow_low_recall=args.allow_low_recall,
                                       exact=args.exact, history_from=args.history_from,
                                       exact_flag="--exact", allow_flag="--allow-low-recall")
               if args.run else None)
    search = None
    if args.search_index:
        from twotower.serving.search_service import SearchService

        search = SearchService.load(args.search_index, args.rerank, rerank_settings=rerank)
    what = []
    if service is not None:
        read = f"; known users read their history from {' '.join(args.history_from)}" if args.history_from else ""
        what.append(f"{args.run} ({service.index_description}{read}{service.precompute_note()})")
    if search is not None:
        what.append(f"search index {args.search_index}"
                    + (f" + reranker ({search.reranker.backend})" if search.reranker is not None else ""))
    from twotower.serving.docs import docs_note

    # under -q too: the address is what a quiet server still has to say (uvicorn's own line is INFO, left out)
    # an IPv6 address in brackets, as a URL has it (uvicorn's line does so too: listen.log_listening)
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    say(f"serving {' and '.join(what)} on http://{host}:{settings.port}; {docs_note()}", quiet_too=True)
    if settings.workers > 1:
        from twotower.serving.workers import shared_dir, supervise

        # removed if a SIGTERM or Ctrl-C comes while the vectors are written, or the disk fills (shared_dir)
        with shared_dir() as shared:
            spec = _share_with_workers(args, settings, service, shared)
            # the workers map the shared files; this process becomes a fresh one that only supervises them, on
            # the sockets it inherits
            supervise(spec, workers=settings.workers, log_level=args.log_level, sockets=sockets)
    from twotower.serving.workers import sweep_shared_dirs

    sweep_shared_dirs()  # what a --workers server killed with its workers left (a --workers start sweeps too)
    app = create_app(service=service, settings=settings, search_service=search) if service else create_app(
        settings=settings, search_service=search)
    if threading.current_thread() is threading.main_thread():
        # uvicorn stops gracefully on SIGTERM, then raises it again at the handler it found: the default one, so
        # the server dies by the signal (143 in a shell, a clean stop for systemd) as with --workers, not by the
        # CLI's Terminated, which exits 143 (a failure to systemd)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    from twotower.serving.settings import SWITCH_INTERVAL_S

    sys.setswitchinterval(SWITCH_INTERVAL_S)  # /healthz waited for the lock behind a big batch (settings.py)
    with _ctrl_c_noted() as ctrl_c:
        _serve_on(app, settings.host, settings.port, args.log_level, sockets)
    if ctrl_c:
        # uvicorn stopped gracefully on Ctrl-C (requests under way answered), raised SIGINT again at the handler it
        # found, then caught the KeyboardInterrupt itself: the server exited 0 without a word; now it ends as every
        # command a Ctrl-C stops, and `serve --workers N`, do: "interrupted" (cli.main) and 130
        raise KeyboardInterrupt
    return 0


def _serve_on(app: Any, host: str, port: int, log_level: str, sockets: list[Any]) -> None:
    """What ``uvicorn.run(app, host=, port=, ...)`` does for one process, on ``sockets`` instead of a bind of its
    own: it catches the KeyboardInterrupt its signal handling raises again, and exits with its start-up failure
    code where the app did not start (a lifespan that failed)."""
    import uvicorn
    from uvicorn.config import STARTUP_FAILURE

    from twotower.serving.listen import log_listening

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[Any] | None = None) -> None:
            await super().startup(sockets=sockets)
            if self.started:  # the line uvicorn logs once serving, except on sockets it was handed
                log_listening(host, sockets or [])

    from twotower.utils.progress import colours_allowed

    server = Server(uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=False,
                                   use_colors=colours_allowed()))
    try:
        server.run(sockets=sockets)
    except KeyboardInterrupt:
        pass
    if not server.started:
        sys.exit(STARTUP_FAILURE)


@contextlib.contextmanager
def _ctrl_c_noted() -> Iterator[list[int]]:
    """A list that a SIGINT received inside the block (while uvicorn serves, or before it catches signals) is noted
    in; the SIGINT still raises KeyboardInterrupt, as Python's own handler does."""
    noted: list[int] = []
    if threading.current_thread() is not threading.main_thread():  # only the main thread has signals
        yield noted
        return

    def note(signum: int, frame: object) -> None:
        noted.append(signum)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, note)
    try:
        yield noted
    finally:
        signal.signal(signal.SIGINT, previous)


def _share_with_workers(args: argparse.Namespace, settings: Any, service: Any, shared: Path) -> Any:
    """Write the loaded vectors for the worker processes (memory-mapped files) into ``shared``; the spec they start
    from."""
    from dataclasses import asdict

    from twotower.pipeline.recommend import run_index_dir
    from twotower.serving.workers import WorkerSpec, index_digest, share_arrays

    spec = WorkerSpec(shared_dir=str(shared), settings=asdict(settings), search_index=args.search_index,
                      rerank=args.rerank, rerank_backend=args.rerank_backend)
    if service is not None:
        share_arrays(service, shared)
        index_dir = run_index_dir(args.run, args.index, exact=args.exact)
        spec = WorkerSpec(**{**asdict(spec), "run_dir": str(args.run), "fingerprint": service.fingerprint,
                             "index_dir": None if index_dir is None else str(index_dir),
                             "index_digest": None if index_dir is None else index_digest(index_dir),
                             "index_description": service.index_description,
                             "index_recall": service.index_recall,
                             "history_files": (list(service.histories.files) if service.histories is not None
                                               else None)})
    say(f"{settings.workers} workers map the vectors in {shared} (one copy, memory-mapped)")
    return spec
