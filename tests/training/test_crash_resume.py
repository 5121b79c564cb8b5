"""Crash safety of training (issue 7): SIGKILL at chosen and random points, then `--resume`.

The training runs in a subprocess (``crash_train.py`` wraps ``twotower train``
with a fault-injection point where it parks so the kill lands exactly there:
mid checkpoint write, between the two renames of the checkpoint swap, with the
best weights half written). After every kill each artefact that exists must
parse and verify (no half-written or stale file in a real location), and the
resumed run must end with the same per-epoch losses, validation metrics and
final weights as an uninterrupted run with the same seed (training is
deterministic on CPU with one thread).
"""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.synthetic import write_dataset

HERE = Path(__file__).resolve().parent
EPOCHS = 4
OVERRIDES = [
    "train.patience=100", "train.batch_size=32", "train.threads=1", "train.seed=7", "eval.baselines=[]",
    "model.user.out_dim=16", "model.item.out_dim=16", "model.user.hidden=[16]", "model.item.hidden=[16]",
    "model.item.id_dim=16", "model.user.history_dim=16", "model.user.history_len=8", "data.rating_col=null",
]
ENV = dict(os.environ, TWOTOWER_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONHASHSEED="0")


def train_argv(data: dict[str, Path], out: Path, epochs: int = EPOCHS, resume: bool = False) -> list[str]:
    argv = ["train", "--train", str(data["train"]), "--valid", str(data["valid"]), "--out", str(out),
            "--no-eval", "--no-progress", "--epochs", str(epochs), *OVERRIDES]
    return argv + (["--resume"] if resume else [])


def spawn(argv: list[str], point: str = "none", nth: int = 0, marker: Path | None = None) -> subprocess.Popen:
    cmd = [sys.executable, str(HERE / "crash_train.py"), point, str(nth), str(marker or "/dev/null"), "--", "-q", *argv]
    return subprocess.Popen(cmd, env=ENV, cwd=str(HERE.parents[1]), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def kill_at(proc: subprocess.Popen, marker: Path | None, delay: float | None, timeout: float = 120) -> bool:
    """SIGKILL when ``marker`` appears (or after ``delay`` s); False if the process ended first."""
    t0 = time.monotonic()
    while proc.poll() is None and time.monotonic() - t0 < timeout:
        if (marker is not None and marker.exists()) or (delay is not None and time.monotonic() - t0 >= delay):
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            return True
        time.sleep(0.005)
    if proc.poll() is None:
        proc.kill()
        proc.wait()
        raise AssertionError("training neither reached the kill point nor finished in time")
    return False


def verify_run_folder(out: Path) -> None:
    """Every artefact present parses and verifies; nothing half-written sits at a real path."""
    from safetensors.numpy import load_file

    from twotower.data.vocab import Vocabulary
    from twotower.utils.atomic import read_json, sha256_file

    if not out.exists():
        return
    for p in out.rglob("*"):
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(out).parts):
            assert not p.name.endswith(".tmp"), p
    for name in ("config.json", "run.json", "manifest.json"):
        if (out / name).exists():
            read_json(out / name)
    for name in ("users.json", "items.json"):
        if (out / "vocab" / name).exists():
            Vocabulary.load(out / "vocab" / name)
    if (out / "history.npz").exists():
        with np.load(out / "history.npz", allow_pickle=False) as z:
            _ = [z[k] for k in z.files]
    if (out / "model.safetensors").exists():
        load_file(str(out / "model.safetensors"))
    if (out / "log.jsonl").exists():
        for line in (out / "log.jsonl").read_text().splitlines():
            json.loads(line)
    ck = out / "checkpoint"
    if ck.exists():
        state = read_json(ck / "state.json")
        for name, digest in state["files"].items():
            assert sha256_file(ck / name) == digest, ck / name
    if (out / "manifest.json").exists() and (out / "model.safetensors").exists():
        from twotower.pipeline.artifacts import TrainedRun

        TrainedRun.load(out)  # checks every checksum of the manifest


def assert_loses_at_most_one_epoch(out: Path) -> None:
    """The checkpoint is at most one epoch behind the last epoch the log reports finished."""
    from twotower.utils.atomic import read_json

    logged = len(history(out)) if (out / "log.jsonl").exists() else 0
    state = out / "checkpoint" / "state.json"
    saved = int(read_json(state)["epoch"]) if state.exists() else 0
    assert saved >= logged - 1, f"{logged} epochs logged but the checkpoint holds epoch {saved}: a resume loses more"


def finish(data: dict[str, Path], out: Path, max_tries: int = 4) -> None:
    """Resume until the run completes (a kill before the first checkpoint means starting afresh)."""
    for _ in range(max_tries):
        resume = (out / "checkpoint" / "state.json").exists()
        proc = spawn(train_argv(data, out, resume=resume))
        output = proc.communicate(timeout=300)[0].decode()
        if proc.returncode == 0:
            return
        raise AssertionError(f"resume failed (rc {proc.returncode}):\n{output[-3000:]}")


def history(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]


def assert_same_run(got: Path, ref: Path) -> None:
    from safetensors.numpy import load_file

    a, b = history(got), history(ref)
    assert [r["epoch"] for r in a] == [r["epoch"] for r in b] == list(range(1, EPOCHS + 1))
    for ra, rb in zip(a, b):
        assert ra["loss"] == pytest.approx(rb["loss"], rel=1e-5, abs=1e-6), (ra, rb)
        for k in rb:
            if k.startswith("valid_"):
                assert ra[k] == pytest.approx(rb[k], rel=1e-5, abs=1e-6), (k, ra, rb)
    wa, wb = load_file(str(got / "model.safetensors")), load_file(str(ref / "model.safetensors"))
    assert sorted(wa) == sorted(wb)
    for k in wb:
        np.testing.assert_allclose(wa[k], wb[k], rtol=1e-5, atol=1e-6, err_msg=k)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    root = tmp_path_factory.mktemp("crash")
    data = write_dataset(root / "data")
    ref = root / "reference"
    proc = spawn(train_argv(data, ref))
    output = proc.communicate(timeout=300)[0].decode()
    assert proc.returncode == 0, output[-3000:]
    verify_run_folder(ref)
    return data, ref


def crash_and_resume(data, ref, out: Path, plan: list[tuple[str, int, float | None]]) -> list[str]:
    """Run ``plan`` (point, nth visit, or a delay for a random-time kill), resuming between kills."""
    events = []
    for i, (point, nth, delay) in enumerate(plan):
        marker = out.parent / f"{out.name}.marker{i}"
        resume = (out / "checkpoint" / "state.json").exists()
        proc = spawn(train_argv(data, out, resume=resume), point, nth, marker if point != "none" else None)
        killed = kill_at(proc, marker if point != "none" else None, delay)
        assert killed or point == "none", f"training finished without reaching {point}#{nth}"
        if not killed:
            out_text = proc.stdout.read().decode() if proc.stdout else ""
            assert proc.returncode == 0, out_text[-3000:]
        events.append(f"{point}#{nth}" if point != "none" else f"t={delay:.2f}s" + ("" if killed else " (finished)"))
        verify_run_folder(out)
        assert_loses_at_most_one_epoch(out)
    finish(data, out)
    verify_run_folder(out)
    assert_same_run(out, ref)
    return events


def test_kill_during_checkpoint_write_then_resume_matches_uninterrupted(reference, tmp_path):
    data, ref = reference
    crash_and_resume(data, ref, tmp_path / "run", [("checkpoint-write", 2, None)])


@pytest.mark.slow
@pytest.mark.parametrize("point", ["checkpoint-swap", "weights-write"])
def test_kill_at_each_write_point_then_resume(reference, tmp_path, point):
    data, ref = reference
    crash_and_resume(data, ref, tmp_path / "run", [(point, 1, None), (point, 1, None)])


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_kill_at_random_times_then_resume(reference, tmp_path, seed):
    """Three SIGKILLs at random moments (start-up, mid-epoch, mid-write), resuming after each."""
    data, ref = reference
    rng = random.Random(seed)
    plan = [("none", 0, rng.uniform(2.0, 9.0)) for _ in range(3)]
    crash_and_resume(data, ref, tmp_path / "run", plan)
