"""``twotower serve --workers N``: N server processes over one copy of the vectors.

Legend: ``I`` items, ``U`` known users, ``D`` embedding dim.

One uvicorn event loop saturates one core, and under overload it queues
requests in its sockets before the 429 gate sees them. With ``--workers N``
uvicorn starts N processes, each accepting on its own socket of the port where
the kernel spreads connections over them (Linux; one shared socket elsewhere:
:mod:`twotower.serving.worker_slots`), each with its own
loop, gate (:class:`~twotower.serving.middleware.ConcurrencyGate`, so at most
``N * max_in_flight`` requests are admitted) and compute threads.

The parent process loads and checks the run and its index once, exactly as a
single-process ``serve`` does (a corrupted artefact or a low-recall index fails
before any worker starts), holding the port it bound before the load
(:mod:`twotower.serving.listen`), the sockets its workers then accept on. It
then writes what every worker would otherwise recompute, the item vectors
``[I, D]`` and the known users' query vectors ``[U, D]``, as ``.npy`` files
into a private temporary folder, and drops its own copy. Each worker maps
those files read-only (``np.load(mmap_mode="r")``) and the saved index with
FAISS's read-only memory map (flat codes and IVF lists;
:func:`twotower.index.load_index` with ``mmap=True``), so the N workers
share one copy in the page cache instead of holding N. What each worker still
holds privately: the model weights, vocabularies, training history and item
metadata (small next to the vectors for a large catalogue).

The arrays go to a temporary folder rather than the run folder: they are
derived, the run folder may be read-only, and the folder is removed when the
server stops (folders of a killed server are swept at the next start).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, NoReturn

import numpy as np

from twotower.errors import ConfigError, IntegrityError, TwoTowerError
from twotower.serving.listen import close_all, log_listening, reuses_port
from twotower.serving.worker_slots import SLOTS, WorkerSockets

if TYPE_CHECKING:
    from fastapi import FastAPI

    from twotower.serving.catalog import ItemCatalog
    from twotower.serving.service import RecommenderService

__all__ = ["WorkerSpec", "share_arrays", "open_shared_service", "worker_app", "run_workers", "SPEC_ENV",
           "exit_with_parent", "worker_log_config", "supervise"]

log = logging.getLogger(__name__)

#: Environment variable through which the parent tells each worker where its spec is.
SPEC_ENV = "TWOTOWER_SERVE_SPEC"
ITEM_VECTORS = "item_vectors.npy"
USER_VECTORS = "user_vectors.npy"
INPUT_HISTORIES = "input_histories.npz"  # serve --history-from: the users' input histories (CSR arrays)
_PREFIX = "twotower-serve-"
METRICS = "metrics"  # each worker's request counters, one JSON file per process (Metrics.share)
#: left in the shared folder by a worker that could not start: why (read by run_workers)
FAILED = "worker-failed.txt"


@dataclass(frozen=True, kw_only=True)
class WorkerSpec:
    """What a worker process loads: written by the parent as JSON, read by :func:`worker_app`."""

    shared_dir: str  # holds item_vectors.npy (and user_vectors.npy when users are cached)
    settings: dict[str, Any]  # ServiceSettings fields
    run_dir: str | None = None
    index_dir: str | None = None  # a saved index (mapped read-only); None = exact search over the item vectors
    fingerprint: str | None = None  # the run's model fingerprint as the parent loaded it
    index_digest: str | None = None  # sha256 of the index's meta.json (which holds its files' checksums)
    index_description: str = ""
    index_recall: dict[str, Any] | None = None  # what the index's tune.json measured (pipeline.recommend.open_served_index)
    search_index: str | None = None
    rerank: str | None = None
    rerank_backend: str | None = None  # serve --rerank-backend; None: RerankSettings' default
    history_files: list[str] | None = None  # serve --history-from: the files the shared input histories came from

    def write(self) -> Path:
        path = Path(self.shared_dir) / "spec.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, path)
        return path

    @classmethod
    def read(cls, path: str | Path) -> "WorkerSpec":
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            return cls(**data)
        except (OSError, ValueError, TypeError) as e:
            raise ConfigError(f"{path}: cannot read the worker spec ({e}); start workers with `twotower serve "
                              "--workers N`") from e


def index_digest(index_dir: str | Path) -> str | None:
    """sha256 of a saved index's ``meta.json`` (its files' checksums and settings); None when it has none."""
    try:
        return hashlib.sha256((Path(index_dir) / "meta.json").read_bytes()).hexdigest()
    except OSError:
        return None


def sweep_shared_dirs() -> None:
    """Remove this user's shared-array folders of servers that are gone (a ``--workers`` server killed together
    with its workers leaves its copy of the catalogue's vectors: 256 MB at 1M x 64). Every ``serve`` start sweeps,
    with or without ``--workers``."""
    base = Path(tempfile.gettempdir())
    for old in base.glob(f"{_PREFIX}*"):
        try:
            pid = int(old.name[len(_PREFIX):].split("-", 1)[0])
        except ValueError:
            continue
        try:
            if pid != os.getpid() and not _alive(pid) and old.is_dir() and old.stat().st_uid == os.getuid():
                shutil.rmtree(old, ignore_errors=True)
        except OSError:  # removed meanwhile by another server's sweep
            continue


def make_shared_dir() -> Path:
    """A private (0700) folder for one server's shared arrays; sweeps folders of servers that are gone."""
    sweep_shared_dirs()
    return Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-", dir=Path(tempfile.gettempdir())))


@contextlib.contextmanager
def shared_dir() -> Iterator[Path]:
    """:func:`make_shared_dir`, removed with what is in it when the block raises (a SIGTERM or Ctrl-C while the
    vectors are written, seconds for a large catalogue; a full disk): it was left in the temporary directory until
    the next server's sweep. Kept when the block ends normally: the workers it was made for remove it."""
    shared = make_shared_dir()
    try:
        yield shared
    except BaseException:
        shutil.rmtree(shared, ignore_errors=True)
        raise


def _own_shared_dir(spec_path: str | None) -> Path | None:
    """The shared folder ``spec_path`` (``SPEC_ENV``) lies in, where it is one :func:`make_shared_dir` made (an
    orphaned worker removes it: never a folder the variable was pointed at by hand)."""
    if not spec_path:
        return None
    folder = Path(spec_path).parent
    made = folder.name.startswith(_PREFIX) and folder.parent == Path(tempfile.gettempdir())
    return folder if made and Path(spec_path).name == "spec.json" else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def share_arrays(service: "RecommenderService", folder: str | Path) -> None:
    """Write ``service``'s item vectors ``[I, D]`` and cached user vectors ``[U, D]`` as ``.npy`` into ``folder``."""
    folder = Path(folder)
    arrays = {ITEM_VECTORS: service.item_vectors}
    if service.user_vectors is not None:
        arrays[USER_VECTORS] = service.user_vectors
    for name, arr in arrays.items():
        tmp = folder / f".{name}.tmp"
        with open(tmp, "wb") as f:  # np.save to a path would append ".npy" to the temporary name
            np.save(f, np.ascontiguousarray(arr, dtype=np.float32), allow_pickle=False)
        os.replace(tmp, folder / name)
    if service.histories is not None:  # read once by the parent: every worker excludes and explains the same
        tmp = folder / f".{INPUT_HISTORIES}.tmp"
        with open(tmp, "wb") as f:
            np.savez(f, **service.histories.sequences.to_npz_dict())
        os.replace(tmp, folder / INPUT_HISTORIES)


def open_shared_service(spec: WorkerSpec, *, catalog: "ItemCatalog | None" = None) -> "RecommenderService":
    """The worker's service: its own run (model, vocabularies), the parent's vectors and index mapped read-only.

    ``catalog`` replaces the run's items (a benchmark's synthetic catalogue, as in :class:`RecommenderService`).
    """
    from twotower.index import ExactIndex, load_index
    from twotower.pipeline.artifacts import TrainedRun
    from twotower.serving.service import RecommenderService, served_index_source
    from twotower.serving.settings import ServiceSettings
    from twotower.utils.runtime import set_threads

    settings = ServiceSettings(**spec.settings)
    set_threads(settings.threads)
    if spec.run_dir is None:
        raise ConfigError("the worker spec names no run")
    run = TrainedRun.load(spec.run_dir)
    fp = run.fingerprint()
    if spec.fingerprint is not None and fp != spec.fingerprint:
        raise IntegrityError(f"{spec.run_dir} changed since the server started (model {fp}, the server loaded "
                             f"{spec.fingerprint}); restart `twotower serve` to serve the new run")
    shared = Path(spec.shared_dir)
    items = np.load(shared / ITEM_VECTORS, mmap_mode="r", allow_pickle=False)  # [I, D]
    users = (np.load(shared / USER_VECTORS, mmap_mode="r", allow_pickle=False)
             if (shared / USER_VECTORS).is_file() else None)  # [U, D]
    if spec.index_dir is None:
        index = ExactIndex.over(items, np.arange(items.shape[0], dtype=np.int64))
        index.model_fingerprint = fp
    else:
        # a rebuild for the same model passes the fingerprint check: without this, a restarted worker
        # would answer from the new index and its siblings from the old one
        digest = index_digest(spec.index_dir)
        if spec.index_digest is not None and digest != spec.index_digest:
            raise IntegrityError(f"the index in {spec.index_dir} changed since the server started (rebuilt?); "
                                 "restart `twotower serve` to serve it from every worker")
        index = load_index(spec.index_dir, expected_fingerprint=fp, mmap=True)
    histories = None
    if spec.history_files is not None:
        from twotower.models.history import UserSequences
        from twotower.pipeline.histories import InputHistories

        with np.load(shared / INPUT_HISTORIES, allow_pickle=False) as z:
            seqs = UserSequences(z["indptr"], z["items"], z["timestamps"])
        histories = InputHistories(seqs, len(run.item_vocab), tuple(spec.history_files))
    service = RecommenderService(run, index, settings=settings, item_vectors=items, user_vectors=users,
                                 catalog=catalog, histories=histories)
    service.index_description = spec.index_description
    service.index_recall = spec.index_recall
    service.index_source = served_index_source(spec.run_dir, spec.index_dir)  # as the parent's /readyz says it
    return service


def exit_with_parent(interval_s: float = 1.0, shared: str | Path | None = None) -> threading.Thread:
    """Stop this worker (SIGTERM to itself, a graceful uvicorn shutdown) once its parent process is gone, removing
    ``shared`` (the server's shared-array folder), which the parent would have removed.

    uvicorn's supervisor stops the workers when it is stopped, but a supervisor killed outright (SIGKILL,
    the OOM killer) leaves them serving as orphans, holding the port and the shared arrays. A daemon thread
    polls the parent pid, which changes when the worker is re-parented; it works wherever ``os.getppid`` does
    (a parent-death signal would be Linux only, and fires when the spawning thread rather than the process exits).
    Every orphaned worker removes the folder (the first one to get there does; the files' memory maps stay valid
    until each worker exits): it was left in the temporary directory until the next server's sweep.
    """
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(interval_s)
            if os.getppid() != parent:
                log.warning("worker %d: the serving process %d is gone; stopping", os.getpid(), parent)
                if shared is not None:
                    shutil.rmtree(shared, ignore_errors=True)
                os.kill(os.getpid(), signal.SIGTERM)
                return

    t = threading.Thread(target=watch, name="exit-with-parent", daemon=True)
    t.start()
    return t


def worker_app() -> "FastAPI":
    """uvicorn app factory run in each worker process (``twotower.serving.workers:worker_app``)."""
    from twotower.serving.app import create_app
    from twotower.serving.settings import ServiceSettings

    from twotower.serving.settings import SWITCH_INTERVAL_S

    sys.setswitchinterval(SWITCH_INTERVAL_S)  # as `serve` sets it in its own process (settings.py)
    path = os.environ.get(SPEC_ENV)
    exit_with_parent(shared=_own_shared_dir(path))
    if not path:
        raise ConfigError(f"{SPEC_ENV} is not set; worker processes are started by `twotower serve --workers N`")
    spec = WorkerSpec.read(path)
    settings = ServiceSettings(**spec.settings)
    try:
        search = None
        if spec.search_index is not None:
            from twotower.serving.search_service import SearchService

            from twotower.text.encoder import RerankSettings

            rerank = RerankSettings(backend=spec.rerank_backend) if spec.rerank_backend is not None else None
            search = SearchService.load(spec.search_index, spec.rerank, rerank_settings=rerank)
        service = open_shared_service(spec) if spec.run_dir is not None else None
    except TwoTowerError as e:
        _refuse_to_start(e, spec)
    except Exception as e:  # noqa: BLE001 - any failure to start is the same: restarting it fails the same way
        # the shared arrays gone from the temporary folder (a /tmp cleaner on a long-running server), a file the
        # worker cannot read, memory: uvicorn restarted such a worker forever, a traceback and a run load (torch,
        # weights) every few seconds while the server went on with one worker fewer
        _refuse_to_start(e, spec, unexpected=True)
    app = (create_app(settings=settings, search_service=search) if service is None
           else create_app(service=service, settings=settings, search_service=search))
    app.state.metrics.share(Path(spec.shared_dir) / METRICS)  # GET /metrics sums every worker's counters
    return app


def _refuse_to_start(error: Exception, spec: WorkerSpec, *, unexpected: bool = False) -> NoReturn:
    """Stop the whole server: one line saying why, and uvicorn's start-up failure code.

    The parent checked the run before binding the port, so this happens when uvicorn restarts a worker that
    died (a crash, the OOM killer) and the run folder changed meanwhile (a retrain into the same folder): the
    new worker cannot serve what the others serve, from the vectors the parent shared, and each restart fails
    the same way. With any other exit code uvicorn restarted it forever, a traceback and a run load each time.
    The reason is also left in the shared folder, for :func:`run_workers` to exit non-zero with it (uvicorn's
    supervisor itself returns normally). Any other failure to start (``unexpected``: the shared arrays removed from
    the temporary folder, memory) stops it the same way, its type named and its traceback logged once.
    """
    from uvicorn.config import STARTUP_FAILURE

    why = f"{type(error).__name__}: {error}" if unexpected else str(error)
    log.critical("worker %d cannot start, so the server stops: %s", os.getpid(), why, exc_info=unexpected)
    try:
        (Path(spec.shared_dir) / FAILED).write_text(why, encoding="utf-8")
    except OSError:
        pass  # the line above still says why
    sys.exit(STARTUP_FAILURE)


def worker_log_config(level: int) -> dict[str, Any]:
    """The logging configuration uvicorn applies in the serving process and again in each worker (``log_config``).

    A worker is a fresh (spawned) interpreter that never ran the CLI's ``logging.basicConfig``: twotower's INFO
    lines there were dropped and its warnings printed bare by logging's last-resort handler (``worker 812: the
    serving process 790 is gone; stopping``, no time, level or logger), and uvicorn's own lines (``Waiting for
    application startup.``, ``Shutting down``) did not say which of the N processes spoke. Every line now carries
    its process id, twotower's (and other libraries') at ``level`` in the CLI's format, uvicorn's after its prefix.
    """
    import copy

    from uvicorn.config import LOGGING_CONFIG

    from twotower.utils.runtime import CHATTY_LOGGERS

    config = copy.deepcopy(LOGGING_CONFIG)
    config["formatters"]["default"]["fmt"] = "%(levelprefix)s [%(process)d] %(message)s"
    config["formatters"]["twotower"] = {"format": "%(asctime)s [%(process)d] %(levelname)s %(name)s: %(message)s",
                                        "datefmt": "%H:%M:%S"}
    config["handlers"]["twotower"] = {"formatter": "twotower", "class": "logging.StreamHandler",
                                      "stream": "ext://sys.stderr"}
    config["root"] = {"handlers": ["twotower"], "level": logging.getLevelName(level)}
    if level > logging.DEBUG:  # as the CLI does in its own process, unless --verbose
        config["loggers"].update({name: {"level": logging.getLevelName(max(level, logging.WARNING))}
                                  for name in CHATTY_LOGGERS})
    return config


def _stopping_signal(serve: Any) -> int | None:
    """Call ``serve()``; the first SIGINT or SIGTERM this process received meanwhile (None: neither).

    uvicorn's multi-process supervisor catches both signals, stops its workers and returns normally, so the
    signal that stopped it is read from Python's signal wakeup fd (written for any signal Python handles,
    whichever handler uvicorn installed). Outside the main thread (no signal handling there) it is None.
    """
    try:
        read, write = os.pipe()
    except OSError:
        serve()
        return None
    try:
        os.set_blocking(read, False)
        os.set_blocking(write, False)
        try:
            previous = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
        except ValueError:  # not the main thread
            serve()
            return None
        try:
            serve()
        finally:
            signal.set_wakeup_fd(previous)
        try:
            seen = os.read(read, 4096)
        except BlockingIOError:
            seen = b""
    finally:
        os.close(read)
        os.close(write)
    return next((sig for sig in seen if sig in (signal.SIGINT, signal.SIGTERM)), None)


def run_workers(spec: WorkerSpec, *, workers: int, log_level: str = "info",
                factory: str = "twotower.serving.workers:worker_app",
                sockets: list[socket.socket] | None = None) -> int | None:
    """Serve with ``workers`` uvicorn processes built by ``factory`` (an import string) from ``spec``.

    ``sockets``: the listening sockets to serve on (``twotower serve`` bound them before its load, closed here
    when the server stops); None: uvicorn binds the spec's host and port itself.
    Blocks until the server stops, then removes ``spec.shared_dir``. Returns the signal that stopped it
    (``signal.SIGINT`` or ``signal.SIGTERM``), None if neither did.
    """
    from twotower.serving.settings import ServiceSettings

    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 2:
        raise ConfigError(f"run_workers needs at least 2 workers, got {workers!r}; one worker serves in-process")
    failed = Path(spec.shared_dir) / FAILED
    try:  # a SIGTERM before uvicorn's supervisor catches it (its import: 0.1-0.3 s) removes the folder too
        settings = ServiceSettings(**spec.settings)
        os.environ[SPEC_ENV] = str(spec.write())  # spawned workers inherit the environment
        import uvicorn

        from twotower.utils.progress import colours_allowed

        options = dict(factory=True, workers=workers, host=settings.host, port=settings.port, log_level=log_level,
                       access_log=False, log_config=worker_log_config(logging.getLogger().getEffectiveLevel()),
                       use_colors=colours_allowed())
        served = _per_worker(sockets, workers, spec.shared_dir)
        stopped_by = _stopping_signal(lambda: uvicorn.run(factory, **options) if served is None
                                      else _run_on_sockets(factory, served, options))
        if failed.is_file():  # a worker could not start: uvicorn stopped the server, and so exits non-zero here
            raise IntegrityError(f"the server stopped: a worker could not start: {failed.read_text(encoding='utf-8')}")
        return stopped_by
    finally:
        shutil.rmtree(spec.shared_dir, ignore_errors=True)
        close_all(sockets or [])


def _per_worker(sockets: list[socket.socket] | None, workers: int, shared: str) -> list[socket.socket] | None:
    """``sockets`` as each worker gets them: one ``SO_REUSEPORT`` socket a worker as a :class:`WorkerSockets`
    (each worker serves its own, serving/worker_slots.py); any other list (one socket, shared) as it is."""
    if sockets is None or len(sockets) != workers or not all(reuses_port(s) for s in sockets):
        return sockets
    return WorkerSockets(sockets, Path(shared) / SLOTS)


def _run_on_sockets(factory: str, sockets: list[socket.socket], options: dict[str, Any]) -> None:
    """What ``uvicorn.run(factory, workers=N, ...)`` does, on ``sockets`` instead of a bind of its own: its
    multi-process supervisor hands them to each worker as it hands the one it binds."""
    import inspect

    from uvicorn import Config, Server
    from uvicorn.supervisors import Multiprocess

    config = Config(factory, **options)
    supervisor: dict[str, Any] = {"sockets": sockets}
    # uvicorn before 0.55 (0.50, the least pyproject allows, included) took the workers' target too
    if "target" in inspect.signature(Multiprocess).parameters:
        supervisor["target"] = Server(config=config).run
    log_listening(config.host, sockets)  # what uvicorn's bind logs
    try:
        Multiprocess(config, **supervisor).run()
    except KeyboardInterrupt:  # as uvicorn.run
        pass


def supervise(spec: WorkerSpec, *, workers: int, log_level: str = "info",
              sockets: list[socket.socket] | None = None) -> NoReturn:
    """Replace this process (same pid: Ctrl-C, ``kill`` and a service manager still reach the server) by a fresh
    interpreter that only runs :func:`run_workers` (``python -m twotower.serving.workers``), on ``sockets``
    (inherited across the exec: the port stays held) or, None, on a port uvicorn binds there.

    ``twotower serve`` loads and checks the run and its index before the workers start; after that the serving
    process only supervises them, yet it kept what the load brought in: torch, FAISS, the run, freed memory
    the allocator does not give back. MovieLens-100K, ``--workers 2``: the parent's USS (private memory) was
    234 MB, as much as a worker's; the fresh supervisor holds what uvicorn and numpy need.
    """
    path = spec.write()
    argv = [sys.executable, "-m", "twotower.serving.workers", str(path), str(workers), log_level,
            str(logging.getLogger().getEffectiveLevel())]
    if sockets:
        for sock in sockets:
            sock.set_inheritable(True)
        argv.append(",".join(str(sock.fileno()) for sock in sockets))
    sys.stdout.flush()
    sys.stderr.flush()
    # held across the exec, until the new interpreter has its handler (_supervise_main): a SIGTERM while it
    # started (imports, 0.1-0.3 s) ended it on the spot, before anything could remove the shared folder
    held = signal.pthread_sigmask(signal.SIG_BLOCK, _STOPS) if _CAN_HOLD else None
    try:
        os.execv(sys.executable, argv)
    finally:  # the exec failed: the caller removes the folder, a signal held meanwhile arrives now
        if held is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)


#: the signals that stop a server, held by :func:`supervise` across its exec where the platform can hold them
_STOPS = {signal.SIGINT, signal.SIGTERM}
_CAN_HOLD = hasattr(signal, "pthread_sigmask")


def _supervise_main(argv: list[str]) -> int:
    """``python -m twotower.serving.workers SPEC WORKERS LOG_LEVEL LEVEL [FD,...]``: what :func:`supervise` runs;
    FD: the listening sockets it inherited."""
    from twotower.cli.stopping import Terminated, interrupt_status, terminate_as_interrupt
    from twotower.cli.stopping import stopped_by as said_when

    spec_path, workers, log_level, level, *fds = argv
    sockets = [socket.socket(fileno=int(fd)) for fd in fds[0].split(",")] if fds and fds[0] else None
    logging.basicConfig(level=int(level), format="%(asctime)s [%(process)d] %(levelname)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S")
    try:  # read while SIGINT and SIGTERM are still held (supervise): it names the folder to remove
        spec = WorkerSpec.read(spec_path)
    except TwoTowerError as e:
        close_all(sockets or [])
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        with terminate_as_interrupt():  # uvicorn's supervisor sets its own handlers once it is there
            if _CAN_HOLD:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPS)  # one held since the exec arrives here
            stopped_by = run_workers(spec, workers=int(workers), log_level=log_level, sockets=sockets)
    except TwoTowerError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except Terminated:
        stopped_by = signal.SIGTERM
    except KeyboardInterrupt as e:
        print(said_when(e), file=sys.stderr)  # "interrupted", as the CLI ends every command a Ctrl-C stops
        return interrupt_status(e)
    finally:
        shutil.rmtree(spec.shared_dir, ignore_errors=True)  # run_workers removes it, unless stopped before it ran
    # as the single-process server ends: uvicorn re-raises a SIGTERM (the process dies by it, 143 in a shell, a
    # clean stop for systemd) and a SIGINT becomes the CLI's KeyboardInterrupt (130); the workers' supervisor
    # returned normally from both, and the server exited 0 when `kill` stopped it
    if stopped_by == signal.SIGTERM:
        sys.stdout.flush()
        sys.stderr.flush()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.raise_signal(signal.SIGTERM)
        return 128 + signal.SIGTERM  # pragma: no cover - SIGTERM ended the process
    if stopped_by == signal.SIGINT:  # the single-process server's KeyboardInterrupt says it in cli.main
        print(said_when(KeyboardInterrupt()), file=sys.stderr)
        return interrupt_status(KeyboardInterrupt())
    return 0


if __name__ == "__main__":  # pragma: no cover - run by supervise() through exec
    sys.exit(_supervise_main(sys.argv[1:]))
