"""Recall-vs-QPS plot of an autotune sweep (matplotlib Agg, written atomically)."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from twotower.utils.atomic import atomic_path
from twotower.utils.plot_style import series_style
from twotower.utils.wording import plural

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from twotower.index.autotune import TuneReport

__all__ = ["plot_recall_qps", "recall_qps_figure"]

#: what the two exact-search QPS figures of the plot measure (both recall 1; the legend gave neither a reason to
#: differ): the exact search served without an index (``ExactIndex``: FAISS's brute-force knn, then every candidate
#: re-scored in float64 and ties settled, so a score does not depend on the batch), and a FAISS Flat index's raw
#: float32 search
EXACT_NOTE = "exact search (batched): ExactIndex,\nas served without an index (float64 re-scoring)"
FLAT_NOTE = " (FAISS IndexFlatIP:\nexact, raw float32 scores)"


def plot_recall_qps(report: "TuneReport", path: str | Path, *, source: str | None = None,
                    threads: int | None = None) -> Path:
    """Write a PNG: one line per index type in sweep order (recall@k on x, batched QPS on a log y axis).

    The target recall is a dashed vertical line, the chosen setting a star and
    the batched exact QPS a dotted horizontal line. ``source`` (``"run runs/ml"``) is named in the title, with
    what was measured: the catalogue's size and dimension, recall@k's k and target, the queries and ``threads``
    (the QPS are those of this many threads; None: not said).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # no pyplot: no global state

    fig = recall_qps_figure(report, source=source, threads=threads)
    FigureCanvasAgg(fig)
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", bbox_inches="tight")
    return path


def recall_qps_figure(report: "TuneReport", *, source: str | None = None, threads: int | None = None) -> "Figure":
    """The figure :func:`plot_recall_qps` writes.

    The legend stands right of the axes: inside them (``loc="best"``) it covered the sweep's points, which fill
    most of the plot, and the star's label read ``chosen Flat {}`` / ``{'nprobe': 4}`` where the table says
    ``nprobe=4``. The star's label carries the chosen recall and says when it misses the target (a missed build's
    plot read like a met one), and the star is gold edged in black: a red star on IVF-PQ's red line (the fourth
    colour) looked like one of that line's settings.
    """
    from matplotlib.figure import Figure

    from twotower.index.autotune import params_text

    fig = Figure(figsize=(9, 4.5), dpi=100)
    ax = fig.add_subplot(1, 1, 1)
    series: dict[str, list[tuple[float, float]]] = {}
    for r in report.rows:
        label = r.factory + (f" k_factor={r.params['k_factor']:g}" if "k_factor" in r.params else "")
        if r.factory == "Flat":  # exact too, beside the exact line: say why their QPS differ
            label += FLAT_NOTE
        series.setdefault(label, []).append((r.recall, r.qps_batch))
    for i, (label, pts) in enumerate(series.items()):  # told apart by marker as well as colour
        ax.plot([p[0] for p in pts], [p[1] for p in pts], markersize=4, label=label, **series_style(i))
    ax.axvline(report.target_recall, linestyle="--", color="grey", label=f"target recall {report.target_recall:g}")
    ax.axhline(report.exact_qps_batch, linestyle=":", color="black", label=EXACT_NOTE)
    chosen = report.chosen
    params = params_text(chosen.params)
    verdict = "" if report.met_target else f", misses the target {report.target_recall:g}"
    ax.plot([chosen.recall], [chosen.qps_batch], marker="*", markersize=16, markerfacecolor="gold",
            markeredgecolor="black", linestyle="none",
            label=f"chosen: {chosen.factory}" + (f" ({params})" if params else "") + f"\nrecall {chosen.recall:.4f}{verdict}")
    ax.set_xlabel(f"recall@{report.k} against exact search")
    ax.set_ylabel("queries / second (batched, log scale)")
    ax.set_yscale("log")
    where = f" for {source}" if source else ""
    # what was measured, as the command's first line says it: bench/index_scale.py's title gave the catalogue alone,
    # not the k and target the recall is of, nor the threads the QPS are of
    on = f", {plural(threads, 'thread')}" if threads else ""
    ax.set_title(f"index settings tried{where}: {report.n:,} vectors, dim {report.dim}\n"
                 f"recall@{report.k} target {report.target_recall:g}, {plural(report.n_queries, 'query', 'queries')}{on}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    fig.tight_layout()
    return fig
