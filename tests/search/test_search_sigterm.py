"""SIGTERM (a scheduler's preemption, `timeout`, `kill`) while a search artefact is being saved stops the command as
Ctrl-C does: the earlier artefact at --out is kept, the temporary folder is removed, "terminated (SIGTERM)", 143.

Before: SIGTERM ended Python on the spot. `search train` / `rerank train` killed while their towers were saved left a
~90 MB `.OUT.tmp-PID-...` folder beside --out (until the next write into that very folder) and said nothing;
`twotower train` had stopped like Ctrl-C since the earlier round of interruption checks.
"""
from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from search_data import write_beir

from twotower.cli.main import main

from tests.extras import needs_text

# where each command writes a file into its temporary folder, after the weights (the slow part) are there
CASES = {
    "search train": ("twotower.search.finetune", "atomic_write_json", "twotower_bi_encoder.json", "bi_encoder",
                     ["search", "train", "--epochs", "1", "--batch-size", "2", "--negatives", "0", "--max-length",
                      "32"]),
    "rerank train": ("twotower.search.rerank", "atomic_write_json", "twotower_cross_encoder.json", "cross_encoder",
                     ["rerank", "train", "--epochs", "1", "--negatives", "1", "--max-length", "32"]),
    "search index": ("twotower.search.pipeline", "atomic_write_bytes", "meta.json", "search_index",
                     ["search", "index", "--max-length", "32"]),
}


@needs_text
@pytest.mark.parametrize("command", list(CASES))
def test_sigterm_while_saving_keeps_the_earlier_output_and_leaves_no_temporary(command, tmp_path, monkeypatch,
                                                                               capsys):
    import importlib

    module, writer, marker, kind, argv = CASES[command]
    mod = importlib.import_module(module)
    out = tmp_path / "out"
    out.mkdir()
    earlier = json.dumps({"kind": kind, "note": "an earlier finished output"})
    (out / marker).write_text(earlier)  # what --out accepts to replace: an artefact of the same kind

    def half_written_then_sigterm(path, data):  # noqa: ANN001
        body = data if isinstance(data, bytes) else json.dumps(data).encode()
        Path(path).write_bytes(body[: len(body) // 2])
        # the real signal, to this (main) thread; without a handler it would end pytest itself, so that is said instead
        assert signal.getsignal(signal.SIGTERM) != signal.SIG_DFL, "SIGTERM would end the process on the spot"
        os.kill(os.getpid(), signal.SIGTERM)
        raise AssertionError("SIGTERM did not stop the command")

    monkeypatch.setattr(mod, writer, half_written_then_sigterm)
    beir = write_beir(tmp_path / "beir")
    cache = [] if command == "rerank train" else ["--cache", str(tmp_path / "cache")]
    rc = main(["-q", *argv, "--beir", str(beir), "--out", str(out), "--threads", "1", *cache])
    err = capsys.readouterr().err
    assert rc == 143 and "terminated (SIGTERM)" in err
    assert sorted(p.name for p in out.iterdir()) == [marker] and (out / marker).read_text() == earlier
    assert [p.name for p in tmp_path.iterdir() if ".tmp" in p.name] == []
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # the handler does not outlive the command


@needs_text
def test_ctrl_c_says_whether_out_was_written(tmp_path, monkeypatch, capsys):
    """A Ctrl-C in the second after the save (the new towers loaded back for the summary) printed "interrupted" alone,
    as one before it did: the user took the earlier bi-encoder to be kept, though the new one had replaced it."""
    import twotower.search.finetune as finetune

    beir = write_beir(tmp_path / "beir")
    out = tmp_path / "out"
    out.mkdir()
    (out / "twotower_bi_encoder.json").write_text(json.dumps({"kind": "bi_encoder"}))
    argv = ["-q", "search", "train", "--epochs", "1", "--batch-size", "2", "--negatives", "0", "--max-length", "32",
            "--beir", str(beir), "--out", str(out), "--cache", str(tmp_path / "cache"), "--threads", "1"]

    def ctrl_c(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise KeyboardInterrupt

    with monkeypatch.context() as m:  # Ctrl-C while the marker is written: nothing replaced
        m.setattr(finetune, "atomic_write_json", ctrl_c)
        assert main(argv) == 130
    assert capsys.readouterr().err.strip() == (f"interrupted: it stopped before {out} was written; the previous "
                                               "output there is kept, intact, as it was; run the command again to "
                                               "replace it")
    assert json.loads((out / "twotower_bi_encoder.json").read_text()) == {"kind": "bi_encoder"}
    with monkeypatch.context() as m:  # Ctrl-C once the new towers are in place, while they are loaded back
        m.setattr(finetune, "load_bi_encoder", ctrl_c)
        assert main(argv) == 130
    assert capsys.readouterr().err.strip() == (f"interrupted: {out} was written before it stopped: it holds this "
                                               "command's output (the previous one was replaced)")
    assert json.loads((out / "twotower_bi_encoder.json").read_text())["steps"] >= 1
