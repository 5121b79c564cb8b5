"""Progress of long loops: a tqdm bar on a terminal, off one a periodic line ``what: done / total unit, rate, ETA``.

Evaluation, baseline tuning, ``recommend --users all`` and text encoding can each
run for minutes; in a redirected log (CI, nohup) they would otherwise be silent
until they end. Training has its own bar-or-line display (``training.progress.Progress``).
"""
from __future__ import annotations

import contextlib
import logging
import os
import threading
import sys
import time
from collections.abc import Iterator
from typing import Any

__all__ = ["RateLog", "colours_allowed", "draws_bars", "heartbeat", "quiet_offline_hub"]


def draws_bars(stream: Any) -> bool:
    """A terminal tqdm can draw on: a terminal that reports 0 columns (``script`` without a terminal, some CI
    runners and ``ssh -t`` sessions) got empty lines from tqdm and no progress lines either, so a long epoch said
    nothing; it gets the log lines."""
    if not stream.isatty():
        return False
    try:
        return os.get_terminal_size(stream.fileno()).columns > 0
    except (AttributeError, OSError, ValueError):  # no descriptor to ask: trust isatty
        return True


def colours_allowed() -> bool | None:
    """False where the user asked for plain text -- ``NO_COLOR`` set to anything but "" (https://no-color.org) or
    ``TERM=dumb`` --, else None: the library colours as it decides (uvicorn: on a terminal). `twotower serve`'s
    uvicorn lines kept their escape codes under both, unreadable on a dumb terminal and in a captured session."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return None


class RateLog:
    """Logs ``what: done / total unit[note], R rate_unit/s, ETA Ts`` at most every ``every_s`` seconds; on a
    terminal (stderr, as the training bar) a tqdm bar instead, closed when ``done`` reaches ``total``.

    ``every_s=None`` is silent (no bar either), and so is a logger below INFO (``-q``). ``rate_unit=None`` leaves
    the rate out (a grid of settings has no useful rate); ``rate_digits`` is its number of decimals. The ETA
    assumes the rate so far holds.
    """

    def __init__(self, logger: logging.Logger, what: str, total: int, unit: str, every_s: float | None, *,
                 rate_unit: str | None = None, rate_digits: int = 0) -> None:
        self.logger, self.what, self.total, self.unit, self.every_s = logger, what, total, unit, every_s
        self.rate_unit, self.rate_digits = rate_unit, rate_digits
        self.t0 = self.last = time.perf_counter()
        self.done, self.note = 0, ""
        self._lock = threading.Lock()
        self.bar: Any = None
        if every_s is not None and logger.isEnabledFor(logging.INFO) and draws_bars(sys.stderr):
            from tqdm.auto import tqdm  # noqa: PLC0415 - only on a terminal

            self.bar = tqdm(total=total, desc=what, unit=rate_unit or unit, leave=False, mininterval=0.5)

    def update(self, done: int, note: str = "") -> None:
        """``done`` of ``total`` finished; ``note`` goes after the count (e.g. the last setting's metric)."""
        if self.bar is not None:
            self.bar.update(done - self.bar.n)
            if note:
                self.bar.set_postfix_str(note.lstrip(" ,;"), refresh=False)
            if done >= self.total:
                self.bar.close()
            return
        self.done, self.note = done, note
        self._line_if_due()

    def close(self) -> None:
        """Take the bar down where the count stopped short of an estimated total (a file's lines, of which blank
        ones hold no row): ``update`` closes it only on reaching the total."""
        if self.bar is not None:
            self.bar.close()

    def grow(self, more: int = 1) -> None:
        """``more`` steps beyond the total announced (a grid extended while it runs): "7 / 6 tried, ETA -0s" was
        said of ItemKNN's k grid, extended downwards after its 6 settings."""
        with self._lock:
            self.total += more
        if self.bar is not None:
            self.bar.total = self.total
            self.bar.refresh()

    def _line_if_due(self) -> None:
        with self._lock:
            now = time.perf_counter()
            if self.every_s is None or now - self.last < self.every_s:
                return
            self.last = now
            done, note = self.done, self.note
            if done == 0:  # a first step still running (between_updates): no rate yet, so no ETA
                self.logger.info("%s: 0 / %d %s%s, %.0fs so far", self.what, self.total, self.unit, note, now - self.t0)
                return
            rate = done / max(now - self.t0, 1e-9)
            speed = f", {rate:.{self.rate_digits}f} {self.rate_unit}/s" if self.rate_unit else ""
            self.logger.info("%s: %d / %d %s%s%s, ETA %.0fs", self.what, done, self.total, self.unit, note, speed,
                             (self.total - done) / max(rate, 1e-9))

    @contextlib.contextmanager
    def between_updates(self) -> Iterator["RateLog"]:
        """Off a terminal, also log the line (with the count so far) when ``every_s`` passes without an update while
        the block runs: for steps that can each outlast the interval in a call that releases the GIL, such as
        FAISS's add of a 131,072-vector chunk to an HNSW graph (about 25 s on one thread at 5,000 vectors/s, so a
        line came after two chunks: 50 s of silence against a promised 30)."""
        if self.bar is not None or self.every_s is None or not self.logger.isEnabledFor(logging.INFO):
            yield self
            return
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(max(self.last + self.every_s - time.perf_counter(), 0.001)):  # type: ignore[operator]
                self._line_if_due()

        thread = threading.Thread(target=beat, name="twotower-ratelog", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            thread.join()


@contextlib.contextmanager
def heartbeat(logger: logging.Logger, what: str, every_s: float | None) -> Iterator[None]:
    """Log ``what: still running, Ns so far`` every ``every_s`` seconds while the block runs (None: silent).

    For one long call that reports nothing itself and releases the GIL, such as FAISS's k-means training of an
    IVF index (minutes at 1M items, with no line between "training ..." and "trained ..."). A daemon thread
    logs, so the block itself is untouched.
    """
    if every_s is None:
        yield
        return
    done = threading.Event()
    t0 = time.perf_counter()

    def beat() -> None:
        while not done.wait(every_s):
            logger.info("%s: still running, %.0fs so far", what, time.perf_counter() - t0)

    thread = threading.Thread(target=beat, name="twotower-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


@contextlib.contextmanager
def quiet_offline_hub() -> Iterator[None]:
    """The Hugging Face Hub offline and its tqdm bars ("Loading weights", "Writing model shards") off for the block,
    both as the caller had them after; also a decorator. Around every sentence-transformers / transformers model load
    or save: the text encoder, the bi-encoder and the cross-encoder.

    Offline: a model name loads from the local cache only, and sentence-transformers' model card looks nothing up.
    Bars: off a terminal they are carriage-return lines in a log file; our own progress is :class:`RateLog` lines.
    For the block only: ``HF_HUB_OFFLINE=1`` and ``HF_HUB_DISABLE_PROGRESS_BARS=1`` set in ``os.environ`` for good
    made the host's own downloads fail offline afterwards, and its child processes inherited them. huggingface_hub
    reads both variables once, at its import, so the block sets what it read (imported first, under the caller's
    environment), never the variables; a caller that set a variable keeps its own setting.
    """
    try:
        import huggingface_hub.constants as hub  # noqa: PLC0415
        from huggingface_hub import utils as hub_utils  # noqa: PLC0415
        from transformers.utils import logging as hf_logging  # noqa: PLC0415
    except ImportError:  # pragma: no cover - both come with sentence-transformers
        yield
        return
    offline = hub.HF_HUB_OFFLINE
    set_offline = not (os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE"))
    # the caller's own HF_HUB_DISABLE_PROGRESS_BARS (read at the hub's import) rules the bars, ours or not
    hub_bars = hub.HF_HUB_DISABLE_PROGRESS_BARS is None and not hub_utils.are_progress_bars_disabled()
    hf_bars = hub.HF_HUB_DISABLE_PROGRESS_BARS is None and hf_logging.is_progress_bar_enabled()
    if set_offline:
        hub.HF_HUB_OFFLINE = True
    if hub_bars:
        hub_utils.disable_progress_bars()
    if hf_bars:
        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hub.HF_HUB_OFFLINE = offline
        if hub_bars:
            hub_utils.enable_progress_bars()
        if hf_bars:
            hf_logging.enable_progress_bar()
