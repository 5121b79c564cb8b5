"""`twotower search ...` on a plain install (no [text] extra): one "error:" line naming the extra, exit 2, where
it was a ModuleNotFoundError traceback. The packages are hidden with ``sys.modules[name] = None``."""
from __future__ import annotations

import sys

import pytest
from search_data import write_beir

from twotower.cli.main import main

TEXT = "pip install 'twotower[text]'"


@pytest.mark.parametrize(("argv", "hidden", "line"), [
    (["search", "evaluate", "--split", "test", "--retriever", "bm25"], "bm25s",
     f"error: BM25 search needs the bm25s package: {TEXT}"),
    (["search", "evaluate", "--split", "test", "--retriever", "hybrid"], "bm25s",
     f"error: BM25 search needs the bm25s package: {TEXT}"),
    (["search", "evaluate", "--split", "test", "--retriever", "dense"], "sentence_transformers",
     "error: the text encoder (all-MiniLM-L6-v2 and fine-tuned bi-encoders) needs the sentence-transformers "
     f"package: {TEXT}"),
    (["search", "train", "--out", "{tmp}/bi"], "sentence_transformers",
     "error: the text encoder (all-MiniLM-L6-v2 and fine-tuned bi-encoders) needs the sentence-transformers "
     f"package: {TEXT}"),
], ids=["evaluate-bm25", "evaluate-hybrid", "evaluate-dense", "train"])
def test_search_commands_without_the_text_extra_say_what_to_install(tmp_path, capsys, monkeypatch, argv, hidden, line):
    beir = write_beir(tmp_path / "beir")
    monkeypatch.setitem(sys.modules, hidden, None)
    rc = main(["--quiet", *[a.replace("{tmp}", str(tmp_path)) for a in argv], "--beir", str(beir)])
    err = capsys.readouterr().err
    assert rc == 2
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == line
