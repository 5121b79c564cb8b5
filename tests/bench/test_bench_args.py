"""The benchmark scripts check their arguments before any work: a bad ``--json`` or an unknown name is one line
(SystemExit with a message), not a traceback after the benchmark has run, and ``--json`` is written atomically."""
from __future__ import annotations

import os
import re
import sys
from types import SimpleNamespace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _no_work(*_: object, **__: object) -> None:
    raise AssertionError("the benchmark started its work before checking its arguments")


def _each_refused(monkeypatch: pytest.MonkeyPatch, module: Any, argv0: list[str],
                  cases: tuple[tuple[list[str], str], ...]) -> None:
    """``module.main()`` read from ``sys.argv = argv0 + argv`` exits naming ``msg``, for each ``(argv, msg)``."""
    for argv, msg in cases:
        monkeypatch.setattr(sys, "argv", [*argv0, *argv])
        with pytest.raises(SystemExit, match=msg):
            module.main()


def test_ml1m_json_folder_is_refused_before_the_data(bench: Any, tmp_path: Path) -> None:
    ml1m = bench("ml1m")
    data = tmp_path / "seq.txt"
    data.write_text("1 1\n1 2\n1 3\n2 1\n2 2\n2 3\n")
    with pytest.raises(SystemExit, match="is a folder"):
        ml1m.main(["--data", str(data), "--json", str(tmp_path), "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


def test_movielens100k_names_and_json_checked_before_the_data(bench: Any, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    ml100k = bench("movielens100k")
    monkeypatch.setattr(ml100k, "prepare_data", _no_work)
    _each_refused(monkeypatch, ml100k, ["movielens100k.py"], ((["--variants", "defualt"], "unknown variant 'defualt'"),
                                                               (["--baselines", "eas"], "did you mean 'ease'"),
                                                               (["--json", str(tmp_path)], "is a folder")))


def test_index_scale_json_folder_is_refused_before_the_catalogue(bench: Any, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    index_scale = bench("index_scale")
    monkeypatch.setattr(index_scale, "make_data", _no_work)
    with pytest.raises(SystemExit, match="is a folder"):
        index_scale.main(["--json", str(tmp_path)])


def test_scifact_json_folder_is_refused_before_the_data(bench: Any, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    scifact = bench("scifact")
    import twotower.search.beir

    monkeypatch.setattr(twotower.search.beir, "load_beir", _no_work)
    with pytest.raises(SystemExit, match="is a folder"):
        scifact.main(["--json", str(tmp_path), "--out", str(tmp_path / "out")])


def test_json_is_written_atomically(bench: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    common = bench("_common")
    target = tmp_path / "new" / "rows.json"
    assert common.check_json_out(str(target)) == target
    common.write_json_out(target, '{"a": 1}\n')
    assert target.read_text() == '{"a": 1}\n'
    import twotower.utils.atomic as atomic

    def fail(*_: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(atomic.os, "replace", fail)
    with pytest.raises(OSError):
        common.write_json_out(target, '{"a": 2}\n')
    assert target.read_text() == '{"a": 1}\n'  # the earlier results are still whole


def test_explain_json_folder_is_refused_before_training(bench: Any, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    explain = bench("explain")
    import twotower.pipeline.run

    monkeypatch.setattr(twotower.pipeline.run, "train_run", _no_work)
    monkeypatch.setattr(sys, "argv", ["explain.py", "--json", str(tmp_path), "--out", str(tmp_path / "run")])
    with pytest.raises(SystemExit, match="is a folder"):
        explain.main()


def test_ease_fit_runs_on_synthetic_items_without_the_ml1m_file(bench: Any, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    ease_fit = bench("ease_fit")
    monkeypatch.setattr(ease_fit, "ML1M", tmp_path / "missing.txt")
    monkeypatch.setattr(sys, "argv", ["ease_fit.py", "--synthetic-items", "60", "--rounds", "1", "--threads", "1"])
    assert ease_fit.main() == 0
    assert "random 60 items" in capsys.readouterr().out
    monkeypatch.setattr(sys, "argv", ["ease_fit.py", "--synthetic-items", "60", "--rounds", "0"])
    with pytest.raises(SystemExit, match="--rounds: must be at least 1, got 0"):
        ease_fit.main()


@pytest.mark.parametrize("argv, msg", [(["--n", "0"], "--n: must be at least 1, got 0"), (["--queries", "0"], "--queries: must be at least 1, got 0"),
                                       (["--k", "0"], "--k: must be at least 1, got 0"),
                                       (["--ml100k-embeddings", "missing.npy"], "no such file")])
def test_index_scale_bad_sizes_are_one_line(bench: Any, monkeypatch: pytest.MonkeyPatch, argv: list[str], msg: str) -> None:
    index_scale = bench("index_scale")
    monkeypatch.setattr(index_scale, "make_data", _no_work)
    with pytest.raises(SystemExit, match=msg):
        index_scale.main(argv)


def test_encoder_backends_bad_arguments_are_one_line(bench: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    encoder_backends = bench("encoder_backends")
    import twotower.text

    monkeypatch.setattr(twotower.text, "load_text_encoder", _no_work)
    (tmp_path / "corpus.jsonl").write_text('{"_id": "1", "title": "t", "text": "x"}\n')
    beir = ["--beir", str(tmp_path)]
    for argv, msg in ((["--beir", str(tmp_path / "missing")], "no corpus.jsonl"), ([*beir, "--docs", "0"], "--docs: must be at least 1"),
                      ([*beir, "--rounds", "0"], "--rounds: must be at least 1"),
                      # in this script's flag alone: it also named the CLI's --encoder-backend, no flag of the script
                      ([*beir, "--backends", "torch,onx"], r"^error: --backends: 'onx': not an encoder backend; "
                                                           r"choose from torch, torch-bf16, onnx, onnx-int8, auto$")):
        with pytest.raises(SystemExit, match=msg):
            encoder_backends.main(argv)


def test_explain_refuses_training_flags_beside_a_run_it_does_not_train(bench: Any, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """`--run DIR --epochs 3 model.user.history=mean` benchmarked DIR as it was, dropping both without a word."""
    explain = bench("explain")
    import twotower.pipeline.run

    monkeypatch.setattr(twotower.pipeline.run, "train_run", _no_work)
    monkeypatch.setattr(explain, "check_run", lambda run: None)  # the folder is not read before the refusal
    for extra, said in ((["--epochs", "3"], "--epochs sets"), (["model.user.history=mean"], "the override "
                                                                "'model.user.history=mean' sets"),
                        (["--out", "x", "--epochs", "3"], "--out, --epochs set")):
        monkeypatch.setattr(sys, "argv", ["explain.py", "--run", str(tmp_path), *extra])
        with pytest.raises(SystemExit):
            explain.main()
        assert f"error: {said} how to train a run, and --run {tmp_path} is benchmarked as it was trained" in \
            capsys.readouterr().err


def test_train_throughput_names_checked_before_the_data(bench: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    train_throughput = bench("train_throughput")
    monkeypatch.setattr(train_throughput, "synthetic", _no_work)
    monkeypatch.setattr(train_throughput, "load_ml1m", _no_work)
    _each_refused(monkeypatch, train_throughput, ["train_throughput.py", "--synthetic-items", "100"],
                  ((["--towers", "recency", "tranformer"], "did you mean 'transformer'"),
                   (["--losses", "inbach"], "did you mean 'inbatch'"), (["--examples", "0"], "--examples")))


def test_ml1m_bad_arguments_are_one_line_before_the_split(bench: Any, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    ml1m = bench("ml1m")
    monkeypatch.setattr(ml1m, "prepare_split", _no_work)
    data = tmp_path / "seq.txt"
    data.write_text("1 1\n1 2\n1 3\n")
    (tmp_path / "afile").write_text("")
    base = ["--data", str(data), "--rows", "pooled-recency-inbatch"]
    for argv, msg in ((["--seeds", ","], "^error: --seeds: names no seed"),
                      (["--seeds", "0,-1"], r"^error: --seeds: must be at least 0, got -1$"),  # numpy takes none
                      (["--seeds", "0,x"], "^error: --seeds: expected a comma list of integers"),
                      (["--threads", "0"], "--threads: must be at least 1"),
                      (["--epochs", "-1"], "--epochs: must be at least 1"), (["--out", str(tmp_path / "afile")], "is a file"),
                      (["--out", str(tmp_path / "o"), "--set", "train.lr=-1"], "train.lr")):
        with pytest.raises(SystemExit, match=msg):
            ml1m.main([*base, *argv])


def test_scifact_bad_data_out_and_valid_frac_are_one_line(bench: Any, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    scifact = bench("scifact")
    import twotower.search.bm25

    monkeypatch.setattr(twotower.search.bm25.BM25Retriever, "fit", _no_work)
    (tmp_path / "afile").write_text("")
    for argv, msg in ((["--data", str(tmp_path / "missing")], "no corpus.jsonl"),
                      (["--out", str(tmp_path / "afile")], "is a file, not a folder")):
        with pytest.raises(SystemExit, match=msg):
            scifact.main(["--out", str(tmp_path / "out"), *argv])


@pytest.mark.parametrize("script", ["serve_load", "soak", "bounded_work", "explain"])
def test_a_missing_run_is_one_line(bench: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str) -> None:
    module = bench(script)
    serve_load = sys.modules.get("serve_load") or bench("serve_load")
    monkeypatch.setattr(serve_load, "start_server", _no_work)
    import twotower.pipeline.artifacts

    real_load = twotower.pipeline.artifacts.TrainedRun.load
    calls: list[object] = []

    def load_once(path: object) -> object:  # the check's load; a second one means the work began
        calls.append(path)
        if len(calls) > 1:
            _no_work()
        return real_load(path)

    monkeypatch.setattr(twotower.pipeline.artifacts.TrainedRun, "load", staticmethod(load_once))
    monkeypatch.setattr(sys, "argv", [f"{script}.py", "--run", str(tmp_path / "missing")])
    with pytest.raises(SystemExit, match="no run.json there"):
        module.main()


@pytest.mark.parametrize("script", ["serve_load", "soak"])
def test_server_sizes_and_index_cache_checked_before_the_run(bench: Any, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch, script: str) -> None:
    module = bench(script)
    serve_load = sys.modules["serve_load"]
    monkeypatch.setattr(serve_load, "train_tiny_run", _no_work)
    monkeypatch.setattr(serve_load, "start_server", _no_work)
    (tmp_path / "afile").write_text("")
    _each_refused(monkeypatch, module, [f"{script}.py"], ((["--n-items", "0"], "--n-items: must be at least 1"),
                                                          (["--index-cache", str(tmp_path / "afile")], "is a file")))


def test_scale_out_repeated_world_sizes_get_their_own_folders(bench: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    scale_out = bench("scale_out")
    made: list[str] = []

    def fake_build(world: int, args: Any, work: Path) -> list[dict]:
        made.append(work.name)
        return []

    monkeypatch.setattr(scale_out, "exact_truth", lambda args: np.zeros((1, 10), np.int64))
    monkeypatch.setattr(scale_out, "build_once", fake_build)
    monkeypatch.setattr(sys, "argv", ["scale_out.py", "--skip-train", "--worlds", "1,2,1", "--n", "10", "--queries", "1"])
    scale_out.main()  # a repeated count was FileExistsError
    assert len(set(made)) == 3
    monkeypatch.setattr(sys, "argv", ["scale_out.py", "--worlds", "0"])
    with pytest.raises(SystemExit):
        scale_out.main()


# refused in the one line of every other bench flag (``error: --n-items: must be at least 1, got 0``), not in
# argparse's usage lines with its own exit status 2 ("--worlds and --nprobe take positive integers; got ...")
def test_scale_out_worlds_and_nprobe_are_refused_as_every_bench_flag(bench: Any, monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    scale_out = bench("scale_out")
    for work in ("train_once", "exact_truth", "build_once"):
        monkeypatch.setattr(scale_out, work, _no_work)
    _each_refused(monkeypatch, scale_out, ["scale_out.py"], (
        (["--worlds", "0"], r"^error: --worlds: must be at least 1, got 0$"),
        (["--worlds", "1,x"], r"^error: --worlds: expected a comma list of integers like 1,2, got '1,x'$"),
        (["--nprobe", ","], r"^error: --nprobe: names no number, got ','$"),
        (["--nprobe", "16,-1"], r"^error: --nprobe: must be at least 1, got -1$")))
    assert "usage:" not in capsys.readouterr().err


def test_scale_out_number_flags_are_refused_before_any_work(bench: Any, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """They were not checked: after the training part had run, --queries 0 reported a recall of nan, --seed -1 and
    --train-size 0 were numpy tracebacks, --threads 0 torch's, --dim 0 a rank killed by SIGFPE."""
    scale_out = bench("scale_out")
    for work in ("train_once", "exact_truth", "build_once"):
        monkeypatch.setattr(scale_out, work, _no_work)
    _each_refused(monkeypatch, scale_out, ["scale_out.py"], (
        (["--n", "0"], r"^error: --n: must be at least 10, got 0$"),
        (["--n", "9"], r"^error: --n: must be at least 10, got 9$"),  # the recall is of the exact top 10
        (["--dim", "0"], r"^error: --dim: must be at least 1, got 0$"),
        (["--queries", "0"], r"^error: --queries: must be at least 1, got 0$"),
        (["--epochs", "0"], r"^error: --epochs: must be at least 1, got 0$"),
        (["--threads", "-2"], r"^error: --threads: must be at least 1, got -2$"),
        (["--clusters", "0"], r"^error: --clusters: must be at least 1, got 0$"),
        (["--train-size", "0"], r"^error: --train-size: must be at least 1, got 0$"),
        (["--seed", "-1"], r"^error: --seed: must be at least 0, got -1$"),
        (["--skip-train", "--queries", "0"], r"^error: --queries: must be at least 1, got 0$")))
    assert "usage:" not in capsys.readouterr().err


def test_scale_out_exact_truth_takes_a_last_chunk_of_ten_rows_or_fewer_whole(bench: Any,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """--n 100005 ends on a chunk of 5 rows: argpartition's kth=10 was out of its bounds there."""
    scale_out = bench("scale_out")
    monkeypatch.setattr(scale_out, "GEN_CHUNK", 8)  # chunks of 8, 8 and 4 rows: the same paths as 100,000s
    args = SimpleNamespace(n=20, dim=4, clusters=3, queries=2, seed=0)
    truth = scale_out.exact_truth(args)
    catalogue = np.concatenate([scale_out.make_chunk(j, 20, scale_out._centers(0, 3, 4), 0) for j in range(3)])
    scores = scale_out._queries(args, scale_out._centers(0, 3, 4)) @ catalogue.T  # [2, 20]
    assert truth.shape == (2, 10)
    assert [sorted(t) for t in truth.tolist()] == [sorted(np.argsort(-row, kind="stable")[:10].tolist())
                                                    for row in scores]


def test_scale_out_worlds_exits_as_the_other_bench_refusals() -> None:
    """Run as a user runs it: exit status 1 and one line, as `ease_fit.py --rounds 0` (argparse's was 2)."""
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(BENCH.parent / "src")}
    done = [subprocess.run([sys.executable, str(BENCH / script), *argv], capture_output=True, text=True, env=env,
                           timeout=120) for script, argv in (("scale_out.py", ["--worlds", "0"]),
                                                             ("ease_fit.py", ["--rounds", "0"]))]
    assert done[0].returncode == done[1].returncode != 0
    assert done[0].stderr == "error: --worlds: must be at least 1, got 0\n"


def test_recbole_gru4rec_seeds_and_missing_recbole_are_said_as_every_bench_refusal(
        bench: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    rb = bench("recbole_gru4rec")
    import_recbole = rb._import_recbole
    monkeypatch.setattr(rb, "_import_recbole", _no_work)
    _each_refused(monkeypatch, rb, ["recbole_gru4rec.py"], (
        (["--seeds", "4,x"], r"^error: --seeds: expected a comma list of integers like 1,2, got '4,x'$"),
        (["--seeds", ","], r"^error: --seeds: names no seed, got ','$"),  # ran nothing
        (["--seeds", "-1"], r"^error: --seeds: must be at least 0, got -1$")))  # numpy's error after the data
    monkeypatch.setitem(sys.modules, "recbole", None)  # its import fails as if not installed
    with pytest.raises(SystemExit, match=r"^error: RecBole could not be imported .* as --recbole-path$"):
        import_recbole(None)


def test_scale_out_says_a_short_training_sample_once_and_counts_one_epoch(bench: Any, monkeypatch: pytest.MonkeyPatch,
                                                                         capsys: pytest.CaptureFixture) -> None:
    """`--train-size 2000` buried the table under FAISS's "clustering 2000 points to 256 centroids" (one per PQ
    sub-quantiser and build); `--epochs 1` was titled "1 epochs"."""
    scale_out = bench("scale_out")
    row = {"world": 1, "examples": 10, "epoch_s": 1.0, "examples_per_s": 10.0, "wall_s": 1.0, "loss": [1.0],
           "acc": [0.5]}
    monkeypatch.setattr(scale_out, "train_once", lambda *a: row)
    monkeypatch.setattr(scale_out, "exact_truth", lambda args: np.zeros((1, 10), np.int64))
    monkeypatch.setattr(scale_out, "build_once", lambda world, args, work: [])
    monkeypatch.setattr(sys, "argv", ["scale_out.py", "--worlds", "1,2", "--epochs", "1", "--n", "200000",
                                      "--train-size", "2000", "--factory", "IVF32,PQ16", "--queries", "1"])
    scale_out.main()
    out = capsys.readouterr().out
    assert "MovieLens-100K, 1 epoch, global batch" in out
    assert out.count("note: IVF32,PQ16 wants 9,984 training vectors (39 per centroid), --train-size gives 2,000") == 1


def test_ml1m_split_of_a_file_rewritten_in_place_is_not_reused(bench: Any, tmp_path: Path) -> None:
    ml1m = bench("ml1m")
    data = tmp_path / "seq.txt"
    data.write_text("".join(f"{u} {i}\n" for u in (1, 2, 3) for i in (1, 2, 3, 4)))
    paths, _ = ml1m.prepare_split(data, tmp_path / "split", None)
    assert paths["train"].is_file()
    ml1m.prepare_split(data, tmp_path / "split", None)  # the same file: reused
    data.write_text("".join(f"{u} {i}\n" for u in (1, 2, 3) for i in (4, 3, 2, 1)))  # same path and size
    with pytest.raises(SystemExit, match="changed since"):
        ml1m.prepare_split(data, tmp_path / "split", None)


def test_scifact_reuse_refuses_a_model_trained_with_other_settings(bench: Any, tmp_path: Path) -> None:
    import dataclasses

    from twotower.config import FinetuneConfig

    scifact = bench("scifact")
    saved = dataclasses.asdict(FinetuneConfig(epochs=1))
    scifact.check_reused(tmp_path, saved, FinetuneConfig(epochs=1))  # the same settings: reused
    older = {k: v for k, v in saved.items() if k not in ("valid_frac", "patience")}  # saved before they existed
    scifact.check_reused(tmp_path, older, FinetuneConfig(epochs=1))
    with pytest.raises(SystemExit, match="valid_frac 0.0, now 0.2"):
        scifact.check_reused(tmp_path, older, FinetuneConfig(epochs=1, valid_frac=0.2))
    with pytest.raises(SystemExit, match="epochs 1, now 3"):
        scifact.check_reused(tmp_path, saved, FinetuneConfig(epochs=3))


def test_explain_zero_sizes_are_one_line_before_training(bench: Any, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    explain = bench("explain")
    import twotower.pipeline.run

    monkeypatch.setattr(twotower.pipeline.run, "train_run", _no_work)
    for flag in ("--users", "--k", "--calls", "--epochs"):
        monkeypatch.setattr(sys, "argv", ["explain.py", "--out", str(tmp_path / "run"), flag, "0"])
        with pytest.raises(SystemExit, match=f"{flag}: must be at least 1, got 0"):
            explain.main()


# refused in the one line of every other bench flag (``error: --n-items: must be at least 1, got 0``), not in
# argparse's usage lines with its own exit status 2
@pytest.mark.parametrize("argv, msg", [(["--step", "1"], "--step: must be more than 1, got 1"),
                                       (["--start-rate", "0"], "--start-rate: must be more than 0, got 0"),
                                       (["--overload-rate", "-5"], "--overload-rate: must be more than 0, got -5"),
                                       (["--workers", "1,0"], "--workers: expected positive worker counts, got '1,0'"),
                                       (["--workers", "x"], "--workers: expected worker counts like 1 or 1,2, got 'x'")])
def test_serve_load_ramp_settings_are_checked(bench: Any, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str], argv: list[str], msg: str) -> None:
    serve_load = bench("serve_load")
    monkeypatch.setattr(serve_load, "train_tiny_run", _no_work)
    monkeypatch.setattr(sys, "argv", ["serve_load.py", *argv])
    with pytest.raises(SystemExit, match=f"^error: {re.escape(msg)}$"):
        serve_load.main()
    assert "usage:" not in capsys.readouterr().err


def test_soak_rate_and_seconds_are_checked(bench: Any, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    soak = bench("soak")
    monkeypatch.setattr(sys.modules["serve_load"], "train_tiny_run", _no_work)
    for flag in ("--rate", "--seconds", "--chunk-seconds", "--timeout"):
        monkeypatch.setattr(sys, "argv", ["soak.py", flag, "0"])
        with pytest.raises(SystemExit, match=f"^error: {flag}: must be more than 0, got 0$"):
            soak.main()
        assert "usage:" not in capsys.readouterr().err


@pytest.mark.parametrize("own, server", [(["serve_load.py", "--step", "1"], ["serve_load.py", "--n-items", "0"]),
                                         (["soak.py", "--rate", "nan"], ["soak.py", "--n-items", "0"])])
def test_ramp_refusals_exit_as_the_other_bench_refusals(own: list[str], server: list[str]) -> None:
    """Run as a user runs them: the ramp's flags and the server's exit with the same status, in one line each."""
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(BENCH.parent / "src")}
    done = [subprocess.run([sys.executable, str(BENCH / argv[0]), *argv[1:]], capture_output=True, text=True,
                           env=env, timeout=120) for argv in (own, server)]
    assert done[0].returncode == done[1].returncode != 0
    for d in done:
        assert len(d.stderr.splitlines()) == 1 and d.stderr.startswith("error: --"), d.stderr


def test_scifact_title_names_the_caps(bench: Any) -> None:
    """--ce-max-groups (default 400) cut the cross-encoder's training pairs per epoch, and --quick the corpus, the
    query sets and the epochs, with nothing in the table to say so."""
    scifact = bench("scifact")
    args = scifact.parse_args([])
    note = scifact.sizes_note(args, docs=5183, train_queries=650, valid_queries=159, pairs=740)
    assert "corpus 5183 docs; bi-encoder 8 epoch(s) on 650 train queries (159 held out for validation)" in note
    assert "at most 400 of 740 training pairs per epoch (--ce-max-groups 400), reranking the top 10" in note
    assert "all 300 training pairs" in scifact.sizes_note(args, docs=300, train_queries=48, valid_queries=16, pairs=300)
    # --quick: the rerank log's "49 groups of 52 pairs (3 with no hard negative left out)" was "all 52" here
    assert ("cross-encoder 1 epoch(s) on all 49 training pairs per epoch (--ce-max-groups 400; 3 of the 52 pairs had "
            "no hard negative and were left out)") in scifact.sizes_note(scifact.parse_args(["--ce-epochs", "1"]),
                                                                          docs=300, train_queries=48, valid_queries=16,
                                                                          pairs=52, groups=49)
    assert "cross-encoder" not in scifact.sizes_note(scifact.parse_args(["--no-rerank"]), docs=1, train_queries=1,
                                                    valid_queries=1, pairs=1)


def test_serve_load_ramp_names_a_5xx_as_the_services_error(bench: Any, capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Every request of the first step answered 500 (a bug in the service) printed "the service could not keep up
    with 50.0/s; lower --start-rate", which sends the reader after the load."""
    import argparse
    import asyncio

    serve_load = bench("serve_load")

    async def failing_phase(url: str, users: list[str], rate: float, seconds: float, timeout: float) -> dict:
        n = int(rate * seconds)
        return {"rate": rate, "sent": n, "ok": 0, "429": 0, "5xx": n, "other": 0, "ok_rps": 0.0, "p50": float("nan"),
                "p99": float("nan"), "status": {"500": n}, "reasons_429": {}, "lat_ok_ms": []}

    monkeypatch.setattr(serve_load, "phase", failing_phase)
    args = argparse.Namespace(start_rate=50.0, max_rate=400.0, step=2.0, step_seconds=2.0, timeout=1.0, p99_ms=10.0)
    assert asyncio.run(serve_load.load(args, "http://127.0.0.1:1", ["u0"])) == 1
    out = capsys.readouterr().out
    assert "answered 100 of 100 requests at 50/s with a 5xx" in out and "an error in the service" in out
    assert "lower --start-rate" not in out


def test_cold_similar_cache_folder_checked_before_the_fit(bench: Any, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """--cache in a missing folder failed in np.savez after the first fit (about a minute), with a traceback."""
    cold_similar = bench("cold_similar")
    monkeypatch.setattr(cold_similar, "train_and_embed", _no_work)
    monkeypatch.setattr(sys, "argv", ["cold_similar.py", "--cache", str(tmp_path / "missing" / "fits.npz")])
    with pytest.raises(SystemExit, match="no folder .*missing to keep the fits' vectors in"):
        cold_similar.main()


def test_train_throughput_default_row_trains_the_default_recommender(bench: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The row README and docs call "the default" ran one recency pool without history dropout or weight average;
    it now trains ModelConfig() with every training default (only the harness's switches differ)."""
    from twotower.config import ModelConfig, TrainConfig

    train_throughput = bench("train_throughput")
    seen: dict[str, Any] = {}

    class Stop(Exception):
        pass

    def fake_trainer(model: Any, seqs: Any, *, train: TrainConfig, **_: Any) -> None:
        seen["train"] = train
        raise Stop

    monkeypatch.setattr(train_throughput, "Trainer", fake_trainer)
    monkeypatch.setattr(train_throughput, "TwoTowerModel", lambda cfg, *a, **k: seen.setdefault("model", cfg))
    with pytest.raises(Stop):
        train_throughput.run_trainer(SimpleNamespace(n_users=5), 10, "default", "inbatch", "causal", 512, 1000, False)
    assert seen["model"] == ModelConfig()
    assert seen["train"] == TrainConfig(max_examples_per_epoch=1000, progress=False, checkpoint=False, diagnostics=False)


def test_number_refusal_refuses_nan_and_infinity_in_the_cli_words(bench: Any) -> None:
    """`--target nan` passed every comparison of the scripts' checks ("NaN passes"), and infinity every lower bound."""
    common = bench("_common")
    assert common.number_refusal("--target", float("nan"), 0, 1, lo_open=True) == \
        "--target: must be more than 0 and at most 1, got nan"
    assert common.number_refusal("--timeout", float("inf"), 0, lo_open=True) == \
        "--timeout: must be a finite number, got inf"
    assert common.number_refusal("--max-wait-ms", float("nan")) == "--max-wait-ms: must be a finite number, got nan"
    assert common.number_refusal("--k", 0, 1) == "--k: must be at least 1, got 0"
    assert common.number_refusal("--timeout", 5.0, 0, lo_open=True) is None


@pytest.mark.parametrize("argv, msg", [
    (["--target", "nan"], "--target: must be more than 0 and at most 1, got nan"),
    (["--pq-target", "inf"], "--pq-target: must be more than 0 and at most 1, got inf"),
    (["--noise", "nan"], "--noise: must be at least 0, got nan"),
    (["--speedup-target", "inf"], "--speedup-target: must be a finite number, got inf"),
])
def test_index_scale_refuses_nan_and_infinity(bench: Any, monkeypatch: pytest.MonkeyPatch, argv: list[str],
                                              msg: str) -> None:
    index_scale = bench("index_scale")
    monkeypatch.setattr(index_scale, "make_data", _no_work)
    with pytest.raises(SystemExit, match=f"^error: {msg}$"):
        index_scale.main(argv)


def test_the_other_scripts_refuse_nan_and_infinity(bench: Any, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    scifact = bench("scifact")
    for argv, msg in ((["--lr", "nan"], "--lr: must be more than 0, got nan"),
                      (["--ce-lr", "inf"], "--ce-lr: must be a finite number, got inf"),
                      (["--valid-frac", "nan"], "--valid-frac: must be more than 0 and less than 1, got nan")):
        with pytest.raises(SystemExit, match=msg):
            scifact.main(["--out", str(tmp_path / "out"), *argv])
    exclusions = bench("exclusions")
    monkeypatch.setattr(exclusions, "clustered", _no_work)
    with pytest.raises(SystemExit, match="--noise: must be at least 0, got nan"):
        exclusions.main(["--noise", "nan"])
    ease_fit = bench("ease_fit")
    monkeypatch.setattr(sys, "argv", ["ease_fit.py", "--l2", "nan"])
    with pytest.raises(SystemExit, match="--l2: must be more than 0, got nan"):
        ease_fit.main()


@pytest.mark.parametrize("script", ["serve_load", "soak"])
def test_the_serving_scripts_refuse_nan_and_infinity(bench: Any, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture, script: str) -> None:
    module = bench(script)
    serve_load = sys.modules["serve_load"]
    monkeypatch.setattr(serve_load, "train_tiny_run", _no_work)
    monkeypatch.setattr(serve_load, "start_server", _no_work)
    cases = [(["--max-wait-ms", "nan"], "--max-wait-ms: must be between 0 and 3600000, got nan"),
             (["--startup-timeout", "inf"], "--startup-timeout: must be a finite number, got inf"),
             (["--timeout", "nan"], "--timeout: must be more than 0, got nan")]
    cases += ([(["--max-rate", "inf"], "--max-rate: must be a finite number, got inf"),
               (["--p99-ms", "inf"], "--p99-ms: must be a finite number, got inf")] if script == "serve_load" else
              [(["--rate", "nan"], "--rate: must be more than 0, got nan"),
               (["--seconds", "inf"], "--seconds: must be a finite number, got inf")])
    for argv, msg in cases:  # the script's own flags in the one line of the server's
        monkeypatch.setattr(sys, "argv", [f"{script}.py", *argv])
        with pytest.raises(SystemExit, match=f"^error: {re.escape(msg)}$"):
            module.main()


def test_bounded_work_refuses_nan_and_infinity(bench: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    bounded_work = bench("bounded_work")
    monkeypatch.setattr(bounded_work, "train_synthetic_run", _no_work)
    _each_refused(monkeypatch, bounded_work, ["bounded_work.py"],
                  ((["--timeout", "nan"], "--timeout: must be more than 0, got nan"),
                   (["--startup-timeout", "inf"], "--startup-timeout: must be a finite number, got inf")))


def test_epoch_ab_refuses_a_malformed_or_missing_version_before_any_epoch(bench: Any, tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    epoch_ab = bench("epoch_ab")
    monkeypatch.setattr(epoch_ab, "one_epoch", _no_work)
    train = tmp_path / "train.csv"
    train.write_text("user_id,item_id\n1,1\n")
    here = str(Path(__file__).resolve().parents[2])
    _each_refused(monkeypatch, epoch_ab, ["epoch_ab.py", "--train", str(train)], (
        (["--version", "old"], "expected LABEL=PATH"),
        (["--version", f"a={here}:lr"], "settings are KEY=VALUE"),
        (["--version", f"a={here}"], "give two versions or more"),
        (["--version", f"a={tmp_path}", "--version", f"b={here}"], "has no src/twotower"),
        (["--version", f"a={here}", "--version", f"a={here}"], "a label of its own"),
        (["--version", f"a={here}", "--version", f"b={here}", "--rounds", "0"], "--rounds: must be")))


def test_step_threads_refuses_its_flags_before_training(bench: Any, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    step_threads = bench("step_threads")
    monkeypatch.setattr(step_threads, "install", _no_work)
    train = tmp_path / "train.csv"
    train.write_text("user_id,item_id\n1,1\n")
    _each_refused(monkeypatch, step_threads, ["step_threads.py"], (
        (["--train", str(train), "--rounds", "0"], "--rounds: must be"),
        (["--train", str(train), "--examples", "1"], "--examples: must be"),
        (["--train", str(train), "--set", "train.lr"], "settings are KEY=VALUE"),
        (["--train", str(tmp_path / "missing.csv")], "--train: no file")))


def test_step_threads_table_pairs_epochs_and_says_the_step_thread_asleep(bench: Any) -> None:
    step_threads = bench("step_threads")
    # 100 steps an epoch; (CPU ms, run-queue wait ms, voluntary, involuntary switches) over the epoch
    rows = [{"mode": "ahead", "steps": 100, "wall_ms": 1000.0, "main": (800.0, 20.0, 2800, 10),
             "side": (400.0, 30.0, 2000, 5), "prefetch": (250.0, 40.0, 1500, 8)},
            {"mode": "first", "steps": 100, "wall_ms": 900.0, "main": (780.0, 10.0, 1600, 2),
             "side": (390.0, 5.0, 1900, 1)}]
    text = step_threads.table(rows)
    assert "| ahead | main | 8.00 | 0.20 | 1.80 | 28.0 | 0.10 |" in text  # 10 - 8 - 0.2 ms asleep a step
    assert "| first | main | 7.80 | 0.10 | 1.10 | 16.0 | 0.02 |" in text
    assert "| ahead | prefetch | 2.50 | 0.40 |  | 15.0 | 0.08 |" in text
    assert "| first | prefetch" not in text  # no prefetch thread when the plans come first
    assert "first / ahead, epoch by epoch: 0.900 (median 0.900)" in text


def test_step_threads_pairs_chunked_plans_with_plans_one_batch_a_call(bench: Any) -> None:
    step_threads = bench("step_threads")
    rows = [{"mode": "ahead", "steps": 100, "wall_ms": 1000.0, "main": (800.0, 20.0, 2000, 10),
             "side": (400.0, 30.0, 2000, 5), "prefetch": (170.0, 40.0, 800, 8)},
            {"mode": "single", "steps": 100, "wall_ms": 1050.0, "main": (820.0, 20.0, 2600, 10),
             "side": (400.0, 30.0, 2000, 5), "prefetch": (240.0, 40.0, 1600, 8)}]
    text = step_threads.table(rows)
    assert "| single | prefetch | 2.40 | 0.40 |  | 16.0 | 0.08 |" in text  # both modes have a prefetch thread
    assert "single / ahead, epoch by epoch: 1.050 (median 1.050)" in text


@pytest.mark.parametrize("flags, threads", [([], ["train.threads=1"]), (["--default-threads"], [])])
def test_epoch_ab_runs_each_version_at_the_threads_asked(bench: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        flags: list[str], threads: list[str]) -> None:
    import subprocess

    epoch_ab = bench("epoch_ab")
    commands: list[list[str]] = []

    def fake_run(cmd: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        commands.append(cmd)
        out = Path(cmd[cmd.index("--out") + 1])
        out.mkdir(parents=True)
        (out / "log.jsonl").write_text('{"train_seconds": 2.0, "loss": 5.0}\n')
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(epoch_ab.subprocess, "run", fake_run)
    train = tmp_path / "train.csv"
    train.write_text("user_id,item_id\n1,1\n")
    here = str(Path(__file__).resolve().parents[2])
    assert epoch_ab.main(["--train", str(train), "--version", f"a={here}", "--version",
                          f"b={here}:model.item_item.enabled=false", "--rounds", "1", *flags]) == 0
    assert len(commands) == 2
    for cmd in commands:  # the default run's count is the version's own: no train.threads at all
        assert [a for a in cmd if a.startswith("train.threads=")] == threads
    assert commands[1][-1] == "model.item_item.enabled=false"


def test_serve_scaling_bad_flags_and_a_missing_wrk_are_one_line_before_any_work(
        bench: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    scaling = bench("serve_scaling")
    monkeypatch.setattr(scaling, "train_tiny_run", _no_work)  # nothing is trained or served before the refusals
    monkeypatch.setattr(scaling, "start_server", _no_work)
    _each_refused(monkeypatch, scaling, ["serve_scaling.py"], (
        (["--connections", "0"], "--connections: must be at least 1, got 0"),
        (["--workers", "1,x"], "--workers: expected a comma list of integers"),
        (["--seconds", "0"], "--seconds"),
        (["--wrk", "/nonexistent/wrk"], "--wrk /nonexistent/wrk: not found; install it"),
    ))


def test_every_ml1m_row_is_a_configuration_the_settings_take(bench: Any) -> None:
    # the gru-* rows carried the transformer's seq_positions=left, and the settings refused every one of them
    from twotower.config import load_config
    from twotower.models.unread import unread_tower_sizes

    ml1m = bench("ml1m")
    for name, overrides in ml1m.ROWS.items():
        cfg = load_config(overrides=overrides)
        if name.startswith("gru"):
            assert cfg.model.user.history == "gru"
        # nor a size its towers ignore (the gru-* rows carried seq_heads=2, warned of at every start)
        assert unread_tower_sizes(cfg.model) == [], name


@pytest.mark.parametrize(("argv", "said"), [
    (["--seeds", "0,1,0"], "error: --seeds: 0 given twice; each seed is one run of the mean"),
    (["--epochs", "2", "--set", "train.epochs=1"],
     "error: --epochs and --set train.epochs=... set the same setting; give one of them"),
])
def test_ml1m_refuses_a_repeated_seed_and_two_epoch_counts(bench: Any, argv: list[str], said: str) -> None:
    # both ran: a mean ± sd over one seed counted twice, and whichever epoch count came last
    ml1m = bench("ml1m")
    with pytest.raises(SystemExit) as e:
        ml1m.main(argv)
    assert str(e.value) == said


@pytest.mark.parametrize(("script", "argv", "said"), [
    ("cold_similar", ["--threads", "0"], "error: --threads: must be at least 1, got 0"),
    ("ease_fit", ["--threads", "0"], "error: --threads: must be at least 1, got 0"),
    ("exclusions", ["--k", "0"], "error: --k: must be at least 1, got 0"),
    ("exclusions", ["--nprobe", "0"], "error: --nprobe: must be at least 1, got 0"),
    ("index_scale", ["--threads", "0"], "error: --threads: must be at least 1, got 0"),
    ("index_scale", ["--plot", "/"], "error: --plot /: is a folder; give a PNG file's path"),
    ("index_scale", ["--plot", "/no-such-folder-here/x.png"], "error: --plot /no-such-folder-here/x.png: no folder "
                                                              "/no-such-folder-here to write it in"),
    ("movielens100k", ["--epochs", "0"], "error: --epochs: must be at least 1, got 0"),
    ("scifact", ["--rerank-top", "0"], "error: --rerank-top: must be at least 1, got 0"),
    ("explain", ["--threads", "0"], "error: --threads: must be at least 1, got 0"),
    ("bounded_work", ["--batch", "0"], "error: --batch: must be at least 1, got 0"),
])
def test_a_zero_count_is_refused_in_one_line_before_any_work(bench: Any, monkeypatch: pytest.MonkeyPatch,
                                                             script: str, argv: list[str], said: str) -> None:
    # tracebacks (--threads 0), or refusals after a catalogue was built, a run trained or a server started; and
    # movielens100k --epochs 0 trained the full 30 epochs
    monkeypatch.setattr(sys, "argv", [f"{script}.py", *argv])
    module = bench(script)
    with pytest.raises(SystemExit) as e:
        module.main()
    assert str(e.value) == said


@pytest.mark.parametrize(("argv", "said"), [
    (["--ndcg", "--model", "/no-such-model"], "error: --model /no-such-model: no such folder; give a bi-encoder folder"),
    (["--model", "/no-such-model"], "error: --model is read only with --ndcg (its NDCG@10 per backend); add --ndcg, "
                                    "or leave --model out"),
])
def test_encoder_backends_checks_its_model_before_any_work(bench: Any, tmp_path: Path, argv: list[str],
                                                          said: str) -> None:
    # read only after the timing rounds and the zero-shot pass, minutes in on SciFact; ignored without --ndcg
    (tmp_path / "corpus.jsonl").write_text('{"_id": "d1", "title": "", "text": "aspirin"}\n')
    with pytest.raises(SystemExit) as e:
        bench("encoder_backends").main(["--beir", str(tmp_path), *argv])
    assert str(e.value) == said
