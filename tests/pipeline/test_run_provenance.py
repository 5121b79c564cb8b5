"""A run records the sha256 of the data files it was given, and its manifest covers its data/*.csv copies."""
from __future__ import annotations

import hashlib
import json

import pytest

from tests.explain.explain_tiny_run import train_tiny_run
from twotower.config import load_config
from twotower.errors import IntegrityError
from twotower.pipeline.artifacts import TrainedRun
from twotower.pipeline.run import train_run


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _run(tmp_path):
    return train_tiny_run(tmp_path / "run", epochs=1, extra=("train.checkpoint=true", "model.item_item.enabled=false"))


def _append_row(path) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("u0,i1,99999,4\n")


def test_run_json_records_the_sha256_of_each_input_file(tmp_path) -> None:
    out = _run(tmp_path)
    data = tmp_path / "run_data"
    recorded = json.loads((out / "run.json").read_text())["input_sha256"]
    assert recorded == {"train": _sha(data / "train.csv"), "valid": _sha(data / "valid.csv"),
                        "items": _sha(data / "items.csv")}


def test_an_edited_data_copy_is_refused_on_load_and_on_resume(tmp_path) -> None:
    out = _run(tmp_path)
    listed = json.loads((out / "manifest.json").read_text())["sha256"]
    assert listed["data/train.csv"] == _sha(out / "data" / "train.csv")
    assert listed["data/valid.csv"] == _sha(out / "data" / "valid.csv")
    _append_row(out / "data" / "train.csv")
    with pytest.raises(IntegrityError, match=r"data/train\.csv: sha256 mismatch"):
        TrainedRun.load(out)
    settings = json.loads((out / "config.json").read_text())
    with pytest.raises(IntegrityError, match=r"data/train\.csv: sha256 mismatch"):
        train_run(load_config(base=settings, overrides=["train.epochs=2"]), out, resume=True)


def test_a_run_whose_manifest_lacks_the_data_copies_loads_and_resumes(tmp_path) -> None:
    out = _run(tmp_path)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["sha256"] = {k: v for k, v in manifest["sha256"].items() if not k.startswith("data/")}
    (out / "manifest.json").write_text(json.dumps(manifest))  # as written before the copies were listed
    TrainedRun.load(out)
    settings = json.loads((out / "config.json").read_text())
    train_run(load_config(base=settings, overrides=["train.epochs=2"]), out, resume=True)
    assert "data/train.csv" in json.loads((out / "manifest.json").read_text())["sha256"]  # sealed again, listed
    TrainedRun.load(out)


def test_a_resume_reading_the_runs_own_copies_keeps_the_inputs_recorded(tmp_path) -> None:
    out = _run(tmp_path)
    before = json.loads((out / "run.json").read_text())["input_sha256"]
    settings = json.loads((out / "config.json").read_text())
    own = [f"data.train={json.dumps(str(out / 'data' / 'train.csv'))}",
           f"data.valid={json.dumps(str(out / 'data' / 'valid.csv'))}"]
    train_run(load_config(base=settings, overrides=[*own, "train.epochs=2"]), out, resume=True)
    assert json.loads((out / "run.json").read_text())["input_sha256"] == before  # not the copies' digests


def test_a_run_shipped_without_its_data_copies_still_loads(tmp_path) -> None:
    # a model folder copied to a server without data/ (serving reads none of it) was refused as "missing" once
    # the copies were listed in the manifest
    import shutil

    out = _run(tmp_path)
    shutil.rmtree(out / "data")
    run = TrainedRun.load(out)
    assert run.item_vocab is not None
