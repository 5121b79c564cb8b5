"""Heartbeats between torchrun's ranks: a frozen rank is named long before ``train.dist_timeout_s``.

A rank that stops answering (``kill -STOP``, a stuck or swapping node) left the others waiting in their next
collective, silent, until ``train.dist_timeout_s`` (default 1800 s) ran out. Now each rank runs a daemon thread
that writes a beat (a counter, its host and pid) into the launcher's TCP store every ``heartbeat_warn_s / 6``
seconds (at most 10), and rank 0's thread warns once when another rank's beat has not changed for
``train.heartbeat_warn_s`` seconds, and once more if it beats again. Rank 0 itself is watched by every other rank
(one key each), and named by rank 1 and by the first rank of every other node (``LOCAL_RANK`` 0: one line in each
node's torchrun output), at error level, the only one a rank > 0 logs. Rank 0 also writes which ranks it finds
frozen into one key of the store when that changes, and every other rank reads it each beat: so each rank's
timeout line (cli/train_cmd.py) can name any frozen rank, for two reads a rank per beat (rank 0: one per rank),
not one per pair of ranks. A frozen process's thread is frozen with it,
so a stopped rank is caught; a rank stuck in Python code (a loop, a deadlock) still beats, and is named only at
the timeout. Beats are compared on the watching rank's own clock (a counter changed or not), so clocks that differ between
nodes do not matter. The threads read no random stream and touch no tensor: training's numbers are unchanged.
The store may go away first (its process ended): the threads then stop without a word.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from twotower.config import TrainConfig

__all__ = ["StaleWatch", "Heartbeat", "watched_ranks", "names_silence", "rank_heartbeats", "heartbeat_key",
           "frozen_key", "beat_interval", "DONE", "frozen_ranks"]

log = logging.getLogger("twotower.distributed")

#: the value a rank leaves when its heartbeats end cleanly (training done): rank 0 no longer expects beats
DONE = "done"


def heartbeat_key(rank: int) -> str:
    """The store key a rank beats into (one per torchrun restart, as :func:`twotower.distributed.silent_ranks`)."""
    return f"twotower/heartbeat/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}/{rank}"


def frozen_key() -> str:
    """The store key rank 0 writes the ranks it finds frozen into (JSON: rank -> ``[pid, host]`` or null)."""
    return f"twotower/heartbeat/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}/frozen"


def beat_interval(warn_after_s: float) -> float:
    """Seconds between beats: six of them fit in the warning's threshold, and at most 10 s apart."""
    return min(10.0, warn_after_s / 6)


class StaleWatch:
    """Which ranks' beats have not changed for ``after_s`` seconds; each named once per silence.

    ``observe`` takes each watched rank's current value (None: not written yet) and the time; a value that changed
    since the last call restarts its rank's silence. A rank whose value is :data:`DONE` is not expected to beat.
    """

    def __init__(self, ranks: list[int], after_s: float, now: float) -> None:
        self.after_s = after_s
        self._seen: dict[int, tuple[str | None, float]] = {r: (None, now) for r in ranks}  # value, since when
        self._named: set[int] = set()

    @property
    def ranks(self) -> list[int]:
        return list(self._seen)

    def observe(self, values: Mapping[int, str | None], now: float) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
        """``(stale, back)``: the ranks silent for ``after_s`` seconds not named before, and the named ranks that beat
        again, each with the seconds it has been (or was) silent."""
        stale: list[tuple[int, float]] = []
        back: list[tuple[int, float]] = []
        for r, value in values.items():
            seen, since = self._seen[r]
            if value != seen:
                if r in self._named:
                    self._named.discard(r)
                    back.append((r, now - since))
                self._seen[r] = (value, now)
            elif value != DONE and r not in self._named and now - since >= self.after_s:
                self._named.add(r)
                stale.append((r, now - since))
        return stale, back


def pid_host(value: str | None) -> tuple[str, str] | None:
    """``(PID, HOST)`` from a beat's value (``COUNT HOST PID``); None before the first beat."""
    parts = (value or "").split()
    return (parts[2], parts[1]) if len(parts) == 3 else None


def _where(value: str | None) -> str:
    """`` (pid P on HOST)`` from a beat's value (``COUNT HOST PID``); empty before the first beat."""
    ph = pid_host(value)
    return f" (pid {ph[0]} on {ph[1]})" if ph else ""


def stale_line(r: int, silent_s: float, value: str | None, timeout_s: float) -> str:
    """The warning for rank ``r``, silent ``silent_s`` seconds."""
    left = max(timeout_s - silent_s, 0.0)
    # a killed rank > 0 is reported by rank 0, which says what the run folder keeps; a killed rank 0 says nothing more
    after = "rank 0 then says what the run folder keeps for --resume" if r else \
        "the run folder keeps the checkpoint of rank 0's last finished epoch for --resume"
    return (f"rank {r}{_where(value)} has sent no heartbeat for {silent_s:.0f} s: its process looks frozen (stopped with "
            f"SIGSTOP, or its node stuck or swapping); the other ranks will wait for it until train.dist_timeout_s="
            f"{timeout_s:g} runs out (about {left:.0f} s more), then stop. `kill -CONT` the process if it was stopped, "
            f"or kill it to end the wait now ({after})")


def watched_ranks(rank: int, world: int) -> list[int]:
    """The ranks whose beats ``rank`` reads: rank 0 every other; every other rank rank 0 alone (the rest it learns
    from rank 0's verdict, :func:`frozen_key`)."""
    return list(range(1, world)) if rank == 0 else [0]


def names_silence(rank: int, local_rank: int) -> bool:
    """Whether ``rank`` logs the silences it sees: rank 0, rank 1 and each other node's first rank (``local_rank``
    0), so a frozen rank 0 is named once per node, not by every rank."""
    return rank <= 1 or local_rank == 0


def _local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", "0") or "0")


class Heartbeat:
    """One rank's heartbeat thread; it also watches the ranks ``watch`` names (:class:`StaleWatch`; by default
    :func:`watched_ranks`), logs their silences if ``says`` (by default :func:`names_silence` of this process's
    ``LOCAL_RANK``) and, on a rank > 0, reads rank 0's verdict on the others (:func:`frozen_key`).

    ``connect`` returns the store (a fresh client of the launcher's TCP store by default); ``clock`` the time.
    """

    def __init__(self, rank: int, world: int, warn_after_s: float, timeout_s: float, *,
                 connect: Callable[[], Any], clock: Callable[[], float] = time.monotonic,
                 watch: list[int] | None = None, says: bool | None = None) -> None:
        self.rank, self.world, self.warn_after_s, self.timeout_s = rank, world, warn_after_s, timeout_s
        self.watch = watched_ranks(rank, world) if watch is None else watch
        self.says = names_silence(rank, _local_rank()) if says is None else says
        self._connect, self._clock = connect, clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._me = f"{socket.gethostname()} {os.getpid()}"
        #: the ranks named frozen (by this thread, or on a rank > 0 by rank 0's) and not beating again since:
        #: rank -> (pid, host), None if it never beat; replaced whole, never changed in place (read by another thread)
        self.frozen: dict[int, tuple[str, str] | None] = {}
        self._seen_frozen: dict[int, tuple[str, str] | None] = {}  # by this thread's own watch

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"twotower-heartbeat-{self.rank}", daemon=True)
        self._thread.start()

    def stop(self, wait_s: float = 5.0) -> None:
        """End the thread (it leaves :data:`DONE` in the store); waits at most ``wait_s`` (a daemon: never a hang)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(wait_s)

    def _run(self) -> None:
        try:
            store = self._connect()
        except Exception as e:  # noqa: BLE001 -- no store to beat into (its process ended): nothing to say
            log.debug("heartbeat: no store (%s)", e)
            return
        watch = StaleWatch(self.watch, self.warn_after_s, self._clock())
        count = 0
        try:
            while True:
                count += 1
                store.set(heartbeat_key(self.rank), f"{count} {self._me}")
                self.check(store, watch)
                if self._stop.wait(beat_interval(self.warn_after_s)):
                    break
            store.set(heartbeat_key(self.rank), DONE)
        except Exception as e:  # noqa: BLE001 -- the store went away (rank 0 or torchrun exited): stop quietly
            log.debug("heartbeat: store gone (%s)", e)

    def check(self, store: Any, watch: StaleWatch) -> None:
        """Read every watched rank's beat and warn about the newly silent ones (and those beating again); rank 0
        writes what it found frozen when that changed, the others read it."""
        values = {r: _read(store, heartbeat_key(r)) for r in watch.ranks}
        stale, back = watch.observe(values, self._clock())
        level = logging.WARNING if self.rank == 0 else logging.ERROR  # a rank > 0 logs errors only (cli/main.py)
        for r, silent in stale:
            self._seen_frozen[r] = pid_host(values[r])
            if self.says:
                log.log(level, "%s", stale_line(r, silent, values[r], self.timeout_s))
        for r, silent in back:
            self._seen_frozen.pop(r, None)
            if self.says:
                log.log(level, "rank %d sends heartbeats again after %.0f s of silence", r, silent)
        if self.rank == 0:
            if stale or back:
                store.set(frozen_key(), json.dumps({str(r): ph for r, ph in self._seen_frozen.items()}))
            self.frozen = dict(self._seen_frozen)
        else:  # rank 0's verdict on the others (it warned about them), and this thread's own on rank 0
            told = _verdict(_read(store, frozen_key()))
            self.frozen = {r: ph for r, ph in {**told, **self._seen_frozen}.items() if r != self.rank}


def _read(store: Any, key: str) -> str | None:
    return store.get(key).decode() if store.check([key]) else None


def _verdict(value: str | None) -> dict[int, tuple[str, str] | None]:
    """The ranks rank 0 wrote under :func:`frozen_key` (none if it wrote nothing, or nothing readable)."""
    try:
        raw = json.loads(value) if value else {}
        return {int(r): (str(ph[0]), str(ph[1])) if ph else None for r, ph in raw.items()}
    except (ValueError, TypeError, AttributeError, IndexError):
        return {}


def _launcher_store(timeout_s: float) -> Any:
    """A client of the launcher's TCP store (``MASTER_ADDR``, ``MASTER_PORT``), apart from the process group's."""
    import torch.distributed as dist

    return dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                         timeout=timedelta(seconds=timeout_s))


#: the heartbeat this process runs, if any: one per process, however many blocks ask for it
_running: list[Heartbeat] = []
#: the last heartbeat this process started, kept after it stops: a collective's timeout is handled outside its block
_last: list[Heartbeat] = []


def frozen_ranks() -> dict[int, tuple[str, str] | None]:
    """The ranks this process's last heartbeat named frozen (no beat for ``train.heartbeat_warn_s``) and that did
    not beat again: rank -> ``(pid, host)`` (None if it never beat); on a rank > 0, rank 0's verdict on the others
    too. Empty without a heartbeat."""
    return dict(_last[0].frozen) if _last else {}


@contextlib.contextmanager
def rank_heartbeats(train: TrainConfig) -> Iterator[None]:
    """Beat (and on rank 0 watch) while the block runs, under a process group of 2 or more ranks with
    ``train.heartbeat_warn_s`` > 0 and the launcher's store named in the environment; else do nothing.

    Both ``Trainer.fit`` and the pipeline's ``train_run`` (``twotower train``, around the data reading and the fit)
    enter it: inside a block that already beats, it does nothing (one thread per rank, stopped once)."""
    from twotower import distributed as tdist

    world = tdist.world_size()
    if _running or world < 2 or not train.heartbeat_warn_s or \
            not (os.environ.get("MASTER_ADDR") and os.environ.get("MASTER_PORT")):
        if not _running:  # a run without heartbeats: an earlier run's frozen ranks are not its own
            _last.clear()
        yield
        return
    store_s = max(beat_interval(train.heartbeat_warn_s), 5.0)  # how long one store call may block
    beat = Heartbeat(tdist.rank(), world, train.heartbeat_warn_s, train.dist_timeout_s,
                     connect=lambda: _launcher_store(store_s))
    _running.append(beat)
    _last[:] = [beat]
    try:
        beat.start()
        yield
    finally:
        _running.remove(beat)
        # until the thread is out of its store call: a daemon thread coming back from one (C++, the GIL let go) while
        # the interpreter shuts down aborts the process ("terminate called without an active exception", status -6
        # under torchrun, which then stops every other rank); a call that stalls ends by its timeout, then the loop
        beat.stop(wait_s=2 * store_s + 5.0)
