"""`twotower train --out DIR` over a folder of the user's own files (and no run) is refused, as export and index
build refuse such a folder; it trained into it without a word, mixing the run's files with theirs."""
from __future__ import annotations

import pytest

from tests.synthetic import write_dataset
from twotower.cli.main import main
from twotower.config import ConfigError, load_config
from twotower.pipeline.run import train_run

FAST = ["train.batch_size=32", "model.user.hidden=[16]", "model.item.hidden=[16]", "model.user.out_dim=16",
        "model.item.out_dim=16", "model.user.history_dim=16", "model.user.history_len=8", "train.threads=1",
        "eval.baselines=[]", "data.rating_col=null", "train.epochs=1", "model.item_item.enabled=false"]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return write_dataset(tmp_path_factory.mktemp("data"), n_users=16, per_user=6)


def _args(dataset, out):
    return ["-q", "train", "--train", str(dataset["train"]), "--valid", str(dataset["valid"]), "--out", str(out),
            *FAST, "--no-progress"]


def test_a_folder_of_the_users_files_is_refused_and_left_as_it_was(dataset, tmp_path, capsys):
    out = tmp_path / "tr"
    (out / "notes").mkdir(parents=True)
    (out / "mine.txt").write_text("mine")
    (out / "notes" / "a.md").write_text("a")
    assert main(_args(dataset, out)) != 0
    err = capsys.readouterr().err
    assert f"--out {out}: a non-empty folder that holds no run (mine.txt, notes/a.md)" in err
    assert "choose a new or empty folder, or move them out" in err
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == ["mine.txt", "notes", "notes/a.md"]
    cfg = load_config(None, [*FAST, f"data.train={dataset['train']}", f"data.valid={dataset['valid']}"])
    with pytest.raises(ConfigError, match=r"^out .*tr: a non-empty folder that holds no run \(mine\.txt"):
        train_run(cfg, out)


def test_an_empty_folder_a_run_and_the_runs_own_input_are_still_trained_into(dataset, tmp_path):
    out = tmp_path / "tr"
    out.mkdir()
    (out / "train.csv").write_bytes(dataset["train"].read_bytes())  # the data the run reads, kept beside it
    args = _args(dataset, out)
    args[args.index("--train") + 1] = str(out / "train.csv")
    assert main(args) == 0
    (out / "mine.txt").write_text("mine")  # a folder holding a run: the new run replaces it, the user's file kept
    assert main(args) == 0
    assert (out / "mine.txt").read_text() == "mine" and (out / "run.json").is_file()


def test_the_checkpoint_folder_of_a_run_is_refused_and_the_run_still_resumes(dataset, tmp_path, capsys):
    # RUN/checkpoint holds model.safetensors, one of the files that mark a run: a new run trained into it replaced
    # the parent run's checkpoint with its own weights, and the parent run no longer resumed
    run = tmp_path / "ml"
    assert main(_args(dataset, run)) == 0
    checkpoint = run / "checkpoint"
    before = {p.name: p.read_bytes() for p in checkpoint.iterdir()}
    assert main(_args(dataset, checkpoint)) == 2
    err = capsys.readouterr().err
    assert f"--out {checkpoint}: is the checkpoint/ folder of the run {run}, which a new run trained there would " \
           "damage; choose a folder outside it" in err
    assert {p.name: p.read_bytes() for p in checkpoint.iterdir()} == before
    assert main(["-q", "train", "--resume", "--out", str(run), "train.epochs=2", "--no-progress"]) == 0


def test_a_folder_named_like_a_runs_own_beside_no_run_is_trained_into(dataset, tmp_path):
    assert main(_args(dataset, tmp_path / "checkpoint")) == 0
