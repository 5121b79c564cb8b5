"""`search evaluate` refused the whole evaluation over one qrels pair whose corpus id is not in corpus.jsonl. That
stays the default (the message now names the way out); with --keep-unknown (Python: keep_unknown=True) such a pair
counts as BEIR's evaluation counts it, relevant and never retrieved, with a warning naming how many and one id."""
from __future__ import annotations

import json

import pytest
from search_data import write_beir

from tests.extras import needs_text
from twotower.cli.main import main
from twotower.errors import DataError
from twotower.search.evaluate import search_evaluate

pytestmark = needs_text

# query 4: d4 (found); query 5: d3 (found) and d9 (not in the corpus); query 3: only d77, not in the corpus either
QRELS = "query-id\tcorpus-id\tscore\n4\td4\t1\n5\td3\t1\n5\td9\t1\n3\td77\t1\n"


@pytest.fixture
def beir(tmp_path):
    return write_beir(tmp_path / "beir", {"test": QRELS})


def test_the_refusal_stays_the_default_and_names_the_flag(beir, capsys):
    assert main(["search", "evaluate", "--beir", str(beir), "--json"]) != 0
    err = capsys.readouterr().err
    # the CLI names its flag alone: it said "keep_unknown=True (search evaluate --keep-unknown)", the Python
    # argument first, to a user who had typed a command
    assert "corpus id 'd9' is not in corpus.jsonl; --keep-unknown counts such a pair as relevant and never " \
           "retrieved, as BEIR's evaluation does" in err, err
    assert "keep_unknown=True" not in err
    with pytest.raises(DataError, match="; keep_unknown=True counts such a pair"):
        search_evaluate(beir, "test", "bm25")


def test_keep_unknown_counts_them_relevant_and_never_retrieved(beir, capsys, caplog):
    with caplog.at_level("WARNING"):
        assert main(["search", "evaluate", "--beir", str(beir), "--json", "--keep-unknown"]) == 0
    got = json.loads(capsys.readouterr().out)
    # BEIR's figures: query 4 recalls 1 of 1, query 5 one of 2, query 3 none of 1 (dropping them would give 1.0)
    assert got["Recall@100"] == pytest.approx((1 + 0.5 + 0) / 3)
    assert "2 (query, document) pairs name a corpus id that is not in corpus.jsonl (e.g. 'd9', row 4); counted as " \
           "judged and never retrieved" in caplog.text
    m = search_evaluate(beir, "test", "bm25", keep_unknown=True)
    assert m["queries"] == 3 and m["Recall@100"] == got["Recall@100"]


def test_one_unknown_pair_is_worded_in_the_singular(tmp_path, caplog):
    """"1 (query, document) pair name a corpus id" (the noun agreed, the verb did not)."""
    beir = write_beir(tmp_path / "one", {"test": "query-id\tcorpus-id\tscore\n4\td4\t1\n5\td9\t1\n"})
    with caplog.at_level("WARNING"):
        search_evaluate(beir, "test", "bm25", keep_unknown=True)
    assert "1 (query, document) pair names a corpus id that is not in corpus.jsonl (e.g. 'd9', row 3)" in caplog.text
