"""Training-curve PNG: loss, training accuracy, validation metric, embedding spread."""
from __future__ import annotations

import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

from twotower.training.diagnostics import COLLAPSE_STD
from twotower.utils.atomic import atomic_path
from twotower.utils.run_folder import run_shown

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["curves_title", "plot_training_curves", "training_curves_figure"]

#: What the logged ``inbatch_accuracy`` (the key kept for readers of log.jsonl) measures under each loss kind:
#: the share of rows whose positive scores first among the candidates that loss ranks.
ACCURACY_TITLES = {"inbatch": "in-batch accuracy", "sampled": "accuracy among sampled candidates",
                   "full": "accuracy over the catalogue", "bpr": "pairwise accuracy (positive > its negative)"}

#: The gate panel says what α weighs: "gate α" alone left a reader to guess which head 0.48 favoured
ALPHA_TITLE = "gate α (1 = text head only, 0 = collaborative)"


def plot_training_curves(history: list[dict[str, Any]], path: str | Path, *, metric: str = "NDCG@10",
                         best_epoch: int | None = None, loss_kind: str = "inbatch", stopped: str | None = None,
                         item_item: dict[str, Any] | None = None) -> None:
    """``best_epoch``: the epoch whose weights the run kept, marked on every panel (the curves run on past it
    until early stopping, so the last point is not the model that was saved). ``loss_kind`` (``loss.kind``)
    names the accuracy panel: a BPR run's ~0.9 is positive-over-its-negative, not an in-batch accuracy.
    ``stopped``: what ended the fit before its last epoch ("DIVERGED in epoch 3"), said first in the title.
    ``item_item``: what run.json records of the item-item term fitted after training (its weight and valid metric),
    a point of its own on the valid panel and in the title: the saved model is the towers with it."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = training_curves_figure(history, Path(path).parent, metric=metric, best_epoch=best_epoch, loss_kind=loss_kind,
                                 stopped=stopped, item_item=item_item)
    FigureCanvasAgg(fig)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=90)


def training_curves_figure(history: list[dict[str, Any]], run: Path, *, metric: str = "NDCG@10",
                           best_epoch: int | None = None, loss_kind: str = "inbatch",
                           stopped: str | None = None, item_item: dict[str, Any] | None = None) -> "Figure":
    """The figure :func:`plot_training_curves` writes for the run folder ``run``. matplotlib's object API, not
    pyplot: ``matplotlib.use("Agg")`` switched the backend of the whole process, so a notebook that trained
    through the Python API drew no more figures inline, and pyplot kept each figure until it was closed."""
    from matplotlib.figure import Figure

    epochs = [r["epoch"] for r in history]
    panels = [("loss", "training loss"), ("inbatch_accuracy", ACCURACY_TITLES.get(loss_kind, "training accuracy")), (f"valid_{metric}", f"valid {metric}"), ("item_std", "item embedding std"), ("alpha", ALPHA_TITLE)]
    # a panel with nothing to draw is left out: without validation data the valid panel was an empty box on a
    # made-up -0.04..0.04 axis, and the best epoch (then the lowest training loss) was labelled as if validated
    panels = [(key, title) for key, title in panels if any(key in r for r in history)]
    validated = any(f"valid_{metric}" in r for r in history)
    term = _term_shown(item_item, metric) if validated and best_epoch is not None else None
    from matplotlib.ticker import MaxNLocator

    # one shared epoch axis with whole-epoch ticks: a validation curve (eval_every > 1) lines up with the
    # training curves beside it, and a run of 1-3 epochs is not labelled 0.96, 1.5, 2.5
    fig = Figure(figsize=(4 * len(panels), 3.2))
    grid = fig.subplots(1, len(panels), sharex=True, squeeze=False)
    axes = grid[0]
    axes[0].xaxis.set_major_locator(MaxNLocator(integer=True))
    if len(set(epochs)) == 1:  # one point: the locator would tick the ±0.05 span around it (0.96 ... 1.04)
        axes[0].set_xticks(epochs[:1])
    for ax, (key, title) in zip(axes, panels):
        xs = [e for e, r in zip(epochs, history) if key in r]
        ys = [r[key] for r in history if key in r]
        ax.plot(xs, ys, marker="o", ms=3)
        if best_epoch is not None:
            why = "" if validated else ", lowest training loss"
            saved = "its towers saved" if term else "saved"
            ax.axvline(best_epoch, color="tab:red", ls="--", lw=1, label=f"best epoch {best_epoch} ({saved}{why})")
        if key == f"valid_{metric}" and term:  # what was saved: the best epoch's towers with the term
            ax.plot([best_epoch], [term[1]], marker="*", ms=12, color="tab:green", ls="none",
                    label=f"+ item-item term (weight {term[0]:g}): {term[1]:.4f} (saved)")
        if key == "item_std":  # from 0, against the alarm's line: a 0.1% drift on a zoomed axis looked like a collapse
            line = next((r["collapse_std"] for r in reversed(history) if "collapse_std" in r), COLLAPSE_STD)  # out_dim's
            alarm = ax.axhline(line, color="grey", ls=":", lw=1, label=f"collapse alarm below {line:.3g}")
            ax.set_ylim(bottom=0, top=max(max(ys), line) * 1.15)
            ax.legend(handles=[alarm], loc="best", fontsize="small")
        ax.set_title(title)
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3)
    if best_epoch is not None:  # on the validation panel, where the best epoch was chosen (else the loss panel)
        ax = axes[[key for key, _ in panels].index(f"valid_{metric}") if validated else 0]
        if term:  # the term's point stands above the curve's right end: room for it, and for the legend under the curve
            ys = [r[f"valid_{metric}"] for r in history if f"valid_{metric}" in r] + [term[1]]
            span = (max(ys) - min(ys)) or abs(term[1]) or 1.0
            ax.set_ylim(min(ys) - 0.7 * span, max(ys) + 0.1 * span)
        ax.legend(loc="lower right" if term else "best", fontsize="small")
    # wrapped to the figure's width (about 10 characters an inch at its size): with the item-item term's figure a
    # three-panel run's title ran past both edges
    fig.suptitle(textwrap.fill(curves_title(history, run, metric, best_epoch, stopped, item_item),
                               width=int(10 * fig.get_figwidth()), break_long_words=False))
    fig.tight_layout()
    return fig


def _term_shown(item_item: dict[str, Any] | None, metric: str) -> tuple[float, float] | None:
    """The item-item term's (weight, valid metric) when it was kept (a weight above 0) and chose on ``metric``."""
    if not item_item or not item_item.get("weight") or item_item.get("metric", metric) != metric:
        return None
    return float(item_item["weight"]), float(item_item["valid_metric"])


def curves_title(history: list[dict[str, Any]], run: Path, metric: str, best_epoch: int | None,
                 stopped: str | None = None, item_item: dict[str, Any] | None = None) -> str:
    """The figure's title: which run, and the epoch it kept with its figure, as `train`'s last line says them;
    ``stopped`` (what ended the fit early: "DIVERGED in epoch 3") first, as a diverged run's curves looked finished.

    The PNG had four panel titles and nothing else: opened from a file browser or pasted beside another run's,
    it did not say whose curves they were or what the run kept. A new run into a folder holding an earlier one is
    drawn in its staging folder (``runs/.ml.staging-123-s456``), swapped in as ``runs/ml`` once finished: the title
    names ``runs/ml``, the folder the PNG ends up in.

    With the item-item term (``item_item``, fitted after training) the saved model is the towers and the term: the
    title gives both figures, as `train`'s two summary lines do. It said "best valid NDCG@10 0.1300 (saved)" of a
    run whose saved model validated at 0.1360 with its term."""
    run = run_shown(run)
    n = len({r["epoch"] for r in history})
    done = f"{n} epoch{'' if n == 1 else 's'} run"
    head = f"{run}: {stopped}; " if stopped else f"{run}: "
    best = next((r for r in history if r["epoch"] == best_epoch), None)
    if best is None:
        return f"{head}{done}"
    if f"valid_{metric}" in best:
        towers = best[f"valid_{metric}"]
        if (term := _term_shown(item_item, metric)) is None:
            none = "; the item-item term did not help" if item_item and not item_item.get("weight") else ""
            return f"{head}best valid {metric} {towers:.4f} at epoch {best_epoch} (saved{none}), {done}"
        scored, of = item_item.get("valid_users"), item_item.get("valid_users_of")  # type: ignore[union-attr]
        sample = f" on {scored:,} of the {of:,} validation users" if scored and of and scored < of else ""
        return (f"{head}best valid {metric} at epoch {best_epoch}: towers {towers:.4f}; with the item-item term "
                f"(weight {term[0]:g}) {term[1]:.4f}{sample} (saved), {done}")
    return f"{head}lowest training loss {best['loss']:.4f} at epoch {best_epoch} (saved), {done}"
