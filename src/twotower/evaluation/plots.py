"""Metric-vs-k plots (PNG) for comparing models.

Uses matplotlib's object API with the Agg canvas, so no GUI backend and no
global pyplot state are touched; matplotlib is imported only when plotting.
"""
from __future__ import annotations

import os
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from twotower.errors import ConfigError
from twotower.utils.atomic import atomic_path
from twotower.utils.plot_style import COLOURS, series_style

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot_recall_at_k", "recall_at_k_figure", "results_figure"]


def _series(metrics: Mapping[str, float], metric: str) -> tuple[list[int], list[float]]:
    """``(ks, values)`` of every ``"{metric}@k"`` key, sorted by k."""
    points = []
    prefix = f"{metric}@"
    for key, value in metrics.items():
        if key.startswith(prefix) and key[len(prefix) :].isdigit():
            points.append((int(key[len(prefix) :]), float(value)))
    points.sort()
    return [k for k, _ in points], [v for _, v in points]


def plot_recall_at_k(
    results: Mapping[str, Mapping[str, float]],
    path: str | os.PathLike[str],
    metric: str = "Recall",
    *,
    title: str | None = None,
) -> Path:
    """Plot ``metric@k`` against ``k`` for each model and write a PNG to ``path`` atomically.

    ``results`` maps a model name to its :func:`~twotower.evaluation.evaluate`
    output (e.g. ``{"EASE": {"Recall@10": 0.2, "Recall@20": 0.3}}``). Any
    per-``k`` metric name works (``"NDCG"``, ``"HitRate"``...). Returns the path.
    """
    fig = results_figure(results, metric, title=title)
    target = Path(path)
    with atomic_path(target) as tmp:
        fig.savefig(tmp, format="png")
    return target


def results_figure(results: Mapping[str, Mapping[str, float]], metric: str = "Recall", *,
                   title: str | None = None) -> "Figure":
    """The figure :func:`plot_recall_at_k` saves (on an Agg canvas), for a caller that writes the PNG itself
    (``evaluate --plot`` writes it with its record); refused as there when no result holds ``metric@k``."""
    series = {name: _series(m, metric) for name, m in results.items()}
    series = {name: s for name, s in series.items() if s[0]}
    if not series:
        found = sorted({key.split("@")[0] for m in results.values() for key in m if "@" in key})
        raise ConfigError(f"no results hold {metric}@k values; metrics present: {found or 'none'}")

    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = recall_at_k_figure(series, metric, title=title)
    FigureCanvasAgg(fig)
    return fig


def recall_at_k_figure(series: Mapping[str, tuple[list[int], list[float]]], metric: str, *,
                       title: str | None = None) -> "Figure":
    """The figure :func:`plot_recall_at_k` writes, from each model's ``(ks, values)``.

    At a single k (``evaluate --ks 10``) the models are bars with their values written on them: as points over
    one x they stacked, and EASE's 0.1044 disappeared under ItemKNN's 0.1047.
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.0, 4.0), dpi=100)
    ax = fig.add_subplot(1, 1, 1)
    all_ks = sorted({k for ks, _ in series.values() for k in ks})
    if len(all_ks) == 1:
        names = list(series)
        values = [series[name][1][0] for name in names]
        bars = ax.bar(range(len(names)), values, color=[COLOURS[i % len(COLOURS)] for i in range(len(names))])
        ax.bar_label(bars, labels=[f"{v:.4f}" for v in values], padding=2)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names)
        ax.set_ylim(0, max(values) * 1.15 if max(values) > 0 else 1.0)
        ax.set_xlabel(f"model (k={all_ks[0]})")
        ax.set_ylabel(f"{metric}@{all_ks[0]}")
        ax.grid(True, axis="y", alpha=0.3)
    else:
        for i, (name, (ks, values)) in enumerate(series.items()):  # told apart by marker as well as colour
            ax.plot(ks, values, label=name, **series_style(i))
        if all_ks[-1] / all_ks[0] >= 10:
            ax.set_xscale("log")
        ax.set_xticks(all_ks)
        ax.set_xticklabels([str(k) for k in all_ks])
        ax.set_xlabel("k")
        ax.set_ylabel(f"{metric}@k")
        ax.grid(True, alpha=0.3)
        ax.legend()
    # wrapped to the 6-inch figure: a run's path in the title ran past both edges ("...run /tmp/walk7/dem")
    ax.set_title(textwrap.fill(title if title is not None else f"{metric}@k", 62), fontsize=10)
    fig.tight_layout()
    return fig
