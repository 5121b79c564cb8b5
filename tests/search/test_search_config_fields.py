"""BM25Config and MiningConfig built by hand: each field's type and range checked at construction, naming the field."""
from __future__ import annotations

import pytest

from twotower.errors import ConfigError
from twotower.search import BM25Config, MiningConfig


@pytest.mark.parametrize("kwargs, match", [
    ({"k1": "a"}, r"^BM25Config\.k1: expected float, got 'a' \(str\)"),  # was a TypeError from "<"
    ({"b": None}, r"^BM25Config\.b: expected float"),
    ({"method": 3}, r"^BM25Config\.method: expected str"),
    ({"stemmer": 1}, r"^BM25Config\.stemmer: expected"),
    ({"k1": float("nan")}, r"^BM25Config\.k1: expected a finite number, got nan"),  # every query answered an empty list
    ({"k1": float("inf")}, r"^BM25Config\.k1: expected a finite number, got inf"),
])
def test_bm25_config_refuses_a_bad_field(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        BM25Config(**kwargs)


@pytest.mark.parametrize("kwargs, match", [
    ({"n": "3"}, r"^MiningConfig\.n: expected int, got '3' \(str\)"),
    ({"depth": 2.5}, r"^MiningConfig\.depth: expected int"),
    ({"margin": float("nan")}, r"^MiningConfig\.margin: expected a finite number, got nan"),  # filtered nothing
])
def test_mining_config_refuses_a_bad_field(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        MiningConfig(**kwargs)


# named as the other configs name their settings (``train.lr: must be > 0``): "n must be >= 1, got 0" and
# "need 0 <= skip_top < depth, got skip_top=3, depth=3" read unlike every other refusal
@pytest.mark.parametrize("kwargs, message", [
    ({"n": 0}, "MiningConfig.n: must be >= 1, got 0"),
    ({"depth": 0}, "MiningConfig.depth: must be >= 1, got 0"),
    ({"skip_top": -1}, "MiningConfig.skip_top: must be >= 0, got -1"),
    ({"depth": 3, "skip_top": 3},
     "MiningConfig.skip_top: must be below MiningConfig.depth (3) to leave a candidate to mine, got 3"),
    ({"relative_margin": 1.5}, "MiningConfig.relative_margin: must be in [0, 1) or None, got 1.5"),
    ({"margin": -0.5}, "MiningConfig.margin: must be >= 0 or None, got -0.5"),
])
def test_mining_config_names_the_field_and_the_rule(kwargs, message):
    with pytest.raises(ConfigError) as e:
        MiningConfig(**kwargs)
    assert str(e.value) == message


def test_the_commands_still_name_their_flag_for_a_mining_field():
    """`search train` / `rerank train` build their MiningConfig with ``n`` from their own flags: the field's name,
    now said with its class, is still replaced by the flag the user typed."""
    import argparse

    from twotower.cli.search_cmd import _mining_config

    args = argparse.Namespace(mining_depth=30, mining_margin=0.05)
    with pytest.raises(ConfigError) as e:
        _mining_config(args, 0, "--negatives x --epochs")
    assert str(e.value) == "--negatives x --epochs: must be >= 1, got 0"


# FinetuneConfig, RerankTrainConfig, BM25Config and PrepareConfig, as MiningConfig: "lr must be > 0, got 0", "k1 must
# be a finite number >= 0" and "--test-share must be in [0, 1)" read unlike every other config's refusal
# (``train.lr: must be > 0, got 0``)
@pytest.mark.parametrize("cls_name, kwargs, message", [
    ("FinetuneConfig", {"lr": 0.0}, "FinetuneConfig.lr: must be > 0, got 0.0"),
    ("FinetuneConfig", {"epochs": 0}, "FinetuneConfig.epochs: must be >= 1, got 0"),
    ("FinetuneConfig", {"batch_size": 1}, "FinetuneConfig.batch_size: must be >= 2 for in-batch negatives, got 1"),
    ("FinetuneConfig", {"warmup_frac": 1.0}, "FinetuneConfig.warmup_frac: must be in [0, 1), got 1.0"),
    ("FinetuneConfig", {"negatives_per_query": -1}, "FinetuneConfig.negatives_per_query: must be >= 0, got -1"),
    ("FinetuneConfig", {"seed": -1}, "FinetuneConfig.seed: must be an integer >= 0, got -1"),
    ("FinetuneConfig", {"valid_frac": 1.0}, "FinetuneConfig.valid_frac: must be in [0, 1) (0: no validation), got 1.0"),
    ("FinetuneConfig", {"mining_retriever": "bm2"},
     "FinetuneConfig.mining_retriever: 'bm2' is not one of dense, bm25; did you mean 'bm25'?"),
    ("FinetuneConfig", {"corpus_negatives": True, "train_doc_tower": True},
     "FinetuneConfig.corpus_negatives: True needs FinetuneConfig.train_doc_tower=False (a frozen, pre-encoded corpus)"),
    ("FinetuneConfig", {"shared": True}, "FinetuneConfig.shared: True ties the towers, so the document tower can't be "
     "frozen; set train_doc_tower=True or shared=False"),
    ("FinetuneConfig", {"epochs": "3"}, "FinetuneConfig.epochs: expected int, got '3' (str)"),
    ("RerankTrainConfig", {"lr": 0.0}, "RerankTrainConfig.lr: must be > 0, got 0.0"),
    ("RerankTrainConfig", {"groups_per_step": 0}, "RerankTrainConfig.groups_per_step: must be >= 1, got 0"),
    ("RerankTrainConfig", {"freeze_layers": -1}, "RerankTrainConfig.freeze_layers: must be >= 0, got -1"),
    ("RerankTrainConfig", {"max_groups": 0}, "RerankTrainConfig.max_groups: must be >= 1 or None, got 0"),
    ("RerankTrainConfig", {"seed": 2**64}, "RerankTrainConfig.seed: must be at most 2**64 - 1 (the largest torch "
     "takes), got 18446744073709551616"),
    ("PrepareConfig", {"test_share": 1.0}, "PrepareConfig.test_share: must be in [0, 1), got 1.0"),  # --test-share
    ("PrepareConfig", {"seed": -1}, "PrepareConfig.seed: must be an integer >= 0, got -1"),
    ("PrepareConfig", {"seed": 2**64}, "PrepareConfig.seed: must be at most 2**64 - 1 (the largest torch takes), got "
     "18446744073709551616"),
    ("PrepareConfig", {"query_id": " "}, "PrepareConfig.query_id: empty column name; give the column's name in the "
     "file, or leave it out"),
    ("PrepareConfig", {"pair_passage_list": ";;"}, "PrepareConfig.pair_passage_list: give 'brackets' for cells holding "
     "a list in brackets ([1, 2], ['a', 'b'] or [1 2]), or the one character between the ids in a cell (';' for 1;2); "
     "leave it out for one id per cell, got ';;'"),
    ("PrepareConfig", {"encoding": "utf-9"}, "PrepareConfig.encoding: 'utf-9' is not a text encoding Python knows; give "
     "a codec name such as utf-8 (the default), cp1252 or latin-1 (Windows / Excel exports), utf-16"),
    ("PrepareConfig", {"test_share": "0.2"}, "PrepareConfig.test_share: expected float, got '0.2' (str)"),
    ("BM25Config", {"k1": -1.0}, "BM25Config.k1: must be >= 0, got -1.0"),
    ("BM25Config", {"b": 1.5}, "BM25Config.b: must be in [0, 1], got 1.5"),
    ("BM25Config", {"method": "lucen"},
     "BM25Config.method: 'lucen' is not one of lucene, robertson, atire, bm25l, bm25+; did you mean 'lucene'?"),
    ("BM25Config", {"token_pattern": "(\\w+)"}, "BM25Config.token_pattern: '(\\w+)' has a capturing group, so bm25s "
     "would index the group instead of the whole match; write groups as (?:...)"),
])
def test_the_training_and_bm25_configs_name_the_field_and_the_rule(cls_name, kwargs, message):
    import twotower.search as search

    with pytest.raises(ConfigError) as e:
        getattr(search, cls_name)(**kwargs)
    assert str(e.value) == message


@pytest.mark.parametrize("argv, said", [
    (["search", "train", "--lr", "0"], "error: --lr: must be > 0, got 0.0"),
    (["search", "train", "--batch-size", "1"], "error: --batch-size: must be >= 2 for in-batch negatives, got 1"),
    (["search", "train", "--valid-frac", "1"], "error: --valid-frac: must be in [0, 1) (0: no validation), got 1.0"),
    (["rerank", "train", "--lr", "0"], "error: --lr: must be > 0, got 0.0"),
    (["rerank", "train", "--batch-size", "0"], "error: --batch-size: must be >= 1, got 0"),
    (["rerank", "train", "--patience", "0"], "error: --patience: must be >= 1, got 0"),
])
def test_the_training_commands_still_name_their_flag_for_a_config_field(tmp_path, monkeypatch, capsys, argv, said):
    """`search train` / `rerank train` check their number flags first (--lr: must be more than 0); a refusal of the
    config they build from them (the same bounds today) still names the flag typed, not FinetuneConfig.lr."""
    import twotower.cli.search_cmd as search_cmd
    from twotower.cli.main import main

    monkeypatch.setattr(search_cmd, "_check_train_numbers", lambda *a, **k: None)
    assert main([*argv, "--beir", str(tmp_path / "no-such-beir"), "--out", str(tmp_path / "m")]) != 0
    err = capsys.readouterr().err.strip()
    assert err == said and "Config" not in err and not (tmp_path / "m").exists()


@pytest.mark.parametrize("argv, said", [
    (["--pair-passage-list", ";;"], "error: --pair-passage-list: give 'brackets' for cells holding a list in brackets "
     "([1, 2], ['a', 'b'] or [1 2]), or the one character between the ids in a cell (';' for 1;2); leave it out for one "
     "id per cell, got ';;'"),
    (["--query-id-col", " "], "error: --query-id-col: empty column name; give the column's name in the file, or leave "
     "it out"),
    (["--pair-passage-col", ""], "error: --pair-passage-col: empty column name; give the column's name in the file, or "
     "leave it out"),
    # "text encoding" and "codec" kept as written: only the field said with its class is replaced
    (["--encoding", "utf-9"], "error: --encoding: 'utf-9' is not a text encoding Python knows; give a codec name such "
     "as utf-8 (the default), cp1252 or latin-1 (Windows / Excel exports), utf-16"),
])
def test_search_prepare_still_names_its_flag_for_a_config_field(tmp_path, capsys, argv, said):
    """`search prepare` builds PrepareConfig from its flags: a refusal names the flag typed, not
    PrepareConfig.pair_passage_list."""
    from twotower.cli.main import main

    (tmp_path / "p.csv").write_text("passage_id,text\n1,aspirin\n", encoding="utf-8")
    (tmp_path / "q.csv").write_text("query,passage_id\naspirin,1\n", encoding="utf-8")
    base = ["search", "prepare", "--passages", str(tmp_path / "p.csv"), "--pairs", str(tmp_path / "q.csv"), "--out",
            str(tmp_path / "out")]
    assert main([*base, *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err == said and "Config" not in err and not (tmp_path / "out").exists()


def test_good_values_are_kept_as_plain_numbers():
    import numpy as np

    cfg = BM25Config(k1=np.float32(0.9), b=1)
    assert type(cfg.k1) is float and cfg.b == 1.0 and type(cfg.b) is float
    assert MiningConfig(n=np.int64(2), margin=0.1).n == 2
