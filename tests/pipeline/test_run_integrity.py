"""Integrity of a finished run folder and of checkpoints (issue 7).

A bit flip or a truncation in any artefact a loader reads is refused with an
IntegrityError naming the file; nothing loads silently wrong.
"""
from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from twotower.errors import IntegrityError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serving"))
from tiny_run import build_tiny_run  # noqa: E402

RUN_FILES = ["model.safetensors", "history.npz", "vocab/users.json", "vocab/items.json", "run.json", "config.json",
             "items.jsonl", "features/items.json"]


@pytest.fixture(scope="module")
def sealed_run(tmp_path_factory) -> Path:
    return build_tiny_run(tmp_path_factory.mktemp("integrity"))


def _copy(run: Path, dst: Path) -> Path:
    shutil.copytree(run, dst)
    return dst


def flip_byte(path: Path, where: float = 0.7) -> None:
    data = bytearray(path.read_bytes())
    data[int(len(data) * where)] ^= 0x10
    path.write_bytes(bytes(data))


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def test_finished_run_is_sealed_with_a_manifest(sealed_run):
    from twotower.pipeline.artifacts import TrainedRun, verify_manifest

    assert verify_manifest(sealed_run)
    TrainedRun.load(sealed_run)


@pytest.mark.parametrize("damage", [flip_byte, truncate], ids=["bitflip", "truncated"])
@pytest.mark.parametrize("rel", RUN_FILES)
def test_damaged_run_file_is_refused_naming_it(sealed_run, tmp_path, rel, damage):
    from twotower.pipeline.artifacts import TrainedRun

    run = _copy(sealed_run, tmp_path / "run")
    if not (run / rel).exists():
        pytest.skip(f"{rel} not written by this run")
    damage(run / rel)
    with pytest.raises(IntegrityError, match=rel.split("/")[-1].replace(".", r"\.")):
        TrainedRun.load(run)


def test_bitflip_in_weights_data_is_caught_by_the_manifest(sealed_run, tmp_path):
    """Regression: a flipped byte inside a tensor used to load silently (safetensors checks the header only)."""
    from twotower.pipeline.artifacts import TrainedRun

    run = _copy(sealed_run, tmp_path / "run")
    flip_byte(run / "model.safetensors", 0.9)
    with pytest.raises(IntegrityError, match=r"model\.safetensors: sha256 mismatch"):
        TrainedRun.load(run)


def test_a_file_loading_reads_added_after_sealing_is_refused(sealed_run, tmp_path):
    """Regression: items.jsonl copied into a run trained without an item table was read unchecked (and an
    item_id it did not know ended in an IndexError traceback); the seal lists every such file the run wrote."""
    from twotower.pipeline.artifacts import MANIFEST_FILES, TrainedRun
    from twotower.utils.atomic import read_json

    listed = read_json(sealed_run / "manifest.json")["sha256"]
    absent = [rel for rel in MANIFEST_FILES if rel not in listed]
    assert absent, "the tiny run writes every optional file: plant one it lacks"
    run = _copy(sealed_run, tmp_path / "run")
    (run / absent[0]).parent.mkdir(parents=True, exist_ok=True)
    (run / absent[0]).write_text("{}\n")
    with pytest.raises(IntegrityError, match=absent[0].replace(".", r"\.") + r": not listed in manifest\.json"):
        TrainedRun.load(run)


@pytest.mark.parametrize("damage", [flip_byte, truncate], ids=["bitflip", "truncated"])
def test_unsealed_run_with_damaged_history_or_metadata_is_an_integrity_error(sealed_run, tmp_path, damage):
    """Without a manifest (older runs), damaged history.npz / items.jsonl still fail cleanly, not with BadZipFile."""
    from twotower.pipeline.artifacts import TrainedRun

    for rel in ("history.npz", "items.jsonl"):
        run = _copy(sealed_run, tmp_path / f"run-{rel}")
        (run / "manifest.json").unlink()
        damage(run / rel)
        with pytest.raises(IntegrityError, match=rel.replace(".", r"\.")):
            TrainedRun.load(run)


def test_retraining_into_a_folder_drops_the_stale_manifest(sealed_run, tmp_path):
    """A folder being rewritten is unsealed until training finishes (never verified against old checksums)."""
    from twotower.pipeline.artifacts import save_run_data

    run = _copy(sealed_run, tmp_path / "run")

    class Prep:  # only what save_run_data reads
        def __getattr__(self, name):
            raise RuntimeError("stop after the manifest is dropped")

    with pytest.raises(RuntimeError, match="stop"):
        from twotower.config import load_config

        save_run_data(run, load_config(), Prep(), None)
    assert not (run / "manifest.json").exists()


# ---------------------------------------------------------------- checkpoints


def _checkpoint(tmp_path: Path):
    from twotower.training.checkpoint import save_checkpoint

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
    rng = np.random.default_rng(0)
    save_checkpoint(tmp_path / "ck", model, [opt], {"epoch": 3, "best": 0.5, "history": [{"loss": 1.25}]}, rng)
    return tmp_path / "ck", model, opt, rng


@pytest.mark.parametrize("name", ["model.safetensors", "optimizer.pt", "rng.safetensors"])
@pytest.mark.parametrize("damage", [flip_byte, truncate], ids=["bitflip", "truncated"])
def test_damaged_checkpoint_file_is_refused(tmp_path, name, damage):
    from twotower.training.checkpoint import load_checkpoint

    ck, model, opt, rng = _checkpoint(tmp_path)
    damage(ck / name)
    with pytest.raises(IntegrityError, match=name.replace(".", r"\.")):
        load_checkpoint(ck, model, [opt], rng)


def test_edited_checkpoint_state_is_refused(tmp_path):
    """Regression: a changed number in state.json (still valid JSON) used to resume from a wrong epoch."""
    from twotower.training.checkpoint import load_checkpoint

    ck, model, opt, rng = _checkpoint(tmp_path)
    text = (ck / "state.json").read_text()
    (ck / "state.json").write_text(text.replace('"epoch": 3', '"epoch": 9'))
    with pytest.raises(IntegrityError, match=r"state\.json: checksum mismatch"):
        load_checkpoint(ck, model, [opt], rng)
    truncate(ck / "state.json")
    with pytest.raises(IntegrityError, match=r"state\.json"):
        load_checkpoint(ck, model, [opt], rng)


def test_intact_checkpoint_round_trips(tmp_path):
    from twotower.training.checkpoint import load_checkpoint

    ck, model, opt, rng = _checkpoint(tmp_path)
    state = load_checkpoint(ck, model, [opt], rng)
    assert state["epoch"] == 3 and "state_sha256" not in state


def test_a_path_that_is_not_a_run_names_the_run_to_pass(sealed_run, tmp_path):
    """`--run runs` (the parent of runs) or `--run runs/ml/index` (inside one) said only "train one"."""
    from twotower.errors import NotFoundError
    from twotower.pipeline.artifacts import TrainedRun

    parent = tmp_path / "runs"
    run = _copy(sealed_run, parent / "ml")
    with pytest.raises(NotFoundError, match=rf"the folder holds runs: pass one of '{re.escape(str(run))}'"):
        TrainedRun.load(parent)
    with pytest.raises(NotFoundError, match=rf"it lies inside the run '{re.escape(str(run))}': pass that folder"):
        TrainedRun.load(run / "model.safetensors")
    with pytest.raises(NotFoundError, match=r"train one with `twotower train --out DIR`"):
        TrainedRun.load(tmp_path / "elsewhere")
