"""Choosing between trained models on the validation split, never on test.

A benchmark that trains several towers on one dataset has to say which of them a user of that
dataset should take. Reading it off the test table is the classic leak (the choice then fits the
test set); :func:`choose_on_validation` makes the choice from validation figures only, so the
test row of the chosen model is an honest estimate. The benchmarks (``bench/ml1m.py``,
``bench/movielens100k.py``) print its :meth:`Choice.text` under their tables.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from twotower.errors import ConfigError

__all__ = ["Choice", "choose_on_validation"]


@dataclass(frozen=True)
class Choice:
    """The model chosen on validation and what it was chosen over.

    ``value`` is the chosen model's mean validation figure over its seeds, ``runner_up`` the
    next best (None with one candidate). ``within_noise`` is True when several seeds were run
    and the lead is smaller than the larger of the two seed standard deviations: the order
    could flip with other seeds.
    """

    name: str
    metric: str
    value: float
    seeds: int
    runner_up: str | None = None
    runner_up_value: float | None = None
    within_noise: bool = False

    @property
    def lead(self) -> float | None:
        """Relative lead over the runner-up (0.05 = 5% higher), None without one."""
        if self.runner_up_value is None or self.runner_up_value <= 0:
            return None
        return self.value / self.runner_up_value - 1.0

    def text(self) -> str:
        """One line for a report: what was chosen, on what, by how much."""
        head = f"chosen on validation {self.metric}: {self.name} ({self.value:.4f}"
        head += f", mean of {self.seeds} seeds)" if self.seeds > 1 else ")"
        if self.runner_up is None:
            return head + ", the only candidate"
        lead = self.lead
        by = f" by {100 * lead:.1f}%" if lead is not None else ""
        tail = f" ahead of {self.runner_up} ({self.runner_up_value:.4f}){by}"
        if self.within_noise:
            tail += " -- within seed noise"
        return head + tail


def _finite(name: str, raw: Any) -> list[float]:
    """The finite figures of candidate ``name``: one number, or one per seed (a list, tuple or 1-D array)."""
    values = list(np.ravel(raw)) if isinstance(raw, (Sequence, np.ndarray)) and not isinstance(raw, str) else [raw]
    for v in values:
        # a string was read character by character ("could not convert string to float: '.'"), an array by
        # float() ("only 0-dimensional arrays can be converted to Python scalars")
        if v is not None and (isinstance(v, (bool, np.bool_)) or not isinstance(v, (numbers.Real, np.number))):
            raise ConfigError(f"candidates[{name!r}]: a validation figure or one per seed (numbers), got {raw!r}")
    return [float(v) for v in values if v is not None and math.isfinite(float(v))]


def _sd(values: list[float]) -> float:
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def choose_on_validation(candidates: Mapping[str, Sequence[float | None] | float | None],
                         metric: str = "NDCG@10") -> Choice:
    """The candidate with the highest mean validation figure.

    ``candidates`` maps a model name to its validation figure, or to one figure per seed.
    Missing and non-finite figures are ignored; a candidate with none left is not eligible.
    Ties go to the candidate listed first, so list the simpler or cheaper model first (a
    benchmark lists the default tower before the heavier ones).
    Raises ValueError when no candidate has a finite figure, and ConfigError (a ValueError too) when
    ``candidates`` is not such a mapping or a figure is not a number.
    """
    if not isinstance(candidates, Mapping):  # e.g. evaluate_run's rows: "'list' object has no attribute 'items'"
        raise ConfigError(f"candidates maps each model name to its validation figure(s), e.g. "
                          f"{{row['model']: row[{metric!r}] for row in rows}}; got a {type(candidates).__name__}")
    scored: list[tuple[str, float, int, float]] = []  # name, mean, seeds, sd
    for name, raw in candidates.items():
        values = _finite(name, raw)
        if values:
            scored.append((name, sum(values) / len(values), len(values), _sd(values)))
    if not scored:
        raise ValueError(f"no candidate has a finite validation {metric}: {', '.join(candidates) or 'none given'}")
    # stable sort: equal means keep the caller's order
    ranked = sorted(scored, key=lambda s: -s[1])
    best = ranked[0]
    if len(ranked) == 1:
        return Choice(best[0], metric, best[1], best[2])
    second = ranked[1]
    noise = max(best[3], second[3])
    return Choice(best[0], metric, best[1], best[2], runner_up=second[0], runner_up_value=second[1],
                  within_noise=noise > 0 and best[1] - second[1] < noise)
