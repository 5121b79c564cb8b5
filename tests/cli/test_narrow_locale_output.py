"""Titles outside the locale's encoding (LC_ALL=C with PYTHONUTF8=0, a Latin-1 locale, a Windows code page).

Before: `similar --item` and `explain` ended with a UnicodeEncodeError traceback at the first title with an "é"
(MovieLens-100K's "Misérables, Les (1995)"), and every `--json` answer holding one did the same.
"""
from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from twotower.cli.main import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serving"))
from tiny_run import write_tiny_data  # noqa: E402

TITLE = "Misérables, Les ☃"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    from twotower.config import load_config
    from twotower.pipeline.run import train_run

    folder = tmp_path_factory.mktemp("narrow")
    inter, items = write_tiny_data(folder / "data")
    table = pd.read_csv(items)
    table.loc[table.item_id == "i0", "title"] = TITLE
    table.to_csv(items, index=False)
    overrides = [
        f"data.path={json.dumps(str(inter))}", f"data.items={json.dumps(str(items))}", "data.title_col=title",
        "data.rating_col=null", "train.epochs=1", "train.progress=false", "train.threads=1", "train.checkpoint=false",
        "model.user.history_len=8", "model.user.history_dim=16", "model.user.out_dim=16", "model.user.hidden=[32]",
        "model.item.out_dim=16", "model.item.hidden=[32]", "model.item.id_dim=16", "eval.baselines=[]",
    ]
    train_run(load_config(overrides=overrides), folder / "run")
    np.random.seed(None)
    return folder / "run"


def _run_with_ascii_stdout(*argvs: list[str]) -> bytes:
    """Each command's exit code checked, with stdout as Python opens it under LC_ALL=C and PYTHONUTF8=0
    (ASCII, surrogateescape); set inside the test, where pytest's own capture no longer replaces it."""
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="ascii", errors="surrogateescape", write_through=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys, "stdout", stream)
        for argv in argvs:
            assert main(argv) == 0
    stream.detach()  # the wrapper, collected, would close the buffer
    return raw.getvalue()


def test_lists_and_explanations_escape_what_the_locale_cannot_write(run_dir):
    out = _run_with_ascii_stdout(["similar", "--run", str(run_dir), "--item", "i0", "--k", "2"],
                                 ["explain", "--run", str(run_dir), "--user", "u1", "--item", "i0"]).decode("ascii")
    assert out.startswith("top 2 similar to Mis\\xe9rables, Les \\u2603")
    assert "item i0  Mis\\xe9rables, Les \\u2603" in out


def test_json_answers_stay_valid_json_with_the_title_intact(run_dir):
    similar = _run_with_ascii_stdout(["similar", "--run", str(run_dir), "--item", "i0", "--k", "2", "--json"])
    assert json.loads(similar)["item_id"] == "i0"
    explained = _run_with_ascii_stdout(["explain", "--run", str(run_dir), "--user", "u1", "--item", "i0", "--json"])
    assert json.loads(explained)["item"]["title"] == TITLE


def test_undecodable_bytes_are_written_back_as_they_came():
    # a file name read under the C locale holds its non-ASCII bytes as surrogates; printing it gives the bytes back
    from twotower.cli import printing

    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="ascii", errors="surrogateescape", write_through=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys, "stdout", stream)
        printing.tolerate_narrow_streams()
        print(b"caf\xc3\xa9 \xff".decode("ascii", "surrogateescape") + " é", file=stream)
    stream.detach()
    assert raw.getvalue() == b"caf\xc3\xa9 \xff \\xe9\n"
