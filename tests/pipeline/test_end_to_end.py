"""The CLI path a new user takes: files -> train -> evaluate -> recommend (on a small known dataset)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from tests.synthetic import write_dataset
from twotower.cli.main import main
from twotower.pipeline.artifacts import TrainedRun

FAST = ["train.batch_size=32", "model.user.hidden=[32]", "model.item.hidden=[32]", "model.user.out_dim=16",
        "model.item.out_dim=16", "model.user.history_len=8", "--no-progress"]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return write_dataset(tmp_path_factory.mktemp("data"))


@pytest.fixture(scope="module")
def run_dir(dataset, tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "run"
    rc = main(["-q", "train", "--train", str(dataset["train"]), "--valid", str(dataset["valid"]), "--test", str(dataset["test"]),
               "--items", str(dataset["items"]), "--out", str(out), "--epochs", "8", "data.item_multi=[\"genres\"]",
               "data.title_col=title", *FAST])
    assert rc == 0
    return out


def test_run_folder_is_complete_and_self_describing(run_dir):
    for name in ("config.json", "run.json", "model.safetensors", "vocab/users.json", "vocab/items.json", "history.npz",
                 "log.jsonl", "curves.png", "metrics.json", "eval.txt", "data/train.csv", "checkpoint/state.json"):
        assert (run_dir / name).exists(), name
    cfg = json.loads((run_dir / "config.json").read_text())
    assert cfg["train"]["epochs"] == 8
    log = [json.loads(line) for line in (run_dir / "log.jsonl").read_text().splitlines()]
    assert {"loss", "inbatch_accuracy", "item_std", "collapse_alarm", "item_uniformity", "valid_NDCG@10"} <= set(log[0])


def test_model_learns_the_group_structure(run_dir):
    """Users of group A must get group-A items (i0..i14) on top."""
    run = TrainedRun.load(run_dir)
    scores = run.scores_for_users(np.arange(len(run.user_vocab)))
    items = np.array(run.item_vocab.ids)
    in_group_a = np.array([int(i[1:]) < 15 for i in items])
    users = np.array(run.user_vocab.ids)
    a_users = np.array([int(u[1:]) < 20 for u in users])
    top = np.argsort(-scores, axis=1)[:, :5]
    hit = np.where(a_users[:, None], in_group_a[top], ~in_group_a[top])
    assert hit.mean() > 0.9


def test_two_tower_beats_popularity_on_held_out_data(run_dir):
    rows = json.loads((run_dir / "metrics.json").read_text())["test"]
    by = {r["model"].split(" ")[0]: r for r in rows}
    assert by["two-tower"]["Recall@10"] > by["popularity"]["Recall@10"]


def test_recommend_users_all_writes_csv_with_external_ids(run_dir, dataset, tmp_path, capsys):
    out = tmp_path / "recs.csv"
    rc = main(["-q", "recommend", "--run", str(run_dir), "--users", "all", "--k", "5",
               "--exclude", str(dataset["train"]), str(dataset["valid"]), "--out", str(out)])
    assert rc == 0
    recs = pd.read_csv(out, dtype={"user_id": str, "item_id": str})
    assert list(recs.columns) == ["user_id", "item_id", "rank", "score"]
    assert recs.groupby("user_id").size().eq(5).all()
    seen = pd.concat([pd.read_csv(dataset["train"]), pd.read_csv(dataset["valid"])])
    seen_pairs = set(zip(seen["user_id"].astype(str), seen["item_id"].astype(str)))
    assert not any((u, i) in seen_pairs for u, i in zip(recs["user_id"], recs["item_id"]))
    assert (recs.groupby("user_id")["score"].apply(lambda s: s.is_monotonic_decreasing)).all()


def test_recommend_one_user_json_and_titles(run_dir, capsys):
    assert main(["-q", "recommend", "--run", str(run_dir), "--user", "u3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["items"]) == 10
    first = out["items"][0]
    assert {"item_id", "score", "title"} <= set(first)
    assert main(["-q", "recommend", "--run", str(run_dir), "--user", "u3", "--k", "3"]) == 0
    text = capsys.readouterr().out
    assert "Movie" in text and "1." in text


def test_recommend_for_a_new_user_from_history(run_dir, capsys):
    def group_b_in_top5(history: str) -> int:
        assert main(["-q", "recommend", "--run", str(run_dir), "--history", history, "--json", "--k", "5"]) == 0
        ids = [it["item_id"] for it in json.loads(capsys.readouterr().out)["items"]]
        assert not set(history.split(",")) & set(ids)
        return sum(int(i[1:]) >= 15 for i in ids)

    # the history steers the list to its group. 8 epochs on 40 users learn a 3-item history loosely: over
    # training seeds the group-B history gets 3-5 group-B items of 5 and the group-A history 0-1
    from_b, from_a = group_b_in_top5("i20,i21,i22"), group_b_in_top5("i0,i1,i2")
    assert from_b >= 3 and from_b > from_a, (from_b, from_a)


def test_unknown_user_is_a_clear_error(run_dir, capsys):
    assert main(["-q", "recommend", "--run", str(run_dir), "--user", "nobody"]) == 2
    assert "--user: unknown user 'nobody'" in capsys.readouterr().err
    assert main(["-q", "recommend", "--run", str(run_dir), "--users", "u1,nobody"]) == 2
    assert "--users: user 2 of 2: unknown user 'nobody'" in capsys.readouterr().err
    assert main(["-q", "recommend", "--run", str(run_dir), "--history", "i20,ghost"]) == 2
    assert "--history: item 2 of 2: unknown item 'ghost'" in capsys.readouterr().err


def test_evaluate_prints_one_table_with_baselines(run_dir, capsys):
    assert main(["-q", "evaluate", "--run", str(run_dir), "--ks", "10", "--baselines", "popularity,ease,itemknn"]) == 0
    out = capsys.readouterr().out
    for name in ("two-tower", "popularity", "ease", "itemknn", "Recall", "NDCG", "MRR", "Coverage", "fit_s", "protocol"):
        assert name in out


def test_missing_column_error_names_file_and_column(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"user": ["a"], "item_id": ["b"], "timestamp": [1]}).to_csv(bad, index=False)
    assert main(["-q", "train", "--train", str(bad), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "bad.csv" in err and "user_id" in err


def test_resume_continues_from_the_checkpoint(dataset, tmp_path):
    out = tmp_path / "r"
    args = ["-q", "train", "--train", str(dataset["train"]), "--valid", str(dataset["valid"]), "--out", str(out), "--no-eval", *FAST,
            "train.patience=100"]
    assert main([*args, "--epochs", "2"]) == 0
    assert main([*args, "--epochs", "4", "--resume"]) == 0
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in log] == [1, 2, 3, 4]
    # an uninterrupted 4-epoch run with the same seed reaches the same loss
    out2 = tmp_path / "r2"
    assert main([*args[:-len(FAST) - 2], "--out", str(out2), *FAST, "train.patience=100", "--epochs", "4"]) == 0
    log2 = [json.loads(line) for line in (out2 / "log.jsonl").read_text().splitlines()]
    assert log2[-1]["loss"] == pytest.approx(log[-1]["loss"], rel=1e-4)


def test_a_resume_that_trains_nothing_keeps_the_evaluation_of_its_unchanged_weights(dataset, tmp_path):
    """`--resume` removed metrics.json and eval.txt before training; when it then trained nothing (the checkpoint
    already at train.epochs) the weights came out byte for byte the same and, with --no-eval, the run was left
    with no metrics. They are kept now when the weights are those they scored, and still removed when not."""
    out = tmp_path / "r"
    args = ["-q", "train", "--train", str(dataset["train"]), "--valid", str(dataset["valid"]),
            "--test", str(dataset["test"]), "--out", str(out), *FAST]
    assert main([*args, "--epochs", "2"]) == 0
    metrics = (out / "metrics.json").read_bytes()
    weights = (out / "model.safetensors").read_bytes()
    assert main([*args, "--epochs", "2", "--resume", "--no-eval"]) == 0
    assert (out / "model.safetensors").read_bytes() == weights
    assert (out / "metrics.json").read_bytes() == metrics and (out / "eval.txt").is_file()
    assert not list(out.glob(".*before-resume"))  # nothing set aside is left behind
    TrainedRun.load(out)  # still sealed: the manifest verifies
    assert main([*args, "--epochs", "3", "--resume", "--no-eval", "train.patience=100"]) == 0  # trained further
    assert not (out / "metrics.json").exists() and not (out / "eval.txt").exists()
    assert not list(out.glob(".*before-resume"))


def test_a_resume_that_keeps_the_evaluation_shows_it_and_does_not_evaluate_again(dataset, tmp_path, capsys, caplog,
                                                                                  monkeypatch):
    """A resume of a finished run said "kept metrics.json, eval.txt: the weights are those they scored", then ran
    the closing evaluation anyway and rewrote both (minutes on a large catalogue). The kept table is shown instead;
    a resume whose eval settings differ from those the files were scored with still evaluates."""
    import importlib

    evaluate_run = importlib.import_module("twotower.pipeline.evaluate_run")  # the package exports the function
    out = tmp_path / "r"
    args = ["train", "--train", str(dataset["train"]), "--valid", str(dataset["valid"]), "--test", str(dataset["test"]),
            "--out", str(out), "--epochs", "2", *FAST]
    assert main(["-q", *args]) == 0
    table = (out / "eval.txt").read_text()
    kept = {n: (out / n).read_bytes() for n in ("metrics.json", "eval.txt")}
    capsys.readouterr()
    evaluated = []
    real = evaluate_run.evaluate_run
    monkeypatch.setattr(evaluate_run, "evaluate_run", lambda *a, **k: evaluated.append(1) or real(*a, **k))
    with caplog.at_level("INFO", logger="twotower"):
        assert main([*args, "--resume"]) == 0
    assert evaluated == []
    assert {n: (out / n).read_bytes() for n in kept} == kept
    said = capsys.readouterr().out
    assert table in said and "the test evaluation kept in eval.txt" in said
    assert "resume: kept metrics.json, eval.txt" in caplog.text
    TrainedRun.load(out)  # still sealed
    assert main(["-q", *args, "--resume", "eval.ks=[5]"]) == 0  # other eval settings: scored again, with them
    assert evaluated == [1]
    assert "Recall@5" in json.loads((out / "metrics.json").read_text())["test"][0]


def test_a_kept_evaluation_names_the_run_folder_it_is_in_now(dataset, tmp_path, capsys):
    """The kept table was eval.txt as written, whose line on the k it leaves out named the folder (and the working
    directory) of the command that wrote it: a copied run's resume said "k=50,100 (eval.ks) are in a/metrics.json;
    `twotower evaluate --run a` prints every k", the original run, not the one resumed."""
    import shutil

    first, copy = tmp_path / "a", tmp_path / "b"
    args = ["train", "--train", str(dataset["train"]), "--valid", str(dataset["valid"]), "--test", str(dataset["test"]),
            "--epochs", "2", "eval.baselines=[]", *FAST]
    assert main(["-q", *args, "--out", str(first)]) == 0
    shutil.copytree(first, copy)
    capsys.readouterr()
    assert main([*args, "--out", str(copy), "--resume"]) == 0  # without -q: the pointer is an information line
    said = capsys.readouterr().out
    assert "the test evaluation kept in eval.txt" in said
    assert f"k=50,100 (eval.ks) are in {copy / 'metrics.json'}; `twotower evaluate --run {copy}` prints every k" in said
    assert str(first) not in said
    assert main(["-q", *args, "--out", str(copy), "--resume"]) == 0
    assert "(eval.ks) are in" not in capsys.readouterr().out  # -q leaves the pointer out, as after a new evaluation


def test_a_resume_that_stops_before_it_seals_leaves_the_finished_run_as_it_was(dataset, tmp_path, monkeypatch, capsys):
    """A resume of a finished run that diverged (or was interrupted) before it sealed the run again left its weights
    replaced by the checkpoint's (the item-item term gone), config.json holding the failed settings, and the
    manifest and metrics deleted: recommend then refused the run's own index. The run comes back whole; the epochs
    the resume trained stay in the checkpoint."""
    out = tmp_path / "r"
    args = ["-q", "train", "--train", str(dataset["train"]), "--valid", str(dataset["valid"]),
            "--test", str(dataset["test"]), "--out", str(out), *FAST]
    assert main([*args, "--epochs", "1"]) == 0
    assert main(["-q", "index", "build", "--run", str(out), "--index", "flat"]) == 0
    names = ("model.safetensors", "config.json", "run.json", "manifest.json", "metrics.json", "eval.txt")
    before = {n: (out / n).read_bytes() for n in names}
    assert main([*args, "--epochs", "3", "--resume", "--no-eval", "train.lr=1e30", "train.grad_clip=0"]) == 2
    err = capsys.readouterr().err
    # the rate it suggests is one the towers learn with, not a tenth of 1e30
    assert "training diverged" in err and "--resume train.lr=0.002`" in err
    assert {n: (out / n).read_bytes() for n in names} == before
    assert not (out / ".before-resume").exists()
    assert main(["-q", "recommend", "--run", str(out), "--user", "u1", "--k", "3"]) == 0  # its index still fits

    # a resume killed outright (SIGKILL) leaves the files set aside: the next resume puts them back first
    from twotower.pipeline.resume_snapshot import HELD_DIR, hold_sealed_run

    held = hold_sealed_run(out)
    assert held is not None and (out / HELD_DIR / "model.safetensors").is_file()
    (out / "manifest.json").unlink()  # what a resume does first
    (out / "config.tmp").write_text("{}")  # a rewrite, as every writer of the run makes one: a new file swapped in
    (out / "config.tmp").replace(out / "config.json")
    assert main([*args, "--epochs", "1", "--resume", "--no-eval"]) == 0
    assert (out / "metrics.json").read_bytes() == before["metrics.json"]  # the run as it was, trained no further
    assert (out / "model.safetensors").read_bytes() == before["model.safetensors"]
    assert not (out / HELD_DIR).exists()


def test_the_run_records_the_thread_count_it_trained_on(dataset, tmp_path, monkeypatch):
    """train.threads left unset was written as null, while the count the run picked (TWOTOWER_THREADS, else half
    the idle cores) changes the floats: `--config RUN/config.json` elsewhere trained another model."""
    monkeypatch.setenv("TWOTOWER_THREADS", "1")
    out = tmp_path / "r"
    assert main(["-q", "train", "--train", str(dataset["train"]), "--out", str(out), "--no-eval", "--epochs", "1",
                 *FAST]) == 0
    assert json.loads((out / "config.json").read_text())["train"]["threads"] == 1
    monkeypatch.setenv("TWOTOWER_THREADS", "2")  # read back: the recorded count, not this environment's
    assert main(["-q", "train", "--config", str(out / "config.json"), "--out", str(tmp_path / "again"),
                 "--no-eval"]) == 0
    assert (tmp_path / "again" / "model.safetensors").read_bytes() == (out / "model.safetensors").read_bytes()


def test_sparse_adam_option_trains(dataset, tmp_path):
    out = tmp_path / "sparse"
    args = ["-q", "train", "--train", str(dataset["train"]), "--valid", str(dataset["valid"]), "--out", str(out), "--no-eval",
            "--epochs", "2", "train.optimizer=sparse_adam", "model.item.use_id=true", *FAST]
    assert main(args) == 0
    run = TrainedRun.load(out)
    assert run.model.item_tower.id_emb.sparse
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert log[1]["loss"] < log[0]["loss"]


def test_device_setting_is_checked(dataset, tmp_path, capsys):
    import torch

    args = ["-q", "train", "--train", str(dataset["train"]), "--valid", str(dataset["valid"]), "--out", str(tmp_path / "d"),
            "--no-eval", "--epochs", "1", *FAST]
    assert main([*args, "train.device=tpu"]) == 2
    assert "train.device" in capsys.readouterr().err
    if not torch.cuda.is_available():
        assert main([*args, "train.device=cuda"]) == 2
        assert "no CUDA device" in capsys.readouterr().err


def test_nccl_needs_a_cuda_device():
    from twotower.config import TrainConfig
    from twotower.errors import ConfigError
    from twotower.training.trainer import init_distributed

    with pytest.raises(ConfigError, match="nccl reduces CUDA tensors only"):
        init_distributed(TrainConfig(distributed_backend="nccl"))


def test_a_resume_of_a_run_that_kept_no_checkpoint_says_why(dataset, tmp_path, capsys):
    """`--resume` of a run trained with train.checkpoint=false said "no checkpoint in RUN/checkpoint; train without
    --resume first", not that the run was told to keep none."""
    out = tmp_path / "r"
    assert main(["-q", "train", "--train", str(dataset["train"]), "--out", str(out), "--no-eval", "--epochs", "1",
                 "train.checkpoint=false", *FAST]) == 0
    capsys.readouterr()
    assert main(["-q", "train", "--out", str(out), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "(the run was trained with train.checkpoint=false, which keeps none)" in err
    assert "train it again with train.checkpoint=true" in err and "train without --resume first" not in err
