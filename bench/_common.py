"""Helpers shared by the benchmark scripts (not part of the package)."""
from __future__ import annotations

import logging
import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import psutil


# FAISS's loader says at INFO that it could not load its AVX512 build before it loads another: the scripts that log at
# INFO printed two such lines before even a one-line argument error (the twotower CLI keeps them quiet too)
logging.getLogger("faiss.loader").setLevel(logging.WARNING)


class PeakRSS:
    """Samples this process's RSS in a thread; ``peak_mb`` after the block."""

    def __init__(self, interval: float = 0.05) -> None:
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._proc = psutil.Process(os.getpid())

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._proc.memory_info().rss)
            time.sleep(self.interval)

    def __enter__(self) -> "PeakRSS":
        self.peak = self._proc.memory_info().rss
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, self._proc.memory_info().rss)

    @property
    def peak_mb(self) -> float:
        return self.peak / 2**20


def check_json_out(path: str | os.PathLike[str] | None, flag: str = "--json") -> Path | None:
    """``--json`` checked before any work: a folder or an unwritable path is one line now, not a traceback
    once the benchmark has run to its end (and its results are lost)."""
    if path is None:
        return None
    from twotower.cli.paths import check_output_file
    from twotower.errors import ConfigError

    try:
        return check_output_file(path, flag)
    except ConfigError as e:
        raise SystemExit(f"error: {e}") from None


def number_refusal(flag: str, value: float, lo: float | None = None, hi: float | None = None, *,
                   lo_open: bool = False, hi_open: bool = False) -> str | None:
    """``--k: must be at least 1, got 0``: a number flag out of its range, in the words of the twotower CLI
    (:func:`twotower.pipeline.refusals.range_refusal`, in which NaN lies in no range); None inside it. NaN and
    infinity are refused too where the range has no bound to say it by (``must be a finite number, got inf``):
    ``--target nan`` passed every comparison and the benchmark ran on it."""
    import math

    from twotower.pipeline.refusals import number_words, range_refusal

    said = range_refusal(value, lo, hi, lo_open=lo_open, hi_open=hi_open)
    if said is None and not math.isfinite(value):
        said = f"must be a finite number, got {number_words(value)}"
    return None if said is None else f"{flag}: {said}"


def int_list(flag: str, text: str, lo: int, *, what: str = "number") -> list[int]:
    """``--seeds 0,1,2`` / ``--worlds 1,2``: a comma list of integers of at least ``lo``, one or more, refused in the
    one line of every bench flag (``error: --worlds: must be at least 1, got 0``)."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise SystemExit(f"error: {flag}: expected a comma list of integers like 1,2, got {text!r}") from None
    if not values:
        raise SystemExit(f"error: {flag}: names no {what}, got {text!r}")
    for value in values:
        if (said := number_refusal(flag, value, lo)) is not None:
            raise SystemExit(f"error: {said}")
    return values


def refuse_below(args: object, names: tuple[str, ...], lo: float = 1, *, lo_open: bool = False) -> None:
    """Each flag of ``names`` (argparse dests) below ``lo`` (at or below it: ``lo_open``) refused in one line."""
    for name in names:
        refuse_range(args, name, lo, lo_open=lo_open)


def refuse_range(args: object, name: str, lo: float | None = None, hi: float | None = None, *,
                 lo_open: bool = False, hi_open: bool = False) -> None:
    """The flag of argparse dest ``name`` refused in one line (``error: --target: must be more than 0 and at most 1,
    got nan``) when it lies outside its range or is not finite; a flag not given (None) passes."""
    value = getattr(args, name)
    if value is None:
        return
    said = number_refusal("--" + name.replace("_", "-"), value, lo, hi, lo_open=lo_open, hi_open=hi_open)
    if said is not None:
        raise SystemExit(f"error: {said}")


def check_run(path: str | os.PathLike[str] | None, flag: str = "--run") -> None:
    """``--run`` loaded once before any work: a wrong folder is one line, not a traceback (for the serving
    benchmarks, from the server's start-up)."""
    if path is None:
        return
    from twotower.errors import TwoTowerError
    from twotower.pipeline.artifacts import TrainedRun

    try:
        TrainedRun.load(path)
    except TwoTowerError as e:
        raise SystemExit(f"error: {flag} {path}: {e}") from None


def write_json_out(path: str | os.PathLike[str], text: str) -> None:
    """Atomically (temp file + rename; ``-`` is standard output): an interrupted write never leaves half a
    results file in place of an earlier one."""
    from twotower.cli.paths import write_output_text

    write_output_text(path, text)


@contextmanager
def timed() -> Iterator[dict]:
    out: dict = {}
    t0 = time.perf_counter()
    yield out
    out["seconds"] = time.perf_counter() - t0


def train_synthetic_run(folder: Path, *, users: int, items: int, per_user: int, tastes: int = 0,
                        epochs: int = 1, extra: tuple[str, ...] = ()) -> Path:
    """A seeded synthetic run for the serving benchmarks: ``users`` x ``per_user`` distinct items out of
    ``items``, a recency-pooled user tower (no user ids, so any history can be served).

    With ``tastes`` > 0 the items fall into that many equal groups and each user draws 80% of their items
    from one group (the rest at random), so the trained user vectors point in as many directions as a
    real model's do; uniform random histories (``tastes=0``) train user vectors that all point the same
    way (mean pairwise cosine ~0.998), which makes a load of "different users" one repeated query.
    """
    import json

    import numpy as np
    import pandas as pd

    from twotower.config import load_config
    from twotower.pipeline.run import train_run

    rng = np.random.default_rng(0)
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for u in range(users):
        if tastes:
            group = np.arange(items)[u % tastes :: tastes]
            own = rng.choice(group, min(len(group), int(0.8 * per_user)), replace=False)
            rest = rng.choice(np.setdiff1d(np.arange(items), own), per_user - len(own), replace=False)
            picks = rng.permutation(np.concatenate([own, rest]))
        else:
            picks = rng.choice(items, per_user, replace=False)
        rows += [(f"u{u}", f"i{j}", t) for t, j in enumerate(picks)]
    pd.DataFrame(rows, columns=["user_id", "item_id", "timestamp"]).to_csv(folder / "inter.csv", index=False)
    overrides = [f"data.path={json.dumps(str(folder / 'inter.csv'))}", "data.rating_col=null",
                 f"train.epochs={epochs}", "train.progress=false", "train.threads=1", "model.user.use_id=false",
                 'model.user.history="recency"', "eval.baselines=[]", *extra]
    train_run(load_config(overrides=overrides), folder / "run")
    return folder / "run"
