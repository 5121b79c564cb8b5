"""A run folder whose training stopped before its best weights were written says how to finish it.

Durability audit: `twotower train` killed while writing the first epoch's best weights (the checkpoint of that
epoch already swapped in) left a folder every command refused with "model.safetensors missing; the run did not
finish an epoch": untrue, and it sent the user to train again from scratch. `--resume` writes the weights from
the checkpoint, and the message now says so. Likewise a kill between sealing run.json and writing manifest.json
("restore it (or retrain)"), which `--resume` seals again.
"""
from __future__ import annotations

from pathlib import Path

from tests.synthetic import write_dataset
from twotower.cli.main import main

FAST = ["train.batch_size=32", "model.user.hidden=[16]", "model.item.hidden=[16]", "model.user.out_dim=16",
        "model.item.out_dim=16", "model.item.id_dim=16", "model.user.history_dim=16", "model.user.history_len=8",
        "train.threads=1", "eval.baselines=[]", "data.rating_col=null", "--no-progress", "--epochs", "1"]


def test_a_run_killed_writing_its_first_best_weights_says_to_resume(tmp_path, monkeypatch, capsys):
    from twotower.training import hooks

    dataset = write_dataset(tmp_path / "data", n_users=24, per_user=8)
    out = tmp_path / "run"
    train = ["-q", "train", "--train", str(dataset["train"]), "--valid", str(dataset["valid"]), "--out", str(out),
             *FAST]

    def killed(path: Path, *args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt  # the kill lands in the best weights' write, after the epoch's checkpoint

    with monkeypatch.context() as m:
        m.setattr(hooks, "save_weights", killed)
        assert main(train) == 130
    assert (out / "checkpoint" / "state.json").is_file() and not (out / "model.safetensors").exists()
    capsys.readouterr()
    assert main(["-q", "recommend", "--run", str(out), "--user", "u0"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: {out}: model.safetensors missing; its training stopped after the checkpoint of epoch 1, before the "
        f"best weights were written; continue it with `twotower train --resume --out {out}` and the same data and "
        "settings")
    assert main([*train, "--resume"]) == 0  # what the message says to run finishes the run
    assert main(["-q", "recommend", "--run", str(out), "--user", "u0"]) == 0


def test_a_run_without_any_epoch_says_to_train_again(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "run.json").write_text("{}")
    assert main(["-q", "recommend", "--run", str(out), "--user", "u0"]) == 2
    assert capsys.readouterr().err.strip() == (f"error: {out}: model.safetensors missing; the run did not finish an "
                                               "epoch; train it again (`twotower train --out DIR`)")


def test_a_run_killed_while_sealing_says_that_resume_seals_it(tmp_path, monkeypatch, capsys):
    from twotower.pipeline import artifacts

    dataset = write_dataset(tmp_path / "data", n_users=24, per_user=8)
    out = tmp_path / "run"
    train = ["-q", "train", "--train", str(dataset["train"]), "--valid", str(dataset["valid"]), "--out", str(out),
             *FAST]
    write_json = artifacts.atomic_write_json

    def killed_at_the_manifest(path: Path, obj: object) -> None:
        if Path(path).name == artifacts.MANIFEST:
            raise KeyboardInterrupt  # run.json is sealed already, the manifest not yet written
        write_json(path, obj)

    with monkeypatch.context() as m:
        m.setattr(artifacts, "atomic_write_json", killed_at_the_manifest)
        assert main(train) == 130
    capsys.readouterr()
    assert main(["-q", "recommend", "--run", str(out), "--user", "u0"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: {out}: manifest.json is missing from a sealed run, so its files cannot be verified; if its training "
        f"was stopped while sealing it, `twotower train --resume --out {out}` with the same data and settings seals "
        "it again; otherwise restore it (or retrain), or pass --no-verify to load it unchecked at your own risk")
    assert main([*train, "--resume"]) == 0
    assert main(["-q", "recommend", "--run", str(out), "--user", "u0"]) == 0
