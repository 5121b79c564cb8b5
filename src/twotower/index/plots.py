"""Recall-vs-QPS plot of an autotune sweep (matplotlib Agg, written atomically)."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from twotower.utils.atomic import atomic_path

if TYPE_CHECKING:
    from twotower.index.autotune import TuneReport

__all__ = ["plot_recall_qps"]


def plot_recall_qps(report: "TuneReport", path: str | Path) -> Path:
    """Write a PNG: one line per index type in sweep order (recall@k on x, batched QPS on a log y axis).

    The target recall is a dashed vertical line, the chosen setting a star and
    the batched exact QPS a dotted horizontal line.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # no pyplot: no global state
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    series: dict[str, list[tuple[float, float]]] = {}
    for r in report.rows:
        label = r.factory + (f" k_factor={r.params['k_factor']:g}" if "k_factor" in r.params else "")
        series.setdefault(label, []).append((r.recall, r.qps_batch))
    for label, pts in series.items():
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=3, label=label)
    ax.axvline(report.target_recall, linestyle="--", color="grey", label=f"target {report.target_recall:g}")
    ax.axhline(report.exact_qps_batch, linestyle=":", color="black", label="exact (batched)")
    ax.plot([report.chosen.recall], [report.chosen.qps_batch], marker="*", markersize=14, color="red",
            linestyle="none", label=f"chosen {report.chosen.factory} {report.chosen.params}")
    ax.set_xlabel(f"recall@{report.k} vs exact")
    ax.set_ylabel("queries / second (batched)")
    ax.set_yscale("log")
    ax.set_title(f"{report.n:,} vectors, dim {report.dim}, {report.n_queries} queries")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")
    return path
