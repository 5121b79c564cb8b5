"""A training epoch's progress display: a tqdm bar on a terminal; off a terminal (logs, CI, nohup) a log line every
``every_s`` seconds with examples/s and the epoch's ETA, so a long epoch on a busy machine is never silent."""
from __future__ import annotations

import logging
import sys
import time

from tqdm.auto import tqdm

from twotower.utils.progress import draws_bars

__all__ = ["Progress"]

# the loop's logger, as before the move: `-q` and a logging config that names it keep governing these lines
log = logging.getLogger("twotower.training.loop")
_draws_bars = draws_bars  # moved to utils.progress, where RateLog draws its bar on a terminal too


class Progress:
    """A tqdm bar on a terminal, else a log line every ``every_s`` seconds (examples/s, ETA)."""

    def __init__(self, desc: str, n_batches: int, n_examples: int, *, enabled: bool, every_s: float,
                 unit: str = "examples") -> None:
        self.desc, self.n_batches, self.n_examples = desc, n_batches, n_examples
        self.unit = unit  # what n_examples counts: "sequences" for whole-window training, as its epoch line says
        self.enabled, self.every_s = enabled, every_s
        # the bar follows this module's log level like the lines do: `-q` (warnings, errors and the output only) shows neither
        self.tty = enabled and _draws_bars(sys.stderr) and log.isEnabledFor(logging.INFO)
        self.bar = tqdm(total=n_batches, desc=desc, leave=False, unit="batch", mininterval=0.5) if self.tty else None
        self.t0 = self.last = time.perf_counter()
        self.batches = self.examples = 0

    def update(self, n_examples: int, loss: float) -> None:
        self.batches += 1
        self.examples += n_examples
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(loss=f"{loss:.4f}", refresh=False)
            return
        now = time.perf_counter()
        if self.enabled and now - self.last >= self.every_s:
            self.last = now
            rate = self.examples / max(now - self.t0, 1e-9)
            eta = (self.n_examples - self.examples) / max(rate, 1e-9)
            # two decimals below 10/s: a cross-encoder's 0.8 examples/s read "1 examples/s"
            log.info("%s: batch %d/%d, %.*f %s/s, loss %.4f, ETA %.0fs",
                     self.desc, self.batches, self.n_batches, 0 if rate >= 10 else 2, rate, self.unit, loss, eta)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
