"""`twotower search info --index DIR [--json]` shows what a saved search index was built with, BM25's settings
(k1, b, token pattern, documents, vocabulary) included, checked against its checksums, without loading the model.

Before, no command showed them: BM25's k1, b and token pattern were read from bm25/meta.json by hand, and its
vocabulary size from bm25s' own files.
"""
from __future__ import annotations

import hashlib
import json

import pytest

from tests.extras import needs_text
from tests.search.search_data import write_beir
from twotower.cli.main import main
from twotower.search.bm25 import LEGACY_TOKEN_PATTERN, BM25Config, BM25Retriever
from twotower.utils.version import installed_version

pytestmark = needs_text

DOCS = ["Vitamin D and bones", "Coffee and liver"]  # terms: vitamin, d, bone, coffe, liver ("and": a stop word)


@pytest.fixture
def index(tmp_path, capsys):
    beir = write_beir(tmp_path / "beir", docs=[{"_id": f"x{i}", "title": "", "text": t} for i, t in enumerate(DOCS)])
    out = tmp_path / "index"
    assert main(["search", "index", "--beir", str(beir), "--out", str(out), "--max-length", "32", "--threads", "1",
                 "--token-pattern", LEGACY_TOKEN_PATTERN, "--fusion", "zscore", "--bm25-weight", "0.7"]) == 0
    capsys.readouterr()
    return out


def test_info_shows_the_bm25_settings_without_loading_the_model(index, capsys, monkeypatch):
    def no_model(*a, **k):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("search info loaded the bi-encoder")

    monkeypatch.setattr("twotower.search.finetune.load_bi_encoder", no_model)
    assert main(["search", "info", "--index", str(index), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["kind"] == "search_index" and got["path"] == str(index.resolve())
    assert got["documents"] == 2 and got["model"] is None and got["max_length"] == 32
    assert got["twotower_version"] == installed_version()  # which code built it
    assert got["fusion"]["name"] == "interpolation" and got["fusion"]["params"]["weights"] == pytest.approx([0.7, 0.3])
    # the legacy pattern drops the one-letter "d": 4 terms
    assert got["bm25"] == {"k1": BM25Config.k1, "b": BM25Config.b, "method": "lucene", "stopwords": "en",
                           "stemmer": "english", "token_pattern": LEGACY_TOKEN_PATTERN, "documents": 2, "vocabulary": 4}
    assert main(["search", "info", "--index", str(index)]) == 0
    text = capsys.readouterr().out
    for line in (f"search index {index.resolve()}", "lucene, k1 1.2, b 0.75",
                 f"{LEGACY_TOKEN_PATTERN} (words of 2 or more letters or digits)", "vocabulary     4 terms",
                 "zscore interpolation (w=0.70, 0.30)"):
        assert line in text, (line, text)


def test_a_bm25_folder_is_described_too(tmp_path, capsys):
    BM25Retriever().fit(DOCS, ["a", "b"]).save(tmp_path / "bm25")
    assert main(["search", "info", "--index", str(tmp_path / "bm25"), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["kind"] == "bm25" and got["bm25"]["token_pattern"] == BM25Config.token_pattern
    assert got["bm25"]["vocabulary"] == 5 and got["bm25"]["documents"] == 2


def test_a_damaged_index_is_refused_not_described(index, capsys):
    meta = index / "bm25" / "meta.json"
    meta.write_text(meta.read_text().replace('"k1": 1.2', '"k1": 2.0'))
    assert main(["search", "info", "--index", str(index)]) != 0
    assert f"{meta}: sha256 mismatch" in capsys.readouterr().err


def test_help_names_every_key_of_the_json(index, capsys):
    assert main(["search", "info", "--index", str(index), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert main(["search", "info", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    json_help = text[text.index("--json print"):]
    assert [k for k in [*got, *got["bm25"]] if k not in json_help] == []


def test_a_moved_model_is_said_missing(tmp_path, capsys):
    """An index built with `--model DIR` whose DIR was moved: info printed the path as if the index could be
    searched, while `search query` refused it ("the index's model ... does not exist")."""
    index = tmp_path / "index"
    index.mkdir()
    meta = index / "meta.json"
    BM25Retriever().fit(DOCS, ["a", "b"]).save(index / "bm25")
    files = {p.relative_to(index).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
             for p in sorted(index.rglob("*")) if p.is_file()}
    model = tmp_path / "runs" / "bi"
    model.mkdir(parents=True)
    meta.write_text(json.dumps({"format": 2, "kind": "search_index", "model": str(model), "files": files,
                                "fusion": {"name": "rrf", "params": {"k": 60}}, "documents": 2}))
    assert main(["search", "info", "--index", str(index), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model_found"] is True
    model.rename(tmp_path / "runs" / "bi-moved")
    assert main(["search", "info", "--index", str(index), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model_found"] is False
    assert main(["search", "info", "--index", str(index)]) == 0
    assert f"model            {model} (missing: moved or deleted;" in capsys.readouterr().out


def test_the_text_says_how_many_passages_the_embeddings_cut(index, capsys):
    """`search index` logs "N of M passages cut at L word pieces" once and meta.json records it, but the text of
    `search info` left it out: nothing said the stored embeddings saw only each passage's start."""
    meta = json.loads((index / "meta.json").read_text())
    assert main(["search", "info", "--index", str(index)]) == 0
    want = (f"{meta['truncation']['cut']} of 2 passages cut at 32 word pieces "
            f"(longest {meta['truncation']['longest']})")
    assert f"  truncation       {want}\n" in capsys.readouterr().out


def test_a_query_tower_recorded_with_the_older_fingerprint_is_not_said_to_have_changed(index, capsys):
    # the same weights, fingerprinted before whole files were hashed: search query answers from such an index, and
    # info said "(changed: ... dense and hybrid search and serve refuse the index until it is rebuilt)"
    from twotower.search import SearchIndex
    from twotower.text import default_model_path

    from tests.text.test_weights_fingerprint import _head_tail as head_tail

    meta_path = index / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta_path.write_text(json.dumps({**meta, "query_encoder": f"st@{head_tail(default_model_path())}"}))
    SearchIndex.load(index)  # not refused
    assert main(["search", "info", "--index", str(index), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["query_encoder_matches"] is True
    assert main(["search", "info", "--index", str(index)]) == 0
    text = capsys.readouterr().out
    assert "(the model's query tower)" in text and "changed" not in text
