"""Where a training step's time goes, thread by thread: CPU, run-queue wait, sleep and context switches a step.

A recommender step on one torch thread runs on three Python threads (training/epoch.py): the step's own, the
side thread (the item tower's backward, half of the loss's rows, the weight average) and the prefetch thread
(the next batches and their plans). They share one interpreter lock, and on a virtual machine every hand-over
of it to a thread on the other core is a sleep and a wake-up. This script trains the issue-11 command

    twotower train --train TRAIN --out TMP train.seed=0 train.threads=THREADS model.item_item.enabled=false
        train.diagnostics=false train.max_examples_per_epoch=EXAMPLES train.epochs=2*ROUNDS [--set ...]

in one process and reads ``/proc/self/task/<tid>/schedstat`` and ``status`` of each thread around each epoch's
steps. Epochs alternate between the batches' plans built on the prefetch thread, as training builds them
(``ahead``: a chunk of batches a call, training/plan_chunk.py), and either every plan of the epoch built before its
first step (``--against first``, the default: the same plans, nothing beside the steps but the side thread) or the
plans built on the prefetch thread one batch a call (``--against single``: the same plans, in more and smaller
pieces), so the two columns are minutes apart and their ratio is one machine state's::

    python bench/step_threads.py --train SPLIT/train.csv --rounds 4
    python bench/step_threads.py --train SPLIT/train.csv --rounds 8 --against single

``SPLIT`` comes from ``twotower data split --input ../shared/data/ml-1m/ml-1m.txt --method leave_last --n 1``
(MovieLens-1M in SASRec's format, ``../shared/data/ml-1m/SOURCE.md``). Linux only (it reads ``/proc``).
The ``first`` epochs hold every plan of the epoch in memory (~1.5 MB a batch of 512 on ML-1M).
"""
from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import refuse_below  # noqa: E402

MODES = ("ahead", "first", "single")


def thread_stats(tid: int) -> tuple[float, float, int, int]:
    """``(CPU ms, run-queue wait ms, voluntary switches, involuntary switches)`` of thread ``tid`` so far."""
    run_ns, wait_ns, _ = Path(f"/proc/self/task/{tid}/schedstat").read_text().split()
    status = Path(f"/proc/self/task/{tid}/status").read_text()
    vol = int(re.search(r"^voluntary_ctxt_switches:\s*(\d+)", status, re.M)[1])  # type: ignore[index]
    invol = int(re.search(r"^nonvoluntary_ctxt_switches:\s*(\d+)", status, re.M)[1])  # type: ignore[index]
    return int(run_ns) / 1e6, int(wait_ns) / 1e6, vol, invol


class Recorder:
    """Per epoch and thread role: CPU, wait and switches over the thread's part of the epoch; the steps' wall time."""

    def __init__(self) -> None:
        self.mode = MODES[0]
        self.rows: list[dict[str, Any]] = []  # one per epoch
        self._epoch: dict[str, Any] = {}

    def span(self, role: str, fn: Any, *args: Any) -> Any:
        """``fn(*args)`` on this thread, its ``thread_stats`` difference kept under ``role`` for this epoch."""
        tid = threading.get_native_id()
        before = thread_stats(tid)
        t0 = time.perf_counter()
        try:
            return fn(*args)
        finally:
            after = thread_stats(tid)
            self._epoch[role] = tuple(b - a for a, b in zip(before, after))
            if role == "main":
                self._epoch["wall_ms"] = 1000 * (time.perf_counter() - t0)

    def end_epoch(self) -> None:
        """After the epoch's threads ended (the side thread outlives the steps by its last jobs)."""
        self.rows.append({"mode": self.mode, **self._epoch})
        self._epoch = {}


def install(rec: Recorder) -> None:
    """Wrap the epoch's steps and its helper threads' bodies to record them, and let ``rec.mode`` say where the
    epoch's plans are built."""
    import twotower.training.epoch as epoch

    chunk_size = epoch.chunk_size
    epoch.chunk_size = lambda n_items: 1 if rec.mode == "single" else chunk_size(n_items)
    import twotower.training.prefetch as prefetch
    import twotower.training.side_worker as side_worker

    steps, produce, work = epoch._steps, prefetch.Prefetcher._produce, side_worker.SideWorker._work
    enter, iterate, leave = prefetch.Prefetcher.__enter__, prefetch.Prefetcher.__iter__, prefetch.Prefetcher.__exit__

    def _steps(tr: Any, run: Any, ready: Any, pool: Any) -> Any:
        out = rec.span("main", steps, tr, run, ready, pool)
        rec._epoch["steps"] = run.batches
        return out

    def _enter(self: Any) -> Any:
        if rec.mode == "first":  # every plan built here, in order, before the first step: no prefetch thread
            self._planned = [self._make(item) for item in self._items]
            return self
        self._planned = None
        return enter(self)

    def _iter(self: Any) -> Iterator[Any]:
        return iter(self._planned) if self._planned is not None else iterate(self)

    def _leave(self: Any, *exc: object) -> Any:
        return None if self._planned is not None else leave(self, *exc)

    epoch._steps = _steps
    prefetch.Prefetcher._produce = lambda self: rec.span("prefetch", produce, self)
    side_worker.SideWorker._work = lambda self: rec.span("side", work, self)
    prefetch.Prefetcher.__enter__, prefetch.Prefetcher.__iter__ = _enter, _iter
    prefetch.Prefetcher.__exit__ = _leave


def alternate_modes(rec: Recorder, against: str = "first") -> None:
    """Odd epochs ``ahead``, even epochs ``against`` (``first`` or ``single``)."""
    import twotower.training.trainer as trainer

    train_epoch = trainer.train_epoch

    def _train_epoch(tr: Any, epoch: int) -> Any:
        rec.mode = "ahead" if epoch % 2 else against
        out = train_epoch(tr, epoch)
        rec.end_epoch()
        return out

    trainer.train_epoch = _train_epoch


def table(rows: list[dict[str, Any]]) -> str:
    """Medians over the epochs of each mode, per step; then the paired ratio of the steps' wall time."""
    by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by[row["mode"]].append(row)
    lines = ["| plans | thread | CPU ms/step | run-queue wait ms/step | asleep ms/step | voluntary switches/step "
             "| involuntary switches/step |", "|---|---|---:|---:|---:|---:|---:|"]
    for mode in MODES:
        epochs = by.get(mode, [])
        if not epochs:
            continue
        wall = statistics.median(r["wall_ms"] / r["steps"] for r in epochs)
        lines.append(f"| {mode} | (steps' wall time) | {wall:.2f} | | | | |")
        for role in ("main", "side", "prefetch"):
            have = [r for r in epochs if role in r]
            if not have:
                continue
            cpu, wait, vol, invol = (statistics.median(r[role][i] / r["steps"] for r in have) for i in range(4))
            asleep = f"{wall - cpu - wait:.2f}" if role == "main" else ""
            lines.append(f"| {mode} | {role} | {cpu:.2f} | {wait:.2f} | {asleep} | {vol:.1f} | {invol:.2f} |")
    against = next((m for m in MODES[1:] if by.get(m)), "first")
    pairs = [b["wall_ms"] / b["steps"] / (a["wall_ms"] / a["steps"])
             for a, b in zip(by.get("ahead", []), by.get(against, []))]
    if pairs:
        lines.append("")
        lines.append(f"steps' wall time, {against} / ahead, epoch by epoch: {' '.join(f'{p:.3f}' for p in pairs)} "
                     f"(median {statistics.median(pairs):.3f})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", required=True, help="the interactions to train on (a split's train.csv)")
    ap.add_argument("--rounds", type=int, default=3, help="pairs of epochs (one ahead, one --against)")
    ap.add_argument("--against", choices=MODES[1:], default="first",
                    help="the other epochs' plans: all built before the first step, or one batch a call beside them")
    ap.add_argument("--examples", type=int, default=300_000, help="examples an epoch (train.max_examples_per_epoch)")
    ap.add_argument("--threads", type=int, default=1, help="train.threads (helper threads run only where a core is spare)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="another setting of the command")
    args = ap.parse_args(argv)
    refuse_below(args, ("rounds", "threads"))
    refuse_below(args, ("examples",), 2)
    for pair in args.set:
        if "=" not in pair:
            raise SystemExit(f"error: --set: settings are KEY=VALUE, got {pair!r}")
    if not Path("/proc/self/task").is_dir():
        raise SystemExit("error: this benchmark reads /proc/self/task (Linux); it has none here")
    train = Path(args.train).resolve()
    if not train.is_file():
        raise SystemExit(f"error: --train: no file {train}")
    rec = Recorder()
    install(rec)
    alternate_modes(rec, args.against)
    from twotower.cli.main import main as twotower

    with tempfile.TemporaryDirectory(prefix="twotower-step-threads-") as tmp:
        status = twotower(["-q", "train", "--train", str(train), "--out", str(Path(tmp) / "run"), "train.seed=0",
                           f"train.threads={args.threads}", "model.item_item.enabled=false", "train.diagnostics=false",
                           f"train.max_examples_per_epoch={args.examples}", f"train.epochs={2 * args.rounds}",
                           *args.set])
    if status:
        raise SystemExit(f"error: twotower train exited with status {status}")
    print(table(rec.rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
