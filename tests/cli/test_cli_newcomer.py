"""What a newcomer trips on at the command line (issue 13): output paths, pipes, help, --version, sealed runs."""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from twotower.cli.main import build_parser, main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serving"))
from tiny_run import build_tiny_run  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    return build_tiny_run(tmp_path_factory.mktemp("cli13"))


def _one_error_line(err: str) -> str:
    lines = [x for x in err.splitlines() if x.strip() and " WARNING " not in x and " INFO " not in x]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    return env


# ---------------------------------------------------------------- output paths (item 12)
def test_train_out_under_a_regular_file_is_refused_before_reading_data(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("x")
    # the data files do not even exist: the output path is checked first
    assert main(["train", "--train", str(tmp_path / "missing.csv"), "--out", str(f / "run")]) == 2
    assert "is a file, not a folder" in _one_error_line(capsys.readouterr().err)


def test_recommend_out_that_is_a_directory_is_refused(run_dir, tmp_path, capsys):
    assert main(["recommend", "--run", str(run_dir), "--users", "all", "--out", str(tmp_path)]) == 2
    assert "is a folder" in _one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize("argv, suggested", [
    (["similar", "--items", "all", "--out"], "similar.csv"),
    (["evaluate", "--csv"], "eval.csv"),
    (["evaluate", "--plot"], "recall.png"),
])
def test_a_folder_given_for_an_output_file_is_suggested_a_file_of_its_kind(run_dir, tmp_path, capsys, argv,
                                                                          suggested):
    # each was told `DIR/recs.csv`, recommend's file: a CSV name for evaluate's plot
    assert main([argv[0], "--run", str(run_dir), *argv[1:], str(tmp_path)]) == 2
    assert _one_error_line(capsys.readouterr().err).endswith(f"such as {tmp_path / suggested}")


def test_data_split_out_that_is_a_file_is_refused(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("x")
    assert main(["data", "split", "--input", str(tmp_path / "nope.csv"), "--out", str(f)]) == 2
    assert "is a file, not a folder" in _one_error_line(capsys.readouterr().err)


def test_index_build_out_under_a_regular_file_is_one_line(run_dir, tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("x")
    assert main(["index", "build", "--run", str(run_dir), "--index", "flat", "--out", str(f / "idx")]) == 2
    _one_error_line(capsys.readouterr().err)


# ---------------------------------------------------------------- pipes (item 3)
@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_a_closed_pipe_is_not_a_traceback(run_dir, extra):
    cmd = [sys.executable, "-m", "twotower", "-q", "recommend", "--run", str(run_dir), "--users", "all", "--k", "50",
           *extra]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
    assert p.stdout is not None and p.stderr is not None
    p.stdout.read(20)  # like `| head -c 20`: read a little, then close the pipe
    p.stdout.close()
    err = p.stderr.read().decode()
    rc = p.wait(timeout=120)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert rc in (0, 141)


# ---------------------------------------------------------------- help and version (item 8)
def _options(parser: argparse.ArgumentParser, path: list[str]):
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                yield from _options(sub, [*path, name])
        elif a.dest != "help":
            yield " ".join(path), "/".join(a.option_strings) or a.dest, a.help


def test_every_option_of_every_subcommand_has_help_text():
    missing = [f"{cmd} {opt}" for cmd, opt, text in _options(build_parser(), ["twotower"]) if not text]
    assert not missing, "options without help text: " + ", ".join(missing)


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.startswith("twotower ")
    assert main(["--version"]) == 0


# ---------------------------------------------------------------- --history with no ids (item 14)
def test_history_without_ids_is_refused_like_http(run_dir, capsys):
    assert main(["recommend", "--run", str(run_dir), "--history", ",,,"]) == 2
    assert "no item ids" in _one_error_line(capsys.readouterr().err)
    assert main(["explain", "--run", str(run_dir), "--history", " , ", "--item", "i1"]) == 2
    assert "no item ids" in _one_error_line(capsys.readouterr().err)


# ---------------------------------------------------------------- sealed runs (item 13)
def test_a_sealed_run_without_its_manifest_is_refused_unless_no_verify(run_dir, tmp_path, capsys, caplog):
    from twotower.errors import IntegrityError
    from twotower.pipeline.artifacts import TrainedRun

    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    w = run / "model.safetensors"
    data = bytearray(w.read_bytes())
    data[int(len(data) * 0.7)] ^= 0x10  # one weight byte flipped ...
    w.write_bytes(bytes(data))
    (run / "manifest.json").unlink()  # ... and the manifest deleted
    with pytest.raises(IntegrityError, match="manifest.json is missing from a sealed run"):
        TrainedRun.load(run)
    assert main(["recommend", "--run", str(run), "--user", "u1"]) == 2
    assert "--no-verify" in _one_error_line(capsys.readouterr().err)
    caplog.clear()
    assert main(["recommend", "--run", str(run), "--user", "u1", "--no-verify"]) == 0
    assert "WITHOUT INTEGRITY CHECKS" in caplog.text
    os.environ.pop("TWOTOWER_NO_VERIFY", None)  # main sets it for the process
    caplog.clear()
    TrainedRun.load(run, verify=False)
    assert "WITHOUT INTEGRITY CHECKS" in caplog.text


def test_a_pickled_optimizer_state_is_refused_with_one_line_of_ours(tmp_path):
    import json

    import numpy as np
    import torch

    from twotower.errors import IntegrityError
    from twotower.training.checkpoint import _state_digest, load_checkpoint, save_checkpoint

    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    save_checkpoint(tmp_path / "ck", model, [opt], {"epoch": 1}, np.random.default_rng(0))
    torch.save([{"state": argparse.Namespace(a=1)}], tmp_path / "ck" / "optimizer.pt")  # a pickled object
    state = json.loads((tmp_path / "ck" / "state.json").read_text())
    state["files"].pop("optimizer.pt")  # an older checkpoint that did not record its checksum
    state.pop("state_sha256")
    state["state_sha256"] = _state_digest(state)
    (tmp_path / "ck" / "state.json").write_text(json.dumps(state))
    with pytest.raises(IntegrityError) as e:
        load_checkpoint(tmp_path / "ck", model, [opt], np.random.default_rng(0))
    msg = str(e.value)
    assert "\n" not in msg and "\x1b" not in msg and "weights_only=False" not in msg and "pickled" in msg
