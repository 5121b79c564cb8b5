"""`evaluate --plot` at a single k: the models are bars with their values, not points stacked over one x."""
from __future__ import annotations

from pathlib import Path

import pytest

import twotower.evaluation.plots as plots

ROWS = {"two-tower": {"NDCG@10": 0.1305}, "popularity": {"NDCG@10": 0.0716},
        "ease (λ=100)": {"NDCG@10": 0.1044}, "itemknn (k=10)": {"NDCG@10": 0.1047}}


def _figure(monkeypatch: pytest.MonkeyPatch, results: dict, path: Path, metric: str):
    figs = []
    build = plots.recall_at_k_figure
    monkeypatch.setattr(plots, "recall_at_k_figure", lambda *a, **k: figs.append(build(*a, **k)) or figs[-1])
    plots.plot_recall_at_k(results, path, metric)
    assert path.stat().st_size > 0
    return figs[0]


def test_one_k_draws_a_bar_per_model_with_its_value(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # `evaluate --ks 10 --plot-metric NDCG --plot p.png` on ML-100K: EASE's 0.1044 point lay under ItemKNN's 0.1047,
    # so the plot showed three models of four
    ax = _figure(monkeypatch, ROWS, tmp_path / "p.png", "NDCG").axes[0]
    assert [round(p.get_height(), 4) for p in ax.patches] == [0.1305, 0.0716, 0.1044, 0.1047]
    assert [t.get_text() for t in ax.get_xticklabels()] == list(ROWS)
    assert sorted(t.get_text() for t in ax.texts) == ["0.0716", "0.1044", "0.1047", "0.1305"]
    assert ax.get_ylabel() == "NDCG@10" and ax.get_ylim()[0] == 0


def test_several_ks_stay_one_line_per_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    results = {name: {"Recall@10": v, "Recall@20": 2 * v} for name, v in (("a", 0.1), ("b", 0.05))}
    ax = _figure(monkeypatch, results, tmp_path / "p.png", "Recall").axes[0]
    assert [(line.get_label(), list(line.get_ydata())) for line in ax.get_lines()] == [("a", [0.1, 0.2]), ("b", [0.05, 0.1])]
    assert not ax.patches


def test_each_models_line_has_its_own_marker_and_colour(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Four lines of round markers in matplotlib's default colours: EASE's green and ItemKNN's red (0.0932 and
    0.0958 at k=10 on ML-100K) read as one colour to a deuteranope."""
    rows = {name: {"Recall@10": 0.1 + i / 100, "Recall@20": 0.2 + i / 100} for i, name in enumerate(ROWS)}
    ax = _figure(monkeypatch, rows, tmp_path / "p.png", "Recall").axes[0]
    lines = ax.get_lines()
    assert len(lines) == 4
    assert len({line.get_marker() for line in lines}) == 4
    assert len({line.get_color() for line in lines}) == 4
    legend = ax.get_legend()
    assert [h.get_marker() for h in legend.legend_handles] == [line.get_marker() for line in lines]
