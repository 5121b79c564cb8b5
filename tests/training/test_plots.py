"""curves.png: every panel on the same whole-epoch axis."""
from __future__ import annotations

from pathlib import Path

import pytest

import twotower.training.plots as plots
from twotower.training.plots import plot_training_curves


def _capture(monkeypatch: pytest.MonkeyPatch) -> list:
    """The figures plot_training_curves draws, as it draws them."""
    figs: list = []
    build = plots.training_curves_figure
    monkeypatch.setattr(plots, "training_curves_figure", lambda *a, **k: figs.append(build(*a, **k)) or figs[-1])
    return figs


def _figure(monkeypatch: pytest.MonkeyPatch, history: list[dict], path: Path):
    figs = _capture(monkeypatch)
    plot_training_curves(history, path)
    assert path.stat().st_size > 0
    return figs[0]


def test_validation_every_other_epoch_shares_the_epoch_axis(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    history = [{"epoch": e, "loss": 6.0 - 0.1 * e, "inbatch_accuracy": 0.01 * e, "item_std": 0.02,
                **({"valid_NDCG@10": 0.1 + 0.01 * e} if e % 2 == 0 else {})} for e in range(1, 7)]
    fig = _figure(monkeypatch, history, tmp_path / "curves.png")
    limits = {ax.get_xlim() for ax in fig.axes}
    assert len(limits) == 1  # the valid panel (epochs 2, 4, 6) is drawn against the same epochs as the loss


@pytest.mark.parametrize("epochs", [1, 2, 3])
def test_short_runs_get_whole_epoch_ticks(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, epochs: int) -> None:
    history = [{"epoch": e, "loss": 6.0 - 0.1 * e, "inbatch_accuracy": 0.01, "item_std": 0.02, "valid_NDCG@10": 0.1}
               for e in range(1, epochs + 1)]
    fig = _figure(monkeypatch, history, tmp_path / "curves.png")
    for ax in fig.axes:
        lo, hi = ax.get_xlim()
        ticks = [t for t in ax.get_xticks() if lo <= t <= hi]
        assert ticks and all(float(t).is_integer() for t in ticks), ticks


def test_the_best_epoch_is_marked_on_every_panel(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # the curves run on past the best epoch until early stopping; the saved weights are the best epoch's, and the
    # plot did not say which epoch that was
    history = [{"epoch": e, "loss": 6.0 - 0.1 * e, "inbatch_accuracy": 0.01 * e, "item_std": 0.02,
                "valid_NDCG@10": 0.1 + 0.01 * min(e, 3) - 0.001 * max(e - 3, 0)} for e in range(1, 7)]
    figs = _capture(monkeypatch)
    plot_training_curves(history, tmp_path / "curves.png", best_epoch=3)
    for ax in figs[0].axes:
        assert any(list(line.get_xdata()) == [3, 3] for line in ax.get_lines()), ax.get_title()
    legends = [ax.get_legend() for ax in figs[0].axes if ax.get_legend() is not None]
    assert [t.get_text() for t in legends[0].get_texts()] == ["best epoch 3 (saved)"]


@pytest.mark.parametrize(("kind", "title"), [("inbatch", "in-batch accuracy"),
                                             ("bpr", "pairwise accuracy (positive > its negative)"),
                                             ("full", "accuracy over the catalogue")])
def test_the_accuracy_panel_says_what_the_runs_loss_measures(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                              kind: str, title: str) -> None:
    """A BPR run's curves.png showed its positive-over-one-negative rate (~0.9) under "in-batch accuracy"."""
    from twotower.config import EvalConfig, LossConfig, TrainConfig
    from twotower.training.trainer import Trainer

    from tests.training.tiny_trainer import tiny_mean_model

    figs = _capture(monkeypatch)
    _, _, seqs, model = tiny_mean_model()
    Trainer(model, seqs, loss=LossConfig(kind=kind), eval=EvalConfig(baselines=()), out_dir=tmp_path,
            train=TrainConfig(epochs=1, batch_size=8, progress=False, checkpoint=False)).fit()
    assert (tmp_path / "curves.png").stat().st_size > 0
    assert figs[0].axes[1].get_title() == title


def test_a_run_without_validation_has_no_empty_valid_panel(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`train` without --valid drew an empty "valid NDCG@10" box on a made-up -0.04..0.04 axis, and labelled the
    epoch of the lowest training loss "best epoch 3 (saved)" on it, as if validation had chosen it."""
    history = [{"epoch": e, "loss": 6.0 - 0.3 * e, "inbatch_accuracy": 0.01 * e, "item_std": 0.02} for e in (1, 2, 3)]
    figs = _capture(monkeypatch)
    plot_training_curves(history, tmp_path / "curves.png", best_epoch=3)
    axes = figs[0].axes
    assert [ax.get_title() for ax in axes] == ["training loss", "in-batch accuracy", "item embedding std"]
    assert all(ax.get_lines()[0].get_xdata().tolist() == [1, 2, 3] for ax in axes)
    legend = axes[0].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["best epoch 3 (saved, lowest training loss)"]


@pytest.mark.parametrize(("valid", "title"), [
    (True, "r1: best valid NDCG@10 0.1300 at epoch 3 (saved), 5 epochs run"),
    (False, "r1: lowest training loss 5.1000 at epoch 3 (saved), 5 epochs run")])
def test_the_figure_names_its_run_and_the_epoch_it_kept(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                         valid: bool, title: str) -> None:
    """curves.png had panel titles only: pasted beside another run's, nothing said whose curves they were."""
    history = [{"epoch": e, "loss": 5.4 - 0.1 * min(e, 3), "inbatch_accuracy": 0.01, "item_std": 0.02,
                **({"valid_NDCG@10": 0.1 + 0.01 * min(e, 3) - 0.001 * max(e - 3, 0)} if valid else {})}
               for e in range(1, 6)]
    (tmp_path / "r1").mkdir()
    figs = _capture(monkeypatch)
    monkeypatch.chdir(tmp_path)
    plot_training_curves(history, Path("r1") / "curves.png", best_epoch=3)
    assert figs[0]._suptitle.get_text() == title


def test_the_spread_panel_starts_at_zero_with_the_collapse_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A sequence run's item std 0.17608 -> 0.17582 (0.1%) filled the panel top to bottom on a zoomed axis: it
    read as the embeddings collapsing, which the alarm (std below 0.01) said they were not."""
    from twotower.training.diagnostics import COLLAPSE_STD

    history = [{"epoch": e, "loss": 6.0, "inbatch_accuracy": 0.01, "item_std": 0.17608 - 0.00006 * e} for e in (1, 2, 3)]
    fig = _figure(monkeypatch, history, tmp_path / "curves.png")
    ax = next(ax for ax in fig.axes if ax.get_title() == "item embedding std")
    lo, hi = ax.get_ylim()
    assert lo == 0 and 0.176 < hi < 0.25
    assert any(list(line.get_ydata()) == [COLLAPSE_STD, COLLAPSE_STD] for line in ax.get_lines())


def test_a_long_title_is_wrapped_to_the_figures_width(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A three-panel run's title with the item-item term's figure ran past both edges of the PNG."""
    history = [{"epoch": e, "loss": 6.0 - 0.2 * e, "inbatch_accuracy": 0.01 * e, "valid_NDCG@10": 0.1 + 0.01 * e}
               for e in (1, 2, 3)]
    figs = _capture(monkeypatch)
    plot_training_curves(history, tmp_path / "curves.png", best_epoch=3, item_item=_term(0.3, 0.1360, 500, 943))
    fig = figs[0]
    renderer = fig.canvas.get_renderer()
    box = fig._suptitle.get_window_extent(renderer)
    assert 0 <= box.x0 and box.x1 <= fig.bbox.width, (box, fig.bbox)


def test_drawing_the_curves_leaves_the_processs_matplotlib_backend_alone(tmp_path: Path) -> None:
    """plot_training_curves called matplotlib.use("Agg"): a notebook training through the Python API had its
    inline backend switched off for the rest of the session, and pyplot held every curves figure drawn."""
    import matplotlib
    import matplotlib.pyplot as plt

    before = matplotlib.get_backend()
    try:
        matplotlib.use("svg")
        open_figures = plt.get_fignums()
        plot_training_curves([{"epoch": 1, "loss": 6.0, "inbatch_accuracy": 0.01, "item_std": 0.02}],
                             tmp_path / "curves.png")
        assert matplotlib.get_backend() == "svg"
        assert plt.get_fignums() == open_figures
        assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    finally:
        matplotlib.use(before)


def _term(weight: float, valid: float, scored: int = 900, of: int = 900) -> dict:
    return {"weight": weight, "metric": "NDCG@10", "valid_metric": valid, "valid_users": scored, "valid_users_of": of}


@pytest.mark.parametrize(("term", "title"), [
    (_term(0.3, 0.1360), "r1: best valid NDCG@10 at epoch 3: towers 0.1300; with the item-item term (weight 0.3) "
                         "0.1360 (saved), 5 epochs run"),
    (_term(0.3, 0.1360, 500, 900), "r1: best valid NDCG@10 at epoch 3: towers 0.1300; with the item-item term "
                                   "(weight 0.3) 0.1360 on 500 of the 900 validation users (saved), 5 epochs run"),
    (_term(0.0, 0.1300), "r1: best valid NDCG@10 0.1300 at epoch 3 (saved; the item-item term did not help), "
                         "5 epochs run")])
def test_the_title_gives_the_item_item_terms_figure_the_saved_model_has(monkeypatch: pytest.MonkeyPatch,
                                                                        tmp_path: Path, term: dict, title: str) -> None:
    """The title said "best valid NDCG@10 0.1300 (saved)" of a run whose saved model, the towers with the item-item
    term fitted after training, validated at 0.1360 (`train`'s own summary lines said both)."""
    history = [{"epoch": e, "loss": 5.4 - 0.1 * min(e, 3), "inbatch_accuracy": 0.01, "item_std": 0.02,
                "valid_NDCG@10": 0.1 + 0.01 * min(e, 3) - 0.001 * max(e - 3, 0)} for e in range(1, 6)]
    (tmp_path / "r1").mkdir()
    figs = _capture(monkeypatch)
    monkeypatch.chdir(tmp_path)
    plot_training_curves(history, Path("r1") / "curves.png", best_epoch=3, item_item=term)
    assert figs[0]._suptitle.get_text().replace("\n", " ") == title  # wrapped to the figure's width
    valid = next(ax for ax in figs[0].axes if ax.get_title() == "valid NDCG@10")
    labels = [t.get_text() for t in valid.get_legend().get_texts()]
    if term["weight"]:  # its own point at the best epoch, beside the towers' curve
        assert labels == ["best epoch 3 (its towers saved)", "+ item-item term (weight 0.3): 0.1360 (saved)"]
        assert any(list(line.get_xdata()) == [3] and list(line.get_ydata()) == [0.1360] for line in valid.get_lines())
    else:
        assert labels == ["best epoch 3 (saved)"]


def test_the_gate_panel_says_which_head_alpha_weighs(tmp_path):
    # "gate α" alone: a reader of curves.png could not tell whether 0.48 leaned to the text or the collaborative head
    from twotower.training.plots import training_curves_figure

    history = [{"epoch": e, "loss": 5.0, "inbatch_accuracy": 0.1, "alpha": 0.49} for e in (1, 2)]
    titles = [ax.get_title() for ax in training_curves_figure(history, tmp_path).axes]
    assert "gate α (1 = text head only, 0 = collaborative)" in titles
