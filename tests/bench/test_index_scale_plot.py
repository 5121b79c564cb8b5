"""bench/index_scale.py --plot titles its figure with what was measured: its title read "index settings tried:
20,000 vectors, dim 32, 200 queries", without the k and target the recall is of, the threads the QPS are of, or
what the catalogue was."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


def test_the_plot_says_what_was_measured(bench: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import twotower.index.plots as plots

    titles: list[str] = []
    figure = plots.recall_qps_figure
    monkeypatch.setattr(plots, "recall_qps_figure",
                        lambda *a, **k: (fig := figure(*a, **k), titles.append(fig.axes[0].get_title()))[0])
    scale = bench("index_scale")
    png = tmp_path / "sweep.png"
    assert scale.main(["--n", "2000", "--dim", "8", "--clusters", "20", "--queries", "50", "--tune-queries", "50",
                       "--latency-queries", "5", "--k", "5", "--target", "0.9", "--skip-hnsw", "--skip-pq",
                       "--threads", "1", "--plot", str(png)]) == 0
    assert png.stat().st_size > 1000
    assert len(titles) == 1
    assert titles[0] == ("index settings tried for a synthetic clustered catalogue: 2,000 vectors, dim 8\n"
                         "recall@5 target 0.9, 50 queries, 1 thread")
