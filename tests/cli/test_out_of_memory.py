"""A run out of memory ends in one line saying what to lower, not a traceback ending in a bare `MemoryError`."""
from __future__ import annotations

import pytest

from tests.synthetic import write_dataset
from twotower.cli.main import main

SMALL = ["train.batch_size=32", "model.user.hidden=[16]", "model.item.hidden=[16]", "model.user.out_dim=8",
         "model.item.out_dim=8", "--no-progress", "--threads", "1"]
TORCH_OOM = ("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to "
             "allocate 8589934592 bytes. Error code 12 (Cannot allocate memory)")


@pytest.mark.parametrize("error", [MemoryError(), RuntimeError(TORCH_OOM)], ids=["python", "torch"])
def test_training_out_of_memory_is_one_line_with_the_estimate_and_what_to_lower(tmp_path, monkeypatch, capsys, error):
    from twotower.training.trainer import Trainer

    def step(self, idx, inputs=None):
        raise error

    monkeypatch.setattr(Trainer, "_step", step)
    data = write_dataset(tmp_path / "data")
    status = main(["-q", "train", "--train", str(data["train"]), "--valid", str(data["valid"]),
                   "--out", str(tmp_path / "run"), "--epochs", "1", "--no-eval", *SMALL])
    err = capsys.readouterr().err
    assert status == 2, err  # as the other errors the CLI prints in one line
    assert "Traceback" not in err
    line = err.strip().splitlines()[0]
    assert line.startswith("error: out of memory while training"), err
    assert "its peak was estimated at about" in line  # the estimate the run passed before training
    assert "lower train.batch_size" in line and "loss.sampled_negatives" in line and "train.threads" in line
    if isinstance(error, RuntimeError):
        assert "(an allocation of 8.0 GiB failed)" in line


def test_another_command_out_of_memory_is_one_line(tmp_path, monkeypatch, capsys):
    import twotower.cli.data_cmd as data_cmd

    def split(args):
        raise MemoryError("Unable to allocate 3.50 GiB for an array with shape (469762048,) and data type int64")

    monkeypatch.setattr(data_cmd, "cmd_data_split", split)
    status = main(["data", "split", "--input", str(tmp_path / "x.csv"), "--out", str(tmp_path / "s")])
    err = capsys.readouterr().err
    assert status == 2 and "Traceback" not in err
    assert err.strip() == ("error: out of memory (Unable to allocate 3.50 GiB for an array with shape (469762048,) "
                           "and data type int64): the command needed more memory than was free; close other programs, "
                           "or give it less to hold at once (smaller inputs, fewer --threads)")


def test_an_ordinary_runtime_error_still_raises(tmp_path, monkeypatch):
    import twotower.cli.data_cmd as data_cmd

    def split(args):
        raise RuntimeError("shape mismatch")

    monkeypatch.setattr(data_cmd, "cmd_data_split", split)
    with pytest.raises(RuntimeError, match="shape mismatch"):
        main(["data", "split", "--input", str(tmp_path / "x.csv"), "--out", str(tmp_path / "s")])


def test_training_out_of_memory_after_a_checkpoint_says_what_resume_continues(tmp_path, monkeypatch, capsys):
    from twotower.training.trainer import Trainer

    run_epoch = Trainer._run_epoch

    def second_epoch_fails(self, epoch):
        if epoch >= 2:
            raise MemoryError()
        return run_epoch(self, epoch)

    monkeypatch.setattr(Trainer, "_run_epoch", second_epoch_fails)
    data = write_dataset(tmp_path / "data")
    out = tmp_path / "run"
    status = main(["-q", "train", "--train", str(data["train"]), "--valid", str(data["valid"]),
                   "--out", str(out), "--epochs", "3", "--no-eval", *SMALL])
    err = capsys.readouterr().err
    assert status == 2 and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    # epoch 1 was checkpointed: the line says so, and how to continue once the setting is lowered
    assert err.startswith("error: out of memory while training"), err
    assert f"{out / 'checkpoint'} holds epoch 1" in err and "--resume" in err, err


def test_training_out_of_memory_before_any_checkpoint_says_nothing_to_resume(tmp_path, monkeypatch, capsys):
    from twotower.training.trainer import Trainer

    def step(self, idx, inputs=None):
        raise MemoryError()

    monkeypatch.setattr(Trainer, "_step", step)
    data = write_dataset(tmp_path / "data")
    status = main(["-q", "train", "--train", str(data["train"]), "--valid", str(data["valid"]),
                   "--out", str(tmp_path / "run"), "--epochs", "1", "--no-eval", *SMALL])
    err = capsys.readouterr().err
    assert status == 2
    assert "no epoch was checkpointed, so there is nothing to resume" in err, err


def test_out_of_memory_building_the_model_gets_the_training_line(tmp_path, monkeypatch, capsys):
    import twotower.pipeline.experiment as experiment

    def build(*args, **kwargs):
        raise RuntimeError(TORCH_OOM)

    monkeypatch.setattr(experiment, "build_model_for", build)
    data = write_dataset(tmp_path / "data")
    status = main(["-q", "train", "--train", str(data["train"]), "--valid", str(data["valid"]),
                   "--out", str(tmp_path / "run"), "--epochs", "1", "--no-eval", *SMALL])
    err = capsys.readouterr().err
    assert status == 2 and "Traceback" not in err, err
    line = err.strip().splitlines()[0]
    assert line.startswith("error: out of memory while training (an allocation of 8.0 GiB failed)"), err
    assert "its peak was estimated at about" in line and "lower train.batch_size" in line, err
