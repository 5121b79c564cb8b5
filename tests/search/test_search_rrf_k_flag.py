"""`--rrf-k` on the commands with --fusion (search evaluate, search index): RRF's k could be set from Python or a
config file only, and --fusion's help said "RRF (k=60)" as if it were fixed."""
from __future__ import annotations

import argparse
import json
import logging

import pytest

from twotower.cli.main import main
from twotower.cli.search_cmd import _fusion_choice, register
from twotower.config import MAX_RRF_K, SearchConfig

from tests.extras import needs_text


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    return parser.parse_args(list(argv))


@pytest.mark.parametrize("cmd", [["evaluate", "--beir", "b"], ["index", "--beir", "b", "--out", "o"]])
def test_rrf_k_reaches_the_fusion(cmd):
    assert _parse("search", *cmd).rrf_k == SearchConfig.rrf_k  # the default is the config's
    choice = _fusion_choice(_parse("search", *cmd, "--rrf-k", "10"))
    assert (choice.name, choice.params) == ("rrf", {"k": 10})


@pytest.mark.parametrize("value", ["0", str(MAX_RRF_K + 1)])
def test_a_bad_rrf_k_is_refused_naming_the_flag(value, beir_dir, capsys):
    assert main(["search", "evaluate", "--beir", str(beir_dir), "--retriever", "hybrid", "--rrf-k", value]) == 2
    assert "--rrf-k: must be" in capsys.readouterr().err


def test_rrf_k_with_another_fusion_is_warned_about(caplog):
    with caplog.at_level(logging.WARNING):
        choice = _fusion_choice(_parse("search", "index", "--beir", "b", "--out", "o", "--fusion", "minmax",
                                       "--rrf-k", "10"))
    assert choice.name == "interpolation"
    assert "--rrf-k 10 has no effect with --fusion minmax" in caplog.text


@needs_text
def test_evaluate_json_reports_the_k_it_fused_with(beir_dir, tmp_path, capsys, monkeypatch):
    seen = {}

    def fake_evaluate(beir, split, retriever, model_dir, rerank, **kw):  # noqa: ANN001, ANN003, ANN202
        seen["fusion"] = kw["fusion"]
        return {"NDCG@10": 0.5, "Recall@10": 0.5, "Recall@100": 1.0, "MRR@10": 0.5, "queries": 3, "skipped": 0,
                "seconds": 0.1}

    monkeypatch.setattr("twotower.search.evaluate.search_evaluate", fake_evaluate)
    assert main(["search", "evaluate", "--beir", str(beir_dir), "--retriever", "hybrid", "--rrf-k", "5",
                 "--cache", str(tmp_path / "c"), "--json"]) == 0
    assert seen["fusion"].params == {"k": 5}
    assert json.loads(capsys.readouterr().out)["fusion"] == {"name": "rrf", "params": {"k": 5}}
