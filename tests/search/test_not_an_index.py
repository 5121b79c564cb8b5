"""`search query --index DIR` / `serve --search-index DIR` given another search artefact say what it is.

Before: every such folder got "no search index at DIR; build one with 'twotower search index --beir DIR --out DIR'",
a command that is itself refused when DIR is a bi-encoder, a BEIR folder or a cross-encoder (not an index to replace).
"""
from __future__ import annotations

import json
import shlex

import pytest
from search_data import write_beir

from twotower.cli.main import main
from twotower.errors import DataError
from twotower.serving.search_service import SearchService


def _marker(folder, name: str, meta: dict):
    folder.mkdir(parents=True)
    (folder / name).write_text(json.dumps(meta))
    return folder


def _query_error(index, capsys) -> str:
    assert main(["search", "query", "--index", str(index), "sleep"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    return err.removeprefix("error: ")


def test_a_bi_encoder_names_the_index_command_with_its_training_corpus(tmp_path, capsys, monkeypatch):
    beir = write_beir(tmp_path / "beir")
    bi = _marker(tmp_path / "runs" / "my-bi", "twotower_bi_encoder.json",
                 {"kind": "bi_encoder", "data": {"beir": str(beir.resolve()), "split": "train"}})
    want = (f"{bi} is a fine-tuned bi-encoder (search train), not a search index; build an index with "
            f"`twotower search index --beir {beir.resolve()} --model {bi} --out {bi}-index`")
    assert _query_error(bi, capsys) == want
    with pytest.raises(DataError) as e:  # `serve --search-index` loads it the same way
        SearchService.load(bi)
    assert e.value.message == want
    # and the command it suggests passes `search index`'s checks, up to the build (stopped here: no model loads)
    import twotower.search.pipeline as pipeline

    def build(cls, corpus, **kw):
        raise AssertionError(f"build {len(corpus)} documents with {kw['model']}")

    monkeypatch.setattr(pipeline.SearchIndex, "build", classmethod(build))
    suggested = shlex.split(want.split("`")[1])[1:]  # search index --beir ... --model ... --out ...
    with pytest.raises(AssertionError, match=f"build 5 documents with {bi}"):
        main(suggested)


def test_a_bi_encoder_without_a_recorded_corpus_says_beir(tmp_path, capsys):
    bi = _marker(tmp_path / "bi", "twotower_bi_encoder.json", {"kind": "bi_encoder"})
    assert _query_error(bi, capsys) == (f"{bi} is a fine-tuned bi-encoder (search train), not a search index; build "
                                        f"an index with `twotower search index --beir BEIR --model {bi} --out {bi}-index`")


def test_a_cross_encoder_is_sent_to_rerank(tmp_path, capsys):
    ce = _marker(tmp_path / "ce", "twotower_cross_encoder.json", {"kind": "cross_encoder"})
    assert _query_error(ce, capsys) == (
        f"{ce} is a cross-encoder (rerank train), not a search index: give it to --rerank; build an index with "
        f"`twotower search index --beir BEIR --out {ce}-index` and rerank its hits with --rerank {ce}")


def test_a_beir_folder_names_itself_as_the_corpus(tmp_path, capsys):
    beir = write_beir(tmp_path / "mine")
    assert _query_error(beir, capsys) == (f"{beir} is a BEIR folder (search prepare), not a search index; build an "
                                          f"index from it with `twotower search index --beir {beir} --out {beir}-index`")


def test_any_other_folder_keeps_the_plain_message(tmp_path, capsys):
    other = tmp_path / "notes"
    other.mkdir()
    assert _query_error(other, capsys) == (f"no search index at {other}; build one with `twotower search index "
                                           f"--beir DIR --out {other}`")


def test_suggested_commands_keep_a_spaced_path_one_argument(tmp_path, capsys):
    # `search query --index "my runs/bi ü"` said "build an index with 'twotower search index --beir BEIR --model
    # my runs/bi ü --out ...'": pasted, --model took "my" and the rest were stray arguments
    bi = _marker(tmp_path / "my runs" / "bi ü", "twotower_bi_encoder.json", {"kind": "bi_encoder"})
    command = shlex.split(_query_error(bi, capsys).split("`")[1])
    assert command == ["twotower", "search", "index", "--beir", "BEIR", "--model", str(bi), "--out", f"{bi}-index"]


def _suggested_build_passes_the_out_check(message: str, monkeypatch, beir) -> list[str]:
    """The `twotower search index ...` command in ``message``, run with ``beir`` for its --beir DIR: it passes every
    check of `search index` up to the build (stopped there: no model loads)."""
    import twotower.search.pipeline as pipeline

    def build(cls, corpus, **kw):
        raise AssertionError(f"build {len(corpus)} documents")

    monkeypatch.setattr(pipeline.SearchIndex, "build", classmethod(build))
    command = shlex.split(message.split("`")[1])[1:]
    command[command.index("--beir") + 1] = str(beir)
    with pytest.raises(AssertionError, match="build 5 documents"):
        main(command)
    return command


def test_an_index_that_lost_its_meta_json_says_so_and_to_remove_it(tmp_path, capsys, monkeypatch):
    # "no search index at IDX; build one with `twotower search index --beir DIR --out IDX`", which refused IDX as
    # "a non-empty folder that is not a search index"
    index = tmp_path / "idx"
    (index / "bm25").mkdir(parents=True)
    (index / "docs.json").write_text("{}")
    (index / "embeddings.npy").write_bytes(b"")
    err = _query_error(index, capsys)
    assert err.startswith(f"{index} is an incomplete search index: no meta.json beside its bm25, docs.json, "
                          f"embeddings.npy"), err
    assert f"remove the folder (rm -r {index})" in err
    assert main(["search", "info", "--index", str(index)]) == 2  # info refuses it the same way
    assert capsys.readouterr().err.strip() == f"error: {err}"
    import shutil

    shutil.rmtree(index)  # as the message says, then its command goes through
    _suggested_build_passes_the_out_check(err, monkeypatch, write_beir(tmp_path / "beir"))


def test_a_folder_of_other_files_is_sent_beside_it(tmp_path, capsys, monkeypatch):
    other = tmp_path / "notes"
    other.mkdir()
    (other / "todo.txt").write_text("x")
    err = _query_error(other, capsys)
    assert err == (f"no search index at {other} (a folder of other files, which search index --out does not replace); "
                   f"build one beside it with `twotower search index --beir DIR --out {other}-index` and give that "
                   "folder")
    command = _suggested_build_passes_the_out_check(err, monkeypatch, write_beir(tmp_path / "beir"))
    assert command[command.index("--out") + 1] == f"{other}-index"


def test_the_bm25_half_of_an_index_sends_to_the_index(tmp_path, capsys):
    # "IDX/bm25/meta.json does not describe a search index", for the folder that `search info` describes as
    # "BM25 index" and whose parent is the index
    from twotower.search.bm25 import BM25Retriever

    index = tmp_path / "idx"
    BM25Retriever().fit(["aspirin and the heart", "coffee"], ["a", "b"]).save(index / "bm25")
    (index / "meta.json").write_text(json.dumps({"kind": "search_index"}))
    assert _query_error(index / "bm25", capsys) == (f"{index / 'bm25'} is the BM25 half of the search index {index}, "
                                                    f"not a search index; give the index folder {index} instead")
    alone = tmp_path / "bm25-alone"
    BM25Retriever().fit(["aspirin and the heart", "coffee"], ["a", "b"]).save(alone)
    assert _query_error(alone, capsys) == (f"{alone} is a BM25 index (BM25Retriever.save), not a search index (BM25 + "
                                           f"dense); build one with `twotower search index --beir DIR --out "
                                           f"{alone}-index`")
