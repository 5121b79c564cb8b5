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


def test_a_build_without_matplotlib_saves_the_index_and_says_there_is_no_plot(run_dir, tmp_path, monkeypatch,
                                                                              caplog):
    """matplotlib missing (a --no-deps or partial install): the tuning ran, then the plot's ImportError failed the
    build and nothing was saved; now the index is saved, a warning says why there is no plot, and the last line does
    not name one."""
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib.backends.backend_agg", None)  # `import` of it raises ImportError
    out = tmp_path / "idx"
    said: list[str] = []
    ib.build_index(run_dir, "flat", out=out, threads=1, echo=said.append)
    assert (out / "meta.json").is_file() and (out / "tune.json").is_file()
    assert not (out / ib.TUNE_PNG).exists()
    assert any("matplotlib does not import" in r.getMessage() and ib.TUNE_PNG in r.getMessage() for r in caplog.records)
    assert said[-1].endswith(f"table {out / ib.TUNE_JSON}"), said[-1]
