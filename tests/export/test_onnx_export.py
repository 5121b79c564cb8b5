"""`twotower export --format onnx`: the ONNX towers reproduce PyTorch to <= 1e-5 on 1,000 users and all items
(issue 13, item 10), for pooled (recency, mean), transformer and GRU user towers, with and without user features,
on windows shorter than, equal to and longer than history_len, padded, and empty."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

N_USERS, N_ITEMS = 1100, 80


def _train(out: Path, history: str, user_features: bool, extra: tuple[str, ...] = ()) -> Path:
    from twotower.config import load_config
    from twotower.pipeline.run import train_run

    d = out.parent / (out.name + "_data")
    d.mkdir(parents=True)
    rng = np.random.default_rng(0)
    genres = ["Action", "Comedy", "Drama"]
    pd.DataFrame({"item_id": [f"i{i}" for i in range(N_ITEMS)], "title": [f"T{i}" for i in range(N_ITEMS)],
                  "genres": [genres[i % 3] + ("|" + genres[(i + 1) % 3] if i % 4 == 0 else "") for i in range(N_ITEMS)],
                  }).to_csv(d / "items.csv", index=False)
    rows = []
    for u in range(N_USERS):
        for t, i in enumerate(rng.choice(N_ITEMS, size=3 + u % 9, replace=False)):
            rows.append((f"u{u}", f"i{i}", t))
    df = pd.DataFrame(rows, columns=["user_id", "item_id", "timestamp"])
    last = df.groupby("user_id")["timestamp"].transform("max")
    df[df.timestamp < last].to_csv(d / "train.csv", index=False)
    df[df.timestamp == last].to_csv(d / "valid.csv", index=False)
    pd.DataFrame({"user_id": [f"u{u}" for u in range(N_USERS)], "age": [20 + u % 50 for u in range(N_USERS)]}).to_csv(
        d / "users.csv", index=False)
    overrides = [
        f"data.train={json.dumps(str(d / 'train.csv'))}", f"data.valid={json.dumps(str(d / 'valid.csv'))}",
        f"data.items={json.dumps(str(d / 'items.csv'))}", "data.item_multi=genres", "data.title_col=title",
        f"model.user.history={history}", "model.user.history_len=8", "model.user.hidden=32", "model.item.hidden=32",
        "model.user.out_dim=16", "model.item.out_dim=16", "model.user.history_dim=16", "model.item.id_dim=16",
        "train.epochs=1", "train.batch_size=256", "train.progress=false", "train.checkpoint=false", "train.threads=1",
        "eval.ks=10", "eval.baselines=",
    ]
    overrides += list(extra)
    if user_features:
        overrides += [f"data.users={json.dumps(str(d / 'users.csv'))}", "data.user_numeric=age"]
    train_run(load_config(overrides=overrides), out)
    return out


def _roundtrip(run_dir: Path, out: Path) -> dict:
    import onnxruntime as ort
    import torch

    from twotower.cli.main import main
    from twotower.pipeline.artifacts import TrainedRun

    assert main(["export", "--run", str(run_dir), "--format", "onnx", "--out", str(out)]) == 0
    meta = json.loads((out / "export.json").read_text())
    assert meta["check"]["users"] == 1000 and meta["check"]["items"] == N_ITEMS
    # the folder alone says what each input holds: rows not ids, the padding side and value, unknown ids
    meaning = meta["user_tower"]["input_meaning"]
    assert sorted(meaning) == sorted(meta["user_tower"]["inputs"])
    assert "history" not in meaning or ("padded on the left with pad_item" in meaning["history"]
                                        and "not item ids" in meaning["history"] and "not in item_ids.json" in meaning["history"]
                                        # a pad between items: left out, its column still counted (recency, transformer)
                                        and "one between items is left out" in meaning["history"])
    assert "user_rows" not in meaning or "new_user_row" in meaning["user_rows"]
    assert "index into item_ids.json" in meta["item_tower"]["input_meaning"]["item_rows"]
    run = TrainedRun.load(run_dir)
    # independent of the exporter's own check: every user, three history lengths, and all items
    user = ort.InferenceSession(str(out / "user_tower.onnx"), providers=["CPUExecutionProvider"])
    item = ort.InferenceSession(str(out / "item_tower.onnx"), providers=["CPUExecutionProvider"])
    names = [i.name for i in user.get_inputs()]
    rows = np.arange(len(run.user_vocab), dtype=np.int64)
    assert len(rows) >= 1000
    L = run.model.history_len
    pad = run.model.pad_item
    # windows shorter than, equal to and longer than history_len, most users' padded on the left: a short window
    # gives the vector of the same items padded to L (what the CLI and service compute), a longer one that of its
    # newest L items (as they cut it); a batch of one too, whose shapes the tracer never saw
    for length in (L, 3, L - 1, L + 5):
        hist = run.history.last_windows(rows, length, pad).astype(np.int64)
        assert (hist == pad).any()  # padding is exercised
        window = np.pad(hist, ((0, 0), (max(0, L - length), 0)), constant_values=pad)[:, -L:]
        with torch.no_grad():
            ref = run.model.user_tower(torch.as_tensor(rows), torch.as_tensor(window)).numpy()
        feed = {k: v for k, v in (("user_rows", rows), ("history", hist)) if k in names}
        assert np.abs(user.run(None, feed)[0] - ref).max() <= 1e-5
        assert np.abs(user.run(None, {k: v[:1] for k, v in feed.items()})[0] - ref[:1]).max() <= 1e-5
    # a pad between items ([a, pad, b], as export.json's input_meaning describes it): read as PyTorch reads it
    if "history" in names:
        gap = run.history.last_windows(rows, L, pad).astype(np.int64)
        gap[:, L // 2] = pad
        with torch.no_grad():
            ref = run.model.user_tower(torch.as_tensor(rows), torch.as_tensor(gap)).numpy()
        feed = {k: v for k, v in (("user_rows", rows), ("history", gap)) if k in names}
        assert np.abs(user.run(None, feed)[0] - ref).max() <= 1e-5
    # a user with no items yet, sent as a zero-width window: the empty-history vector the CLI and service give
    empty = np.zeros((2, 0), np.int64)
    feed = {k: v for k, v in (("user_rows", rows[:2]), ("history", empty)) if k in names}
    with torch.no_grad():
        ref = run.model.user_tower(torch.as_tensor(rows[:2]), torch.full((2, L), run.model.pad_item)).numpy()
    assert np.abs(user.run(None, feed)[0] - ref).max() <= 1e-5
    got = item.run(None, {"item_rows": np.arange(run.n_items, dtype=np.int64)})[0]
    assert np.abs(got - run.item_embeddings()).max() <= 1e-5
    emb = np.load(out / "item_embeddings.npy", allow_pickle=False)
    ids = json.loads((out / "item_ids.json").read_text())
    assert emb.shape == (N_ITEMS, run.model.item_tower.output_dim) and ids == list(run.item_vocab.ids)
    np.testing.assert_array_equal(emb, run.item_embeddings())
    return meta


@pytest.mark.parametrize("pooling", ["recency", "mean"])
def test_pooled_tower_with_user_features_round_trips(tmp_path, pooling):
    run = _train(tmp_path / "pooled", pooling, user_features=True)
    meta = _roundtrip(run, tmp_path / "onnx")
    assert meta["user_tower"]["inputs"] == ["user_rows", "history"] and meta["user_tower"]["history"] == pooling


def test_check_onnx_reads_every_kind_of_window_even_for_a_few_users(tmp_path, monkeypatch):
    """The export's own check cycled window lengths by batch of 256 users, so `--check-users 50` compared only
    full windows: a graph wrong on short, long or empty windows passed. Each batch now sees all four."""
    import twotower.export.onnx as onnx_export
    from twotower.pipeline.artifacts import TrainedRun

    run = TrainedRun.load(_train(tmp_path / "seq", "transformer", user_features=False))
    onnx_export.export_onnx(run, tmp_path / "onnx", check_users=5)
    widths = []
    import onnxruntime as ort

    class Recording(ort.InferenceSession):
        def run(self, output_names, feed, *a, **k):
            if "history" in feed:
                widths.append(feed["history"].shape[1])
            return super().run(output_names, feed, *a, **k)

    monkeypatch.setattr(ort, "InferenceSession", Recording)
    onnx_export.check_onnx(run, tmp_path / "onnx", n_users=5)
    L = run.model.history_len
    assert sorted(set(widths)) == sorted({0, L // 2, L, L + 7})


def test_feature_tower_export_embeds_a_new_user_from_a_fresh_process(tmp_path):
    """A user tower reading user features took ``user_rows`` with no row for a user not in training, so a deployer
    could not embed a new user from a history, which ``recommend --history`` and ``POST /recommend`` do on the same
    run. export.json's ``new_user_row`` stands for that user; run by onnxruntime in another process, it gives the
    CLI's vector (``TrainedRun.history_vectors``)."""
    import subprocess
    import sys

    from twotower.export import export_onnx
    from twotower.pipeline.artifacts import TrainedRun

    run = TrainedRun.load(_train(tmp_path / "pooled", "recency", user_features=True))
    out = tmp_path / "onnx"
    report = export_onnx(run, out, check_users=10)
    meta = json.loads((out / "export.json").read_text())
    assert meta["user_tower"]["new_user_row"] == report.new_user_row == N_USERS
    histories = [["i3", "i7", "i11"], ["i5"]]
    script = (
        "import json, sys, numpy as np, onnxruntime as ort\n"
        "d = sys.argv[1]; meta = json.load(open(d + '/export.json')); ids = json.load(open(d + '/item_ids.json'))\n"
        "s = ort.InferenceSession(d + '/user_tower.onnx', providers=['CPUExecutionProvider'])\n"
        "row = {x: i for i, x in enumerate(ids)}; L = 3\n"
        "h = [[meta['pad_item']] * (L - len(x)) + [row[i] for i in x] for x in json.loads(sys.argv[2])]\n"
        "rows = np.full(len(h), meta['user_tower']['new_user_row'], np.int64)\n"
        "v = s.run(None, {'user_rows': rows, 'history': np.array(h, np.int64)})[0]\n"
        "np.save(d + '/new_users.npy', v)\n"
    )
    subprocess.run([sys.executable, "-c", script, str(out), json.dumps(histories)], check=True, timeout=120)
    want = run.history_vectors([np.array([run.item_vocab.index(i) for i in h]) for h in histories])
    np.testing.assert_allclose(np.load(out / "new_users.npy"), want, atol=1e-5)


@pytest.mark.parametrize("kind", ["transformer", "gru"])
def test_sequence_tower_with_user_features_round_trips(tmp_path, kind):
    """The new-user row is added to a copy of the tower; a sequence tower reads the item tower's ID table, which
    that copy must share (a copied table was traced as a constant that requires grad: the export failed)."""
    run = _train(tmp_path / "seq", kind, user_features=True)
    meta = _roundtrip(run, tmp_path / "onnx")
    assert meta["user_tower"]["inputs"] == ["user_rows", "history"] and meta["user_tower"]["new_user_row"] == N_USERS


def test_id_tower_export_has_no_new_user_row(tmp_path):
    """A user-ID tower cannot embed a new user (history_vectors refuses), so no row stands for one."""
    from twotower.export import export_onnx
    from twotower.pipeline.artifacts import TrainedRun

    run = TrainedRun.load(_train(tmp_path / "ids", "recency", user_features=True, extra=("model.user.use_id=true",)))
    export_onnx(run, tmp_path / "onnx", check_users=10)
    assert json.loads((tmp_path / "onnx" / "export.json").read_text())["user_tower"]["new_user_row"] is None


@pytest.mark.parametrize("kind", ["transformer", "gru", "transformer-left"])
def test_sequence_tower_round_trips(tmp_path, kind):
    extra = ("model.user.seq_positions=left",) if kind.endswith("-left") else ()
    kind = kind.removesuffix("-left")
    run = _train(tmp_path / "seq", kind, user_features=False, extra=extra)
    meta = _roundtrip(run, tmp_path / "onnx")
    assert meta["user_tower"]["inputs"] == ["history"] and meta["user_tower"]["history"] == kind


def test_user_tower_without_history_exports_user_rows_only(tmp_path):
    """An ID + feature user tower (model.user.history=none) reads no history: the export offered a ``history``
    input the graph did not keep, and its own check then failed with onnxruntime's 'Invalid input name'."""
    run = _train(tmp_path / "nohist", "none", user_features=True, extra=("model.user.use_id=true",))
    meta = _roundtrip(run, tmp_path / "onnx")
    assert meta["user_tower"]["inputs"] == ["user_rows"]


def test_export_out_that_is_a_file_is_one_line(tmp_path, capsys):
    from twotower.cli.main import main

    f = tmp_path / "f"
    f.write_text("x")
    assert main(["export", "--run", str(tmp_path), "--out", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a file, not a folder" in err


@pytest.mark.parametrize("failure", [KeyboardInterrupt, "check fails"])
def test_an_interrupted_or_failed_re_export_leaves_the_previous_export_whole(tmp_path, monkeypatch, failure):
    """Re-exporting into an export folder used to replace the towers and embeddings file by file: Ctrl-C (or a
    failed onnxruntime check) left the new towers beside the old embeddings and an export.json of the old model."""
    import torch

    import twotower.export.onnx as onnx_export
    from twotower.errors import IntegrityError
    from twotower.pipeline.artifacts import TrainedRun

    run_dir = _train(tmp_path / "pooled", "recency", user_features=False)
    out = tmp_path / "onnx"
    onnx_export.export_onnx(TrainedRun.load(run_dir), out, check_users=10)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    retrained = TrainedRun.load(run_dir)
    with torch.no_grad():
        for p in retrained.model.parameters():
            p.add_(0.5)

    def interrupted_check(*a, **k):
        if failure is KeyboardInterrupt:
            raise KeyboardInterrupt
        raise IntegrityError("the ONNX towers differ from PyTorch")

    monkeypatch.setattr(onnx_export, "check_onnx", interrupted_check)
    with pytest.raises(KeyboardInterrupt if failure is KeyboardInterrupt else IntegrityError):
        onnx_export.export_onnx(retrained, out, check_users=10)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    # no temporaries left; the writer lock of onnx/ is kept beside it, as `twotower export` keeps it
    assert sorted(p.name for p in tmp_path.iterdir()) == [".onnx.twotower.lock", "onnx", "pooled", "pooled_data"]
    monkeypatch.undo()
    report = onnx_export.export_onnx(retrained, out, check_users=10)
    assert report.out == out and {p.name for p in out.iterdir()} == set(before)
    assert (out / "user_tower.onnx").read_bytes() != before["user_tower.onnx"]


def _export_cli(run: Path, out: Path, *extra: str) -> int:
    from twotower.cli.main import main

    return main(["export", "--run", str(run), "--out", str(out), "--check-users", "10", *extra])


def test_export_over_another_runs_export_replaces_it_whole_and_says_so(tmp_path, caplog):
    """An export into a folder holding an older export (here of another run, with a file an older version wrote)
    used to mix the new files with the old ones; the folder is now replaced as a whole, with a warning listing
    what was removed."""
    pooled = _train(tmp_path / "pooled", "recency", user_features=True)
    ids = _train(tmp_path / "ids", "none", user_features=True, extra=("model.user.use_id=true",))
    out = tmp_path / "onnx"
    assert _export_cli(pooled, out) == 0
    (out / ".export.json.tmp-99999999-x.tmp").mkdir()  # a temporary of an export killed mid-write
    caplog.clear()
    assert _export_cli(ids, out) == 0
    meta = json.loads((out / "export.json").read_text())
    assert meta["run"] == str(ids.resolve()) and meta["user_tower"]["inputs"] == ["user_rows"]
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["export.json", "user_tower.onnx", "item_tower.onnx", "item_embeddings.npy", "item_ids.json", "user_ids.json"])
    warning = " ".join(r.getMessage() for r in caplog.records if r.levelname == "WARNING")
    assert f"the earlier export of {pooled.resolve()}" in warning and "user_tower.onnx" in warning


@pytest.mark.parametrize("earlier_export", [False, True])
def test_export_into_a_folder_with_unrelated_files_is_refused_unless_forced(tmp_path, capsys, caplog, earlier_export):
    """Files no export wrote (a folder of notes, or a note left beside an earlier export) are never removed unasked:
    refused in one line before the run is even read; --force replaces the folder and names what it removed."""
    out = tmp_path / "onnx"
    run = _train(tmp_path / "pooled", "recency", user_features=False)
    if earlier_export:
        assert _export_cli(run, out) == 0
    out.mkdir(exist_ok=True)
    (out / "notes.txt").write_text("the user's own file")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    capsys.readouterr()
    assert _export_cli(tmp_path / "no-such-run", out) == 2  # refused before the run is read
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "notes.txt" in err and "--force" in err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    caplog.clear()
    assert _export_cli(run, out, "--force") == 0
    assert not (out / "notes.txt").exists() and (out / "export.json").is_file()
    assert "notes.txt" in " ".join(r.getMessage() for r in caplog.records if r.levelname == "WARNING")


@pytest.mark.parametrize("where", ["run", "parent"])
def test_export_out_that_is_or_contains_the_run_is_refused_even_with_force(tmp_path, capsys, monkeypatch, where):
    """The export replaces --out whole: --out RUN (or a folder holding it) would delete the run."""
    from twotower.errors import ConfigError
    from twotower.export import export_onnx
    from twotower.pipeline.artifacts import TrainedRun

    run = _train(tmp_path / "runs" / "pooled", "recency", user_features=False)
    out = run if where == "run" else run.parent
    before = sorted(p.name for p in run.iterdir())
    assert _export_cli(run, out, "--force") == 2
    assert "is or contains the run folder" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="is or contains the run folder"):
        export_onnx(TrainedRun.load(run), out, check_users=10, force=True)
    assert sorted(p.name for p in run.iterdir()) == before
    other = tmp_path / "other-run"  # another run's folder: --force is for stray files, not for a run
    other.mkdir()
    (other / "run.json").write_text("{}")
    assert _export_cli(run, other, "--force") == 2
    assert "holds a training run" in capsys.readouterr().err and (other / "run.json").exists()
    monkeypatch.chdir(run.parent)
    assert _export_cli(Path(run.name), Path(run.name) / "onnx") == 0  # a folder of its own inside the run (README)
    # export.json names the run by its absolute path, so it names the same run wherever it is read from (retraining
    # the run recognises the export as the run's by it)
    assert json.loads((run / "onnx" / "export.json").read_text())["run"] == str(run.resolve())


def test_export_into_a_runs_own_folder_is_refused_even_with_force(tmp_path, capsys):
    """--force replaced RUN/vocab with the export (removed: items.json, users.json): the run no longer loaded
    ("vocab/items.json: missing ... retrain the run"), though force is never to delete a run's files."""
    from twotower.errors import ConfigError
    from twotower.export import export_onnx
    from twotower.pipeline.artifacts import TrainedRun

    run = _train(tmp_path / "runs" / "pooled", "recency", user_features=False)
    before = {p.name: p.read_bytes() for p in (run / "vocab").iterdir()}
    assert _export_cli(run, run / "vocab", "--force") == 2
    err = capsys.readouterr().err
    assert f"--out {run / 'vocab'}: is a folder of the run {run}, whose files the export would replace; choose a " \
           f"folder of its own, e.g. {run / 'onnx'}" in err
    with pytest.raises(ConfigError, match="is a folder of the run"):
        export_onnx(TrainedRun.load(run), run / "data", check_users=10, force=True)
    assert {p.name: p.read_bytes() for p in (run / "vocab").iterdir()} == before
    TrainedRun.load(run)  # whole, its checksums verified


def test_readme_scoring_snippet_gives_the_cli_scores(tmp_path, monkeypatch):
    """The README's snippet that scores with the exported files alone runs as written (its folder and ids
    swapped for this run's) and gives the scores `recommend --history` ranks, for a sequence tower with user
    features (the ``user_rows`` branch)."""
    import re

    from twotower.export import export_onnx
    from twotower.pipeline.artifacts import TrainedRun

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme[readme.index("## Export (ONNX)"):readme.index("## Integrity")]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert '"runs/ml/onnx"' in code and '["50", "181", "172"]' in code
    run = TrainedRun.load(_train(tmp_path / "seq", "transformer", user_features=True))
    out = tmp_path / "onnx"
    export_onnx(run, out, check_users=10)
    code = code.replace('"runs/ml/onnx"', json.dumps(str(out))).replace('["50", "181", "172"]', '["i3", "i7", "i11"]')
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 - our own README
    want = run.history_vectors([np.array([run.item_vocab.index(i) for i in ("i3", "i7", "i11")])]) @ run.item_embeddings().T
    np.testing.assert_allclose(namespace["scores"], want, atol=1e-5)


def test_readme_scoring_snippet_says_an_id_tower_embeds_known_users_only(tmp_path):
    """Run against a user-ID tower (``new_user_row`` null), the snippet failed inside numpy ("int() argument must
    be ... not 'NoneType'"); it now stops with a sentence saying why and what to feed instead."""
    import re

    from twotower.export import export_onnx
    from twotower.pipeline.artifacts import TrainedRun

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme[readme.index("## Export (ONNX)"):readme.index("## Integrity")]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    run = TrainedRun.load(_train(tmp_path / "ids", "recency", user_features=True, extra=("model.user.use_id=true",)))
    out = tmp_path / "onnx"
    export_onnx(run, out, check_users=10)
    code = code.replace('"runs/ml/onnx"', json.dumps(str(out))).replace('["50", "181", "172"]', '["i3", "i7", "i11"]')
    with pytest.raises(AssertionError, match="reads user IDs: feed a known user's row"):
        exec(compile(code, "README.md", "exec"), {})  # noqa: S102 - our own README


def test_a_negative_row_is_refused_by_the_exported_towers_not_wrapped(tmp_path):
    """ONNX's Gather reads index -1 as the last row: `row.get(item_id, -1)` for an unknown id gave the last item's
    vector from item_tower.onnx, and in a history the padding row's, without an error; PyTorch refuses it."""
    import onnxruntime as ort

    from twotower.cli.main import main

    run = _train(tmp_path / "run", "recency", user_features=True)
    out = tmp_path / "onnx"
    assert main(["export", "--run", str(run), "--format", "onnx", "--out", str(out)]) == 0
    meta = json.loads((out / "export.json").read_text())
    opts = ort.SessionOptions()
    opts.log_severity_level = 4  # the refusal is the point: no red log lines in the test output
    user = ort.InferenceSession(str(out / "user_tower.onnx"), opts, providers=["CPUExecutionProvider"])
    item = ort.InferenceSession(str(out / "item_tower.onnx"), opts, providers=["CPUExecutionProvider"])
    new = np.array([meta["user_tower"]["new_user_row"]], np.int64)
    assert item.run(None, {"item_rows": np.array([0, 1], np.int64)})[0].shape[0] == 2  # valid rows still work
    with pytest.raises(Exception, match="out of data bounds"):
        item.run(None, {"item_rows": np.array([0, -1], np.int64)})
    with pytest.raises(Exception, match="out of data bounds"):
        user.run(None, {"user_rows": new, "history": np.array([[-1, 3]], np.int64)})
    with pytest.raises(Exception, match="out of data bounds"):
        user.run(None, {"user_rows": -new, "history": np.array([[2, 3]], np.int64)})


def test_export_onnx_from_python_names_its_arguments_not_the_cli_flags(tmp_path, capsys):
    """export_onnx's refusals read "--out runs/x: ... pass --force" from Python too, flags a notebook never typed."""
    from twotower.cli.main import main
    from twotower.errors import ConfigError
    from twotower.export import export_onnx

    a_file = tmp_path / "f"
    a_file.write_text("x")
    with pytest.raises(ConfigError, match=rf"^out {a_file}: exists and is a file"):
        export_onnx(object(), a_file)  # refused before the run is read
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match=rf"^out {notes}: a non-empty folder .* or pass force=True to replace it"):
        export_onnx(object(), notes)
    assert main(["export", "--run", str(tmp_path / "no-run"), "--out", str(notes)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --out {notes}: a non-empty folder") and "or pass --force to replace it" in err
