"""`index build --out DIR` outside a run folder takes a writer lock on DIR, as a build into the run takes the run's.

Review: two `index build --out /shared/idx` at once were both let through; the one that saved its index first
wrote its recall_qps.png after the other had swapped in its own index, so the folder held an HNSW index and
tune.json beside a plot of the Flat build (both exited 0). A second build is now refused at once, naming the
folder and the build that holds it, and the folder is left to the first.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.serving.tiny_run import build_tiny_run
from twotower.cli.main import main

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the writer lock is a POSIX flock")

# a real `twotower index build` that stops after saving its index, before its recall_qps.png, until told to go on
_PAUSED_BUILD = """
import sys
import twotower.index as ti
real = ti.plot_recall_qps
def paused(report, path, **kw):
    print("saved", flush=True)
    sys.stdin.readline()
    real(report, path, **kw)
ti.plot_recall_qps = paused
from twotower.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_run(tmp_path_factory.mktemp("index_lock"))


def _chosen(out: Path) -> str:
    return json.loads((out / "tune.json").read_text())["chosen"]["factory"]


@pytest.mark.parametrize("through_link", [False, True])
def test_a_second_build_into_an_outside_folder_being_built_is_refused(run_dir, tmp_path, capsys, through_link):
    out = tmp_path / "shared" / "idx"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src"), "TWOTOWER_THREADS": "1"}
    first = subprocess.Popen([sys.executable, "-c", _PAUSED_BUILD, "-q", "index", "build", "--run", str(run_dir),
                              "--index", "flat", "--out", str(out)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    try:
        lines = iter(first.stdout.readline, "")
        assert "saved" in (line.strip() for line in lines)  # its index is in place; its plot is still to come
        second = out
        if through_link:  # the same folder by another name is the same folder
            second = tmp_path / "link"
            second.symlink_to(out)
        capsys.readouterr()
        assert main(["index", "build", "--run", str(run_dir), "--index", "hnsw", "--out", str(second)]) == 2
        assert capsys.readouterr().err.strip() == (
            f"error: {second}: another twotower index build (pid {first.pid}) is writing this folder; wait for it to "
            "finish, then run `twotower index build` again")
        first.stdin.write("go\n")
        first.stdin.flush()
        assert first.wait(timeout=120) == 0
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
        first.stdin.close()
        first.stdout.close()
    assert _chosen(out) == "Flat" and (out / "recall_qps.png").is_file()  # the first build's, whole
    # released: the next build works, and replaces the index
    assert main(["-q", "index", "build", "--run", str(run_dir), "--index", "hnsw", "--out", str(out)]) == 0
    assert _chosen(out).startswith("HNSW")
    assert sorted(p.name for p in out.parent.iterdir()) == [".idx.twotower.lock", "idx"]  # the lock lies beside
