"""`search index` and `search evaluate` take BM25's token pattern as --token-pattern (default BM25Config's), checked
before any work with errors naming the flag, saved with the index and recorded by `search evaluate --json`.

Before, BM25Config.token_pattern could be set only by building a BM25Retriever from Python: a search index or an
evaluation with another pattern (bm25s' old one, to compare scores with an earlier index) had no command at all.
"""
from __future__ import annotations

import json

import pytest

from tests.extras import needs_text
from tests.search.search_data import VITAMIN_DOCS, VITAMIN_IDS, write_beir
from twotower.cli.main import build_parser, main
from twotower.errors import ConfigError
from twotower.search.bm25 import LEGACY_TOKEN_PATTERN, BM25Config

pytestmark = needs_text

DOCS, IDS = VITAMIN_DOCS, VITAMIN_IDS


@pytest.fixture
def beir(tmp_path):
    return write_beir(tmp_path / "beir", docs=[{"_id": i, "title": "", "text": t} for i, t in zip(IDS, DOCS)],
                      queries=[{"_id": "q", "text": "vitamin D"}],
                      qrels={"test": "query-id\tcorpus-id\tscore\nq\td\t1\n"})


@pytest.mark.parametrize("command", ["index", "evaluate"])
def test_the_default_is_bm25_configs(command):
    args = build_parser().parse_args(["search", command, "--beir", "b", *(["--out", "o"] if command == "index" else [])])
    assert args.token_pattern == BM25Config.token_pattern


@pytest.mark.parametrize(("pattern", "why"), [("[a-", "is not a valid regular expression"),
                                              ("\\w*", "matches the empty string"),
                                              ("(\\w+)", "has a capturing group")])
@pytest.mark.parametrize("command", ["index", "evaluate"])
def test_a_bad_pattern_is_refused_naming_the_flag_before_any_work(tmp_path, capsys, command, pattern, why):
    out = tmp_path / "index"
    argv = ["search", command, "--beir", str(tmp_path / "no-such-beir"), "--token-pattern", pattern]
    assert main(argv + (["--out", str(out)] if command == "index" else [])) != 0
    err = capsys.readouterr().err
    assert f"--token-pattern: '{pattern}' {why}" in err  # as typed, the flag named, before --beir is even read
    assert "token_pattern" not in err and not out.exists()


def test_search_index_saves_the_pattern_and_queries_with_it(beir, tmp_path, capsys):
    out = tmp_path / "index"
    assert main(["search", "index", "--beir", str(beir), "--out", str(out), "--max-length", "32", "--threads", "1",
                 "--token-pattern", LEGACY_TOKEN_PATTERN]) == 0
    assert json.loads((out / "bm25" / "meta.json").read_text())["config"]["token_pattern"] == LEGACY_TOKEN_PATTERN
    capsys.readouterr()
    assert main(["search", "query", "--index", str(out), "--mode", "bm25", "--json", "vitamin D"]) == 0
    # the old pattern drops "d": "vitamin" alone ranks the vitamins A and E abstract first (the default: "d" first)
    assert [h["doc_id"] for h in json.loads(capsys.readouterr().out)["items"]] == ["ae", "d"]


def test_search_evaluate_scores_with_the_pattern_and_records_it(beir, capsys):
    for pattern, ndcg in ((None, 1.0), (LEGACY_TOKEN_PATTERN, pytest.approx(0.6309, abs=1e-4))):
        assert main(["search", "evaluate", "--beir", str(beir), "--json",
                     *(["--token-pattern", pattern] if pattern else [])]) == 0
        got = json.loads(capsys.readouterr().out)
        assert got["NDCG@10"] == ndcg
        assert got["bm25"]["token_pattern"] == (pattern or BM25Config.token_pattern)
        assert {k: got["bm25"][k] for k in ("k1", "b")} == {"k1": BM25Config.k1, "b": BM25Config.b}
    assert main(["search", "evaluate", "--beir", str(beir), "--token-pattern", LEGACY_TOKEN_PATTERN]) == 0
    assert f"bm25 [token pattern {LEGACY_TOKEN_PATTERN}]" in capsys.readouterr().out  # two rows told apart


def test_the_python_calls_take_a_bm25_config_and_refuse_anything_else(beir):
    from twotower.search import SearchIndex, search_evaluate
    from twotower.search.beir import load_corpus

    got = search_evaluate(beir, "test", "bm25", bm25=BM25Config(token_pattern=LEGACY_TOKEN_PATTERN))
    assert got["NDCG@10"] == pytest.approx(0.6309, abs=1e-4)
    with pytest.raises(ConfigError, match="bm25 must be a BM25Config"):
        search_evaluate(beir, "test", "bm25", bm25={"token_pattern": LEGACY_TOKEN_PATTERN})
    with pytest.raises(ConfigError, match="bm25 must be a BM25Config"):  # before the corpus is encoded
        SearchIndex.build(load_corpus(beir / "corpus.jsonl"), bm25=LEGACY_TOKEN_PATTERN)
