"""`index build` swaps its folder in whole, recall_qps.png included.

Walk (kill -9 of `twotower index build` at several points): the plot was drawn after the new index had been swapped
in, so a build killed (or failing) between the two left RUN/index holding the new index without any plot, the
previous build's plot gone with the old folder, and a failing build had already replaced a good index. The plot is
now written into the new folder before the swap: a build that dies before the end leaves the previous index whole.
"""
from __future__ import annotations

from pathlib import Path

import pytest

import twotower.pipeline.index_build as ib
from tests.serving.tiny_run import build_tiny_run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_run(tmp_path_factory.mktemp("plot_in_swap"))


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_a_build_dying_at_its_plot_leaves_the_previous_index_whole(run_dir, tmp_path, monkeypatch):
    out = tmp_path / "idx"
    ib.build_index(run_dir, "flat", out=out, threads=1)
    before = _files(out)
    assert {"meta.json", "tune.json", ib.TUNE_PNG} <= set(before)

    def dies(*args, **kwargs):
        raise RuntimeError("killed while drawing the plot")

    monkeypatch.setattr(ib, "plot_recall_qps", dies)
    with pytest.raises(RuntimeError, match="killed"):
        ib.build_index(run_dir, "flat", out=out, threads=1)
    assert _files(out) == before  # the old index, its tune.json and its plot, not the new index alone
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".idx.tmp-")]  # the staged folder is gone


def test_a_finished_build_has_its_plot(run_dir, tmp_path):
    out = tmp_path / "idx"
    ib.build_index(run_dir, "flat", out=out, threads=1)
    assert (out / ib.TUNE_PNG).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
