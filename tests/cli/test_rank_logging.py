"""Under torchrun, rank 0 logs for all: the other ranks read the same data and would repeat every line."""
from __future__ import annotations

import pytest

import os
import subprocess
import sys
from pathlib import Path

from tests.synthetic import write_dataset

ROOT = Path(__file__).resolve().parents[2]


def _split(tmp_path: Path, rank: str | None, source: Path, status: int) -> str:
    """stderr of `twotower data split --input source` as torchrun's rank ``rank`` of 2 (None: alone)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("RANK", None)
    env.pop("WORLD_SIZE", None)
    if rank is not None:
        env.update(RANK=rank, WORLD_SIZE="2")
    cmd = [sys.executable, "-m", "twotower", "data", "split", "--input", str(source),
           "--out", str(tmp_path / f"split{rank}")]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == status, proc.stderr
    return proc.stderr


def _split_stderr(tmp_path: Path, rank: str | None) -> str:
    return _split(tmp_path, rank, write_dataset(tmp_path / f"data{rank}")["train"], 0)


def test_only_rank_0_logs_info_lines(tmp_path):
    alone, rank0, rank1 = (_split_stderr(tmp_path, r) for r in (None, "0", "1"))
    assert " INFO " in alone and " INFO " in rank0
    assert " INFO " not in rank1 and " WARNING " not in rank1


def _failing_stderr(tmp_path: Path, rank: str | None) -> str:
    return _split(tmp_path, rank, tmp_path / "missing.csv", 2)


def test_an_error_names_the_rank_that_failed(tmp_path):
    # a rank > 0 may fail alone (its node lacks the data file): its line must not read as rank 0's
    alone, rank0, rank1 = (_failing_stderr(tmp_path, r) for r in (None, "0", "1"))
    assert alone.startswith("error: ") and "missing.csv" in alone
    assert rank0 == alone
    assert rank1 == "[rank 1] " + alone


@pytest.mark.parametrize("argv, said", [
    (["train", "--seed", "5"], "twotower train: error: unrecognized arguments: --seed"),  # argparse's own refusal
    (["explain", "--top", "1.5"], "error: --top: must be an integer, got '1.5'"),  # a number flag's value, one line
])
def test_a_command_line_refused_on_a_rank_names_the_rank(monkeypatch, capsys, argv, said):
    """A wrapper giving one node other flags: argparse's refusal on rank 1 printed "twotower train: error: ..."
    untagged, read as rank 0's (docs/distributed.md promises "[rank 1] error: ..." for a rank that fails alone)."""
    from twotower.cli.main import main

    for rank, tag in (("1", "[rank 1] "), ("0", "")):
        monkeypatch.setenv("RANK", rank)
        monkeypatch.setenv("WORLD_SIZE", "2")
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert any(line.startswith(tag + said) for line in err.splitlines()), err


GLOO_PEER_GONE = ("[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer "
                  "[127.0.0.1]:15784. This is typically caused by a remote worker crashing.")


def _as_rank(monkeypatch, rank: int) -> None:
    """This process as rank ``rank`` of a 2-rank group whose peer has gone (no real group: start-up costs seconds)."""
    import twotower.distributed as gdist
    import twotower.pipeline.run as run_mod
    import twotower.training.distributed as tdist

    def peer_gone(cfg, out, resume=False):
        raise RuntimeError(GLOO_PEER_GONE)

    monkeypatch.setattr(run_mod, "train_run", peer_gone)
    for mod in (gdist, tdist):  # training.distributed re-exports the functions themselves
        monkeypatch.setattr(mod, "is_initialized", lambda: True)
        monkeypatch.setattr(mod, "world_size", lambda: 2)
        monkeypatch.setattr(mod, "rank", lambda: rank)
    monkeypatch.setattr(tdist, "cleanup", lambda: None)  # no group to leave
    monkeypatch.setenv("RANK", str(rank))
    monkeypatch.setenv("WORLD_SIZE", "2")


def test_a_rank_that_loses_its_peer_says_so_in_a_line_not_a_traceback(tmp_path, monkeypatch, capsys):
    # `kill -TERM` of rank 1 mid-epoch: rank 0's next all_gather raised gloo's RuntimeError, printed as a
    # 50-line `[rank0]: Traceback` that hid the cause and said nothing of the checkpoint
    from twotower.cli.main import main

    data = write_dataset(tmp_path / "data")
    for rank in (0, 1):
        _as_rank(monkeypatch, rank)
        out = tmp_path / f"run{rank}"
        assert main(["-q", "train", "--train", str(data["train"]), "--out", str(out), "--no-progress"]) == 1
        err = capsys.readouterr().err
        assert "Traceback" not in err
        first = err.splitlines()[0]
        assert first.startswith("[rank 1] error: " if rank else "error: another rank ended mid-training (")
        assert "(Connection closed by peer [127.0.0.1]:15784)" in first and "torchrun's summary names it" in first
        # rank 0 writes the run folder, so it alone says what there is to --resume
        assert ("nothing to resume" in err) is (rank == 0)


def test_a_runtime_error_of_one_process_is_not_read_as_a_lost_peer(monkeypatch):
    from twotower.distributed import lost_peer

    assert not lost_peer(RuntimeError(GLOO_PEER_GONE))  # no process group: not a distributed failure
    _as_rank(monkeypatch, 0)
    assert lost_peer(RuntimeError(GLOO_PEER_GONE)) and not lost_peer(RuntimeError("shape mismatch"))
    assert not lost_peer(ValueError(GLOO_PEER_GONE))
