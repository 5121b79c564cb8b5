"""A host whose torch default float type is float64 (``torch.set_default_dtype(torch.float64)``, a scientific
notebook's choice) loads and trains runs as any other host: in float32, the type the towers are saved in.

Before, a load built the towers in float64 and copied the saved weights into them, so the run's fingerprint was
another than its index's: ``tt.recommend`` refused with "built for model 24ed4f56..., but the run now holds model
857c48de... (retrained since the index was built ...)"; and ``train_run`` trained and saved a float64 model.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import twotower as tt

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serving"))
from tiny_run import write_tiny_data  # noqa: E402

FAST = ["train.epochs=1", "train.progress=false", "train.checkpoint=false", "train.threads=1", "train.batch_size=64",
        "model.user.hidden=[16]", "model.item.hidden=[16]", "model.user.out_dim=16", "model.item.out_dim=16",
        "model.item.id_dim=16", "model.user.history_dim=16", "model.user.history_len=6", "eval.baselines=[]",
        "model.item_item.enabled=false", "data.rating_col=null"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A tiny run with a FAISS index, trained and built under torch's own default (float32)."""
    folder = tmp_path_factory.mktemp("dtype")
    inter, _ = write_tiny_data(folder)
    cfg = tt.load_config(overrides=[*FAST, f"data.path={json.dumps(str(inter))}"])
    run, _, _ = tt.train_run(cfg, folder / "run")
    tt.build_index(run, "flat")
    return folder / "run"


@pytest.fixture
def float64_host():
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(before)


def test_a_float64_host_loads_the_run_as_saved_and_its_index_serves_it(run_dir, float64_host) -> None:
    run = tt.TrainedRun.load(run_dir)
    assert {p.dtype for p in run.model.parameters()} == {torch.float32}
    assert torch.get_default_dtype() == torch.float64  # the host's choice, left as it was
    user, item = run.user_vocab.ids[0], run.item_vocab.ids[0]
    assert tt.recommend(run, [user], k=3)[0]  # the index built for this run serves it, not refused
    assert tt.recommend(run, history=[item], k=3)[0]
    assert tt.similar(run, [item], k=3)[0]


def test_the_fingerprint_is_the_runs_whatever_the_hosts_default(run_dir) -> None:
    want = tt.TrainedRun.load(run_dir).fingerprint()
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        assert tt.TrainedRun.load(run_dir).fingerprint() == want
    finally:
        torch.set_default_dtype(before)


def test_a_float64_host_trains_and_saves_a_float32_model(run_dir, tmp_path, float64_host) -> None:
    inter = run_dir.parent / "interactions.csv"
    cfg = tt.load_config(overrides=[*FAST, f"data.path={json.dumps(str(inter))}"])
    _, result, _ = tt.train_run(cfg, tmp_path / "run")
    assert {t.dtype for t in load_file(str(tmp_path / "run" / "model.safetensors")).values()
            if t.is_floating_point()} == {torch.float32}
    assert torch.get_default_dtype() == torch.float64
    # the losses of a training under torch's own default
    torch.set_default_dtype(torch.float32)
    _, again, _ = tt.train_run(cfg, tmp_path / "again")
    assert [r["loss"] for r in again.history] == [r["loss"] for r in result.history]


def test_a_load_leaves_the_default_float_type_alone_in_every_thread(run_dir):
    """The default is one setting for the whole process: loads that set float32 for their block and put the
    caller's back left it at float32 when three ran at once (each put back another's), and the host's other
    threads made float32 tensors meanwhile."""
    import threading

    from twotower.pipeline.artifacts import TrainedRun

    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    seen: set[torch.dtype] = set()
    stop = threading.Event()

    def host() -> None:
        while not stop.is_set():
            seen.add(torch.tensor([1.5]).dtype)

    try:
        watcher = threading.Thread(target=host)
        watcher.start()
        try:
            loads = [threading.Thread(target=TrainedRun.load, args=(run_dir,)) for _ in range(3)]
            for t in loads:
                t.start()
            for t in loads:
                t.join()
        finally:
            stop.set()
            watcher.join()
        assert torch.get_default_dtype() == torch.float64
        assert seen == {torch.float64}, seen
        assert all(p.dtype == torch.float32 for p in TrainedRun.load(run_dir).model.parameters())
    finally:
        torch.set_default_dtype(before)
