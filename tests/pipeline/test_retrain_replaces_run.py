"""A new `twotower train` into a folder holding an earlier run replaces that run whole.

Walkthrough finding: retraining without ``--test`` left the old data/test.csv, metrics.json, eval.txt,
tuned_baselines.json, index/ and onnx/ behind, and `twotower evaluate` then scored the new model against
the old test split with the old tuned baselines. Only files a run (or a command on it) writes are removed;
``--resume`` keeps the folder; bad input leaves the old run as it was.
"""
from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.synthetic import write_dataset
from twotower.cli.main import main
from twotower.pipeline.artifacts import TrainedRun, clear_previous_run, verify_manifest

FAST = ["train.batch_size=32", "model.user.hidden=[16]", "model.item.hidden=[16]", "model.user.out_dim=16",
        "model.item.out_dim=16", "model.item.id_dim=16", "model.user.history_dim=16", "model.user.history_len=8",
        "train.threads=1", "eval.baselines=[]", "data.rating_col=null", "--no-progress", "--epochs", "1"]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> dict[str, Path]:
    return write_dataset(tmp_path_factory.mktemp("data"), n_users=24, per_user=8)


def _train_args(dataset: dict[str, Path], out: Path, *extra: str, test: bool = False) -> list[str]:
    args = ["-q", "train", "--train", str(dataset["train"]), "--valid", str(dataset["valid"]), "--out", str(out)]
    return [*args, *(["--test", str(dataset["test"])] if test else []), *FAST, *extra]


@pytest.fixture(scope="module")
def old_run(dataset, tmp_path_factory) -> Path:
    """A finished run trained WITH --test, plus what later commands add: tuned baselines, an index, an export."""
    out = tmp_path_factory.mktemp("old") / "run"
    assert main(_train_args(dataset, out, test=True)) == 0
    fp = TrainedRun.load(out).fingerprint()
    (out / "tuned_baselines.json").write_text("{}")
    index = out / "index"
    index.mkdir()
    (index / "vectors.npy").write_bytes(b"v")
    (index / "tune.json").write_text("{}")
    (index / "meta.json").write_text(json.dumps({"meta_sha256": "x", "model_fingerprint": fp,
                                                  "sha256": {"vectors.npy": "x"}}))
    onnx = out / "onnx"
    onnx.mkdir()
    for name in ("user_tower.onnx", "item_tower.onnx", "item_embeddings.npy", "item_ids.json", "user_ids.json"):
        (onnx / name).write_bytes(b"x")
    (onnx / "export.json").write_text(json.dumps({"format": 1, "run": "elsewhere", "model_fingerprint": fp}))
    return out


def _copy(run: Path, dst: Path) -> Path:
    shutil.copytree(run, dst)
    return dst


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_retraining_without_test_leaves_nothing_of_the_old_run(old_run, dataset, tmp_path, caplog, capsys):
    out = _copy(old_run, tmp_path / "a")
    (out / "notes.txt").write_text("mine")  # the user's own files stay
    (out / "onnx" / "README").write_text("mine")
    with caplog.at_level(logging.WARNING):
        assert main(_train_args(dataset, out)) == 0
    # tuned_baselines.json stays: each entry is keyed by digests of the data it was tuned on (re-tuned on a change)
    assert (out / "tuned_baselines.json").exists()
    for gone in ("metrics.json", "eval.txt", "data/test.csv", "index", "onnx/export.json",
                 "onnx/user_tower.onnx", "onnx/item_embeddings.npy"):
        assert not (out / gone).exists(), gone
    assert (out / "notes.txt").read_text() == "mine" and (out / "onnx" / "README").read_text() == "mine"
    assert verify_manifest(out)  # the new run is complete and sealed
    assert json.loads((out / "config.json").read_text())["data"]["test"] is None
    said = " ".join(r.getMessage() for r in caplog.records)
    assert f"{out} held an earlier run" in said and "metrics.json" in said
    capsys.readouterr()
    # later commands no longer find the old test split
    assert main(["-q", "evaluate", "--run", str(out), "--baselines", ""]) == 2
    assert "no test split" in capsys.readouterr().err


def test_an_export_naming_the_run_folder_goes_too(old_run, dataset, tmp_path):
    out = _copy(old_run, tmp_path / "a")
    (out / "model.safetensors").write_bytes(b"damaged")  # no fingerprint to compare: the run path decides
    (out / "manifest.json").unlink()
    export = json.loads((out / "onnx" / "export.json").read_text())
    (out / "onnx" / "export.json").write_text(json.dumps({**export, "run": str(out)}))
    other = out / "other-export"
    other.mkdir()
    (other / "export.json").write_text(json.dumps({**export, "run": str(tmp_path / "b"), "model_fingerprint": "f"}))
    assert main(_train_args(dataset, out)) == 0
    assert not (out / "onnx").exists()
    assert (other / "export.json").exists()  # another model's export: not this run's to remove


def test_a_crash_mid_training_leaves_the_old_run_whole(old_run, dataset, tmp_path, monkeypatch, capsys):
    from twotower.training.trainer import Trainer

    out = _copy(old_run, tmp_path / "a")
    before = _snapshot(out)

    def crash(self, *, resume=False, curves=True):
        raise KeyboardInterrupt  # killed in the first epoch

    monkeypatch.setattr(Trainer, "fit", crash)
    assert main(_train_args(dataset, out)) == 130
    # the new run trained beside the old one, which it would replace only once finished
    after = _snapshot(out)
    assert {k: v for k, v in after.items() if k != ".twotower.lock"} == \
        {k: v for k, v in before.items() if k != ".twotower.lock"}
    assert verify_manifest(out)
    TrainedRun.load(out)
    assert [p.name for p in tmp_path.iterdir()] == ["a"]  # the staging folder held nothing to resume: removed
    assert "a still holds the earlier run, untouched" in capsys.readouterr().err


@pytest.mark.parametrize("bad", [
    ["data.item_multi=genres"],  # feature columns without --items: refused while reading the data
    ["train.examples=sequence"],  # refused with the config (no sequence user tower), before the data is read
    ["--resume", "train.checkpoint=false"],  # nothing to resume in a folder without a checkpoint
    ["--resume", "model.user.history=mean"],  # another model: its checkpoint cannot continue this one
    ["--resume", "model.item.id_dim=8"],  # other shapes
    ["model.user.head=false", "model.user.hidden=[]", "model.user.history_dim=6"],  # widths known from the data
], ids=["features-without-items", "sequence-without-its-tower", "resume-without-checkpoint", "resume-other-model",
        "resume-other-shapes", "head-width"])
def test_bad_input_leaves_the_old_run_as_it_was(old_run, dataset, tmp_path, bad, capsys):
    out = _copy(old_run, tmp_path / "a")
    if "train.checkpoint=false" in bad:  # the other resume cases keep it, so the check they name is what refuses
        shutil.rmtree(out / "checkpoint")
    before = _snapshot(out)
    assert main(_train_args(dataset, out, *bad)) == 2
    assert "error:" in capsys.readouterr().err
    assert _snapshot(out) == before


@pytest.mark.parametrize("bad", ["damaged-optimizer", "train.optimizer=sparse_adam"])
def test_a_checkpoint_that_cannot_be_loaded_leaves_the_run_sealed(old_run, dataset, tmp_path, bad, capsys):
    # audit: the checkpoint was first loaded inside fit(), after the manifest, metrics.json and eval.txt were
    # removed and config.json rewritten, so a refused resume (here with the checkpoint kept) unsealed the run
    out = _copy(old_run, tmp_path / "a")
    extra: list[str] = []
    if bad == "damaged-optimizer":
        data = bytearray((out / "checkpoint" / "optimizer.pt").read_bytes())
        data[len(data) // 2] ^= 0xFF
        (out / "checkpoint" / "optimizer.pt").write_bytes(bytes(data))
    else:
        extra.append(bad)
    before = _snapshot(out)
    assert main(_train_args(dataset, out, "--resume", *extra, test=True)) == 2
    err = capsys.readouterr().err
    assert "error:" in err
    assert bad.split("=")[0] in err or bad == "damaged-optimizer"  # a settings change is named as one
    assert _snapshot(out) == before
    assert verify_manifest(out)


def test_resume_names_the_model_setting_that_differs(old_run, dataset, tmp_path, capsys):
    out = _copy(old_run, tmp_path / "a")
    assert main(_train_args(dataset, out, "--resume", "model.user.history=mean")) == 2
    err = capsys.readouterr().err
    assert "model.user.history: 'recency' in the run, 'mean' now" in err
    verify_manifest(out)  # still sealed: nothing was rewritten


def test_resume_on_other_data_is_refused_before_the_run_is_touched(old_run, dataset, tmp_path, capsys):
    out = _copy(old_run, tmp_path / "a")
    lines = dataset["train"].read_text().splitlines()
    fewer = tmp_path / "train_fewer.csv"  # drops the last users' rows: fewer users (and maybe items)
    fewer.write_text("\n".join(lines[: len(lines) // 2]) + "\n")
    before = _snapshot(out)
    args = ["-q", "train", "--train", str(fewer), "--valid", str(dataset["valid"]), "--out", str(out), *FAST, "--resume"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "cannot resume" in err and "the run was trained on" in err
    assert _snapshot(out) == before


def test_resume_with_an_edited_item_table_is_refused(dataset, tmp_path, capsys):
    """The checkpoint holds the item table's values (features, text embeddings) as buffers: a resume with an edited
    table (one year changed) put the old values back and trained on them, while the run's items.jsonl showed the
    new ones. It is refused like other data; the same table resumes."""
    items = pd.read_csv(dataset["items"])
    tables = {}
    for name, year in (("same", 1980), ("edited", 2030)):
        tables[name] = tmp_path / f"items_{name}.csv"
        items.assign(year=[year, *items["year"].iloc[1:]]).to_csv(tables[name], index=False)
    out = tmp_path / "run"
    feats = ["--items", str(tables["same"]), "data.item_numeric=[\"year\"]", "data.item_multi=[\"genres\"]"]
    assert main(_train_args(dataset, out, *feats)) == 0
    before = _snapshot(out)
    assert main(_train_args(dataset, out, "--items", str(tables["edited"]), *feats[2:], "--epochs", "2",
                            "--resume")) == 2
    err = capsys.readouterr().err
    assert "cannot resume" in err and "the item features differ from the run's ('item_tower.features.numeric'" in err
    assert _snapshot(out) == before
    assert main(_train_args(dataset, out, *feats, "--epochs", "2", "--resume", "train.patience=100")) == 0


def test_resume_keeps_the_run_it_continues(old_run, dataset, tmp_path):
    out = _copy(old_run, tmp_path / "a")
    assert main(_train_args(dataset, out, "--epochs", "2", "--resume", "train.patience=100")) == 0
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in log] == [1, 2]
    assert (out / "tuned_baselines.json").exists() and (out / "index" / "meta.json").exists()


def test_resume_names_a_stopped_new_run_beside_the_one_it_continues(old_run, dataset, tmp_path, caplog):
    # a retrain into the run killed outright left its epochs in the staging folder, and `--resume` of the run went on
    # with the earlier run without a word of them
    out = _copy(old_run, tmp_path / "a")
    stage = tmp_path / ".a.staging-999999999"  # a writer that is gone
    (stage / "checkpoint").mkdir(parents=True)
    (stage / "checkpoint" / "state.json").write_text("{}")
    with caplog.at_level("WARNING"):
        assert main(_train_args(dataset, out, "--epochs", "2", "--resume", "train.patience=100")) == 0
    assert (f"{stage} holds a new run into {out} that was stopped before it finished (its epochs are in its "
            f"checkpoint); this --resume continues the run in {out}. `twotower train --out {stage} --resume`") in caplog.text


def test_resume_trains_with_the_learning_rate_and_weight_decay_it_is_given(old_run, dataset, tmp_path):
    # audit: the optimizer's saved settings came back with its state, so `--resume train.lr=...` trained on at
    # the run's rate (and weight decay) while config.json recorded the new one
    from twotower.training.checkpoint import load_checkpoint
    from twotower.training.loop import make_optimizers

    out = _copy(old_run, tmp_path / "a")
    assert main(_train_args(dataset, out, "--epochs", "2", "--resume", "train.patience=100",
                            "train.lr=0.0005", "train.weight_decay=0.25")) == 0
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert log[0]["lr"] != 0.0005 and log[1]["lr"] == 0.0005
    model = TrainedRun.load(out).model
    model.detach_item_item()  # fitted after training: the checkpoint holds the trained weights alone
    opt = make_optimizers(model.parameters(), lr=1.0, weight_decay=0.0)
    load_checkpoint(out / "checkpoint", model, opt, np.random.default_rng(0))
    group = opt[0].param_groups[0]  # the settings it was built with, the moments of the checkpoint
    assert group["lr"] == 1.0 and group["weight_decay"] == 0.0 and "base_lr" not in group
    assert opt[0].state and all(int(st["step"]) == int(next(iter(opt[0].state.values()))["step"])
                                for st in opt[0].state.values())


def _built_from_other_weights(out: Path) -> None:
    """The run's index and export as if built before the weights changed (another model fingerprint)."""
    for name, extra in (("index/meta.json", {}), ("onnx/export.json", {"run": str(out)})):
        record = json.loads((out / name).read_text())
        (out / name).write_text(json.dumps({**record, **extra, "model_fingerprint": "0" * 32}))


def test_resume_names_the_stale_index_and_keeps_the_scores_of_unchanged_weights(old_run, dataset, tmp_path, caplog):
    out = _copy(old_run, tmp_path / "a")
    _built_from_other_weights(out)
    assert (out / "metrics.json").exists() and (out / "eval.txt").exists()
    with caplog.at_level(logging.WARNING):
        assert main(_train_args(dataset, out, "--epochs", "2", "--resume", "--no-eval", "train.patience=100")) == 0
    # epoch 2 does not beat epoch 1 here (the next test): the saved weights are those the metrics scored, so they
    # are kept (tests/pipeline/test_end_to_end.py: removed where the resume changes the weights)
    assert (out / "metrics.json").exists() and (out / "eval.txt").exists()
    assert (out / "index" / "meta.json").exists()  # kept (serve refuses it by fingerprint), but named
    assert f"{out / 'index'} holds an index of the weights before this resume" in caplog.text
    assert f"twotower index build --run {out}" in caplog.text and "onnx" in caplog.text
    # an export is read by no command, so none refuses it: the warning said serve and recommend did
    assert (f"{out / 'onnx'} holds an ONNX export of the weights before this resume; its towers score with those "
            "weights wherever it is deployed (no command reads an export to refuse it) until it is rebuilt: "
            "twotower export") in caplog.text


def test_a_resume_that_keeps_the_best_weights_says_their_index_still_fits(old_run, dataset, tmp_path, caplog):
    """Before: every resume warned "serve and recommend refuse it until it is rebuilt", also when no epoch of the
    resume beat the best one, so the weights, their fingerprint and the index built from them stayed valid
    (serve and recommend took it) and the user rebuilt it for nothing."""
    out = _copy(old_run, tmp_path / "a")
    before = TrainedRun.load(out).fingerprint()
    # without -q: these are information lines, which -q leaves out for its command whatever level the caller set
    args = [a for a in _train_args(dataset, out, "--epochs", "2", "--resume", "--no-eval", "train.patience=100") if a != "-q"]
    with caplog.at_level(logging.INFO):  # epoch 2 of this data does not beat epoch 1 (asserted below)
        assert main(args) == 0
    assert TrainedRun.load(out).fingerprint() == before
    assert "of the weights before this resume" not in caplog.text
    assert f"{out / 'index'} holds an index of the same weights (this resume found no better epoch)" in caplog.text
    assert f"{out / 'onnx'} holds an ONNX export of the same weights" in caplog.text


def test_a_folder_without_a_run_is_left_alone(tmp_path):
    (tmp_path / "config.json").write_text("{}")  # e.g. the user's own config next to --out .
    (tmp_path / "metrics.json").write_text("{}")
    assert clear_previous_run(tmp_path) == []
    assert (tmp_path / "config.json").exists() and (tmp_path / "metrics.json").exists()


def test_the_new_runs_input_files_are_kept(old_run, tmp_path):
    out = _copy(old_run, tmp_path / "a")
    removed = clear_previous_run(out, keep=(out / "data" / "test.csv",))
    assert "data/test.csv" not in removed and (out / "data" / "test.csv").exists()
    assert "data/train.csv" in removed and "model.safetensors" in removed


def test_resume_on_another_split_of_the_same_users_and_items_is_refused(dataset, tmp_path, capsys):
    """`--resume` with another train.seed under data.split=random used to continue the weights on a new split
    (same users and items, so nothing noticed) and rewrite data/*.csv: the test rows were partly ones the
    first epochs had trained on."""
    out = tmp_path / "run"
    args = ["-q", "train", "--data", str(dataset["all"]), "data.split=random", "--out", str(out), *FAST]
    assert main([*args, "train.seed=1"]) == 0
    before = _snapshot(out)
    assert main([*args, "train.seed=2", "--resume"]) == 2
    err = capsys.readouterr().err
    assert f"the train interactions differ from the run's {out / 'data' / 'train.csv'}" in err
    assert _snapshot(out) == before
    assert main([*args, "train.seed=1", "--resume", "--epochs", "2"]) == 0  # the run's own split resumes



def test_resume_with_another_split_names_the_split_setting_that_changed(dataset, tmp_path, capsys):
    """A resume on another split of the run's data named no setting: "(N rows now; e.g. other data.split settings
    than the run's, or an edited FILE)" for --data, and for --dataset "(80,000 rows now; the run was trained with
    one)". The split settings that differ from the run's are named, as the resume's log names other settings."""
    out = tmp_path / "run"
    args = ["-q", "train", "--data", str(dataset["all"]), "--out", str(out), *FAST, "--no-eval"]
    assert main(args) == 0
    assert main([*args, "data.split=random", "--resume"]) == 2
    err = capsys.readouterr().err
    assert f"the train interactions differ from the run's {out / 'data' / 'train.csv'}" in err
    assert "data.split: 'temporal' in the run, 'random' now)" in err
    assert main([*args, "data.ratios=[0.5,0.25,0.25]", "--resume"]) == 2
    assert "data.ratios: [0.8, 0.1, 0.1] in the run, [0.5, 0.25, 0.25] now)" in capsys.readouterr().err

def test_resume_with_another_valid_file_names_the_files_not_a_seed(dataset, tmp_path, capsys):
    """Before: "(9,596 rows now; e.g. another train.seed with data.split=temporal, or an edited file)" for a run
    trained on --train/--valid files, where no seed plays a part."""
    out = tmp_path / "run"
    assert main(_train_args(dataset, out, "--no-eval")) == 0
    argv = ["-q", "train", "--train", str(dataset["train"]), "--out", str(out), *FAST, "--no-eval", "--resume"]
    assert main([*argv, "--valid", str(dataset["test"])]) == 2
    err = capsys.readouterr().err
    assert (f"the valid interactions differ from the run's {out / 'data' / 'valid.csv'} ("
            in err) and f"--valid {dataset['test']} now, {dataset['valid']} when the run was trained)" in err
    assert "train.seed" not in err
    # data.valid=null, not --train alone: a --train given on resume now keeps the run's --valid (README: data flags
    # given apply on top), so only a valid file taken away leaves no such split
    assert main([*argv, "data.valid=null"]) == 2
    assert f"(no such split now; the run was trained with --valid {dataset['valid']})" in capsys.readouterr().err


def test_an_input_at_a_path_the_run_writes_is_refused_not_overwritten(dataset, old_run, tmp_path, capsys):
    """Before: `train --train data/train.csv --valid data/valid.csv --out .` saved the run's copy of the split over
    the user's files (canonical column names, ratings as floats, duplicates gone): the same command then failed on
    their own column names, and the next run into the folder removed the files as the old run's."""
    own = tmp_path / "data" / "train.csv"
    own.parent.mkdir()
    frame = pd.read_csv(dataset["train"]).rename(columns={"user_id": "customer", "item_id": "product"})
    frame.to_csv(own, index=False)
    before = own.read_bytes()
    args = ["-q", "train", "--train", str(own), "--valid", str(dataset["valid"]), "--out", str(tmp_path),
            "data.user_col=customer", "data.item_col=product", *FAST]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.strip() == (f"error: data.train ({own}, --train) is {tmp_path / 'data' / 'train.csv'}, a file the run "
                           f"writes: training into {tmp_path} would replace it with the run's own copy; keep the "
                           "input elsewhere or train into another --out")
    assert own.read_bytes() == before and not (tmp_path / "model.safetensors").exists()
    # an earlier run's own split, retrained on in its folder, is that run's copy: rewritten as it was
    out = _copy(old_run, tmp_path / "again")
    split = [str(out / "data" / f"{n}.csv") for n in ("train", "valid")]
    assert main(["-q", "train", "--train", split[0], "--valid", split[1], "--out", str(out), *FAST]) == 0


def test_why_a_part_differs_without_the_runs_config_is_said_not_a_traceback():
    # review of 8cbba878: the split settings' comparison read old.get("train") of a run whose config.json is gone
    # (None), and `--resume` of a --data or --dataset run whose data differed ended in an AttributeError
    from twotower.config import load_config
    from twotower.pipeline.run import _why_part_differs

    cfg = load_config(overrides=["data.dataset=movielens-100k", "data.split=random"])
    assert "data.split=random" in _why_part_differs(cfg, None, "train")
