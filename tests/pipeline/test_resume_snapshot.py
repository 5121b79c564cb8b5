"""A finished run kept whole while `train --resume` continues it (pipeline/resume_snapshot.py): the files a resume
rewrites are set aside and put back when it stops before it seals the run again."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from twotower.pipeline.resume_snapshot import HELD_DIR, hold_sealed_run, put_back_leftover
from twotower.training.checkpoint import RESUME_BEST, take_back_resume_best


def _replace(path: Path, text: str) -> None:
    """A rewrite as every writer of a run makes it: a new file swapped in."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


@pytest.fixture
def run(tmp_path: Path) -> Path:
    out = tmp_path / "run"
    (out / "checkpoint").mkdir(parents=True)
    for name, text in (("manifest.json", "m"), ("model.safetensors", "old"), ("config.json", "c"), ("run.json", "r"),
                       ("metrics.json", "x")):
        (out / name).write_text(text)
    return out


def _checkpoint(out: Path, epoch: int, best: int) -> None:
    (out / "checkpoint" / "state.json").write_text(json.dumps({"epoch": epoch, "best_epoch": best}))


def test_a_resume_stopped_before_sealing_puts_the_run_back_and_keeps_its_best_weights(run):
    _checkpoint(run, 3, 2)  # the resume's best epoch (2) is older than its last: its weights live in the run only
    held = hold_sealed_run(run)
    assert held is not None
    _replace(run / "model.safetensors", "best of epoch 2")
    _replace(run / "config.json", "new settings")
    (run / "manifest.json").unlink()
    (run / "metrics.json").unlink()
    held.put_back()
    assert [(run / n).read_text() for n in ("model.safetensors", "config.json", "manifest.json", "metrics.json")] == \
        ["old", "c", "m", "x"]
    assert not (run / HELD_DIR).exists()
    assert (run / RESUME_BEST).read_text() == "best of epoch 2"  # for the next resume, which takes it back first
    assert take_back_resume_best(run) and (run / "model.safetensors").read_text() == "best of epoch 2"
    assert not (run / RESUME_BEST).exists() and not take_back_resume_best(run)


def test_the_checkpoints_best_last_epoch_is_not_kept_twice(run):
    _checkpoint(run, 3, 3)  # the next resume writes epoch 3's weights itself
    held = hold_sealed_run(run)
    _replace(run / "model.safetensors", "epoch 3")
    held.put_back()
    assert (run / "model.safetensors").read_text() == "old" and not (run / RESUME_BEST).exists()


def test_a_resume_that_sealed_the_run_again_keeps_it(run):
    held = hold_sealed_run(run)
    _replace(run / "model.safetensors", "new")
    _replace(run / "manifest.json", "new manifest")
    held.put_back()  # an error after the seal (loading the run back): the new run stands
    assert (run / "model.safetensors").read_text() == "new" and not (run / HELD_DIR).exists()


def test_what_a_killed_resume_set_aside_is_put_back_before_the_next_reads_the_run(run):
    _checkpoint(run, 2, 2)
    hold_sealed_run(run)
    _replace(run / "config.json", "the killed resume's settings")
    (run / "manifest.json").unlink()
    assert put_back_leftover(run)
    assert (run / "config.json").read_text() == "c" and (run / "manifest.json").read_text() == "m"
    assert not put_back_leftover(run)


def test_an_unsealed_run_has_nothing_to_keep(run):
    (run / "manifest.json").unlink()  # a first training stopped: nothing finished
    assert hold_sealed_run(run) is None and not (run / HELD_DIR).exists()


def test_a_new_run_swapped_in_leaves_what_a_killed_resume_of_the_old_one_set_aside(run, tmp_path):
    """A fresh `train` into a run whose resume was killed carried `.before-resume/` over, and the next `--resume`
    put the replaced run's files back over the new run (its settings, its item-item term)."""
    from twotower.pipeline.resume_snapshot import resume_leftover
    from twotower.pipeline.staging import swap_in

    _checkpoint(run, 2, 2)
    hold_sealed_run(run)
    (run / ".metrics.json.before-resume").write_text("old evaluation")
    (run / RESUME_BEST).write_text("old best")
    (run / "notes.txt").write_text("the user's own")
    stage = tmp_path / "stage"
    stage.mkdir()
    for name in ("manifest.json", "model.safetensors", "config.json", "run.json"):
        (stage / name).write_text("new " + name)
    swap_in(stage, run)
    assert not (run / HELD_DIR).exists() and not (run / ".metrics.json.before-resume").exists()
    assert not (run / RESUME_BEST).exists() and (run / "notes.txt").read_text() == "the user's own"
    assert not put_back_leftover(run) and (run / "config.json").read_text() == "new config.json"
    assert resume_leftover(".before-resume/model.safetensors") and not resume_leftover("data/.x.before-resume")


def test_a_reader_of_a_run_whose_resume_was_killed_says_so(tmp_path):
    """The killed resume had rewritten run.json (no longer sealed): readers said "weights do not match this model"."""
    from tests.explain.explain_tiny_run import train_tiny_run
    from twotower.errors import IntegrityError
    from twotower.pipeline.artifacts import TrainedRun

    out = train_tiny_run(tmp_path / "run", epochs=1)
    hold_sealed_run(out)
    (out / "manifest.json").unlink()
    _replace(out / "run.json", json.dumps({"resumed": True}))
    with pytest.raises(IntegrityError, match="a `twotower train --resume` was killed while it continued this run"):
        TrainedRun.load(out)
