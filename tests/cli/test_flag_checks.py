"""Flags refused in one line, naming them, before any work (found walking README as a new user)."""
from __future__ import annotations

import pytest

from twotower.cli.main import main
from twotower.serving.settings import ServiceSettings


def test_serve_rerank_without_a_search_index_is_refused_before_loading(tmp_path, capsys):
    # `serve --run R --rerank CE` (--search-index forgotten) started a server with no /search and no reranker,
    # saying nothing; neither folder need exist: the flags are checked first
    assert main(["serve", "--run", str(tmp_path / "nope"), "--rerank", str(tmp_path / "ce")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --rerank ") and "--search-index DIR" in err and "\n" not in err


def test_serve_rerank_alone_is_told_that_rerank_needs_the_search_index(tmp_path, capsys):
    # `serve --rerank CE` with neither --run nor --search-index was told "serve needs --run DIR and/or
    # --search-index DIR", which does not say the reranker is what needs the index
    assert main(["serve", "--rerank", str(tmp_path / "ce")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --rerank reranks the hits of POST /search") and "\n" not in err


def test_serve_with_a_rerank_folder_that_is_no_cross_encoder_is_refused_before_loading(tmp_path, monkeypatch, capsys):
    # the search index (and its text encoder) was loaded first, the wrong --rerank folder refused only after that
    from twotower.serving import search_service

    def never(*_a, **_k):
        raise AssertionError("the search index was loaded before --rerank was checked")

    monkeypatch.setattr(search_service.SearchService, "load", never)
    assert main(["serve", "--search-index", str(tmp_path / "idx"), "--rerank", str(tmp_path / "nope"),
                 "--port", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --rerank ") and "\n" not in err


@pytest.mark.parametrize("argv, said", [
    (["train", "--dataset", "movielens-100k", "--print-config", "train.seed=-1"], "error: command line: 'train.seed=-1': train.seed: must be an integer >= 0, got -1"),
    (["search", "prepare", "--passages", "p.csv", "--pairs", "q.csv", "--out", "o", "--seed", "-1"],
     "error: --seed: must be between 0 and 2**64 - 1 (the largest torch takes), got -1"),
])
def test_a_negative_seed_is_refused_naming_it_not_a_numpy_traceback(argv, said, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # neither file exists: the seed is refused first
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == said


HUGE = "99999999999999999999"


@pytest.mark.parametrize("flag", ["--max-batch", "--max-history", "--max-k", "--max-queue"])
def test_serve_refuses_a_limit_beyond_64_bits_before_loading(flag, tmp_path, capsys):
    # --max-batch 99999999999999999999 loaded the run, then pydantic raised "OverflowError: int too big to convert"
    # building the request schemas; the run does not exist here: the flag is refused first
    assert main(["serve", "--run", str(tmp_path / "nope"), "--port", "0", flag, HUGE]) == 2
    # --max-k has a tighter ceiling of its own (config.MAX_K), which it names
    bound = "between 1 and 10000 (twotower.config.MAX_K)" if flag == "--max-k" else "at most 2**63 - 1"
    assert capsys.readouterr().err.strip() == f"error: {flag}: must be {bound}, got a number of 20 digits"


@pytest.mark.parametrize("flag", ["--run", "--search-index", "--index"])
def test_serve_refuses_an_empty_path(flag, tmp_path, capsys):
    # `serve --run ""` was taken as no run and died in create_app with a TypeError traceback
    argv = ["serve", "--port", "0", flag, ""] + ([] if flag == "--run" else ["--run", str(tmp_path / "nope")])
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == f"error: {flag}: an empty path; give the folder, or leave {flag} out"


@pytest.mark.parametrize("argv, said", [
    (["train", "--dataset", "movielens-100k", "--print-config", f"train.seed={HUGE}"],
     f"error: command line: 'train.seed={HUGE}': train.seed: must be at most 2**64 - 1 (the largest torch takes), got a "
     "number of 20 digits"),
    (["rerank", "train", "--beir", "b", "--out", "o", "--seed", HUGE],
     "error: --seed: must be between 0 and 2**64 - 1 (the largest torch takes), got a number of 20 digits"),
    (["search", "train", "--beir", "b", "--out", "o", "--seed", HUGE],
     "error: --seed: must be between 0 and 2**64 - 1 (the largest torch takes), got a number of 20 digits"),
])
def test_a_seed_beyond_torch_s_range_is_refused_naming_it_not_an_overflow_traceback(argv, said, tmp_path, monkeypatch,
                                                                                   capsys):
    # `rerank train --seed 99999999999999999999` mined its negatives, then died in torch.manual_seed ("Overflow when
    # unpacking long long"); the BEIR folder does not exist here: the seed is refused first
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == said
    assert not (tmp_path / "o").exists()


def test_recommend_history_help_says_the_order_it_reads(capsys):
    # a sequence (or recency) tower reads the order: `recommend --help` did not say it, `explain --help` and the
    # HTTP error ("history (item ids, oldest first)") did
    assert main(["recommend", "--help"]) == 0
    assert "comma list of item ids (oldest first)" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("wait", ["30", str(ServiceSettings.max_wait_ms)])  # the default typed out is dropped too
def test_serve_no_max_wait_with_an_explicit_max_wait_ms_is_refused(wait, tmp_path, capsys):
    # `serve --no-max-wait --max-wait-ms 30` served with no wait bound: the 30 was dropped without a word
    assert main(["serve", "--run", str(tmp_path / "nope"), "--no-max-wait", "--max-wait-ms", wait]) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and "--max-wait-ms" in errors[0] and "--no-max-wait" in errors[0]


def test_serve_wait_flags_alone_keep_their_meaning():
    from twotower.cli.main import build_parser
    from twotower.cli.serve_cmd import _settings

    parse = build_parser().parse_args
    assert _settings(parse(["serve", "--run", "r", "--no-max-wait"])).max_wait_ms is None
    assert _settings(parse(["serve", "--run", "r", "--max-wait-ms", "30"])).max_wait_ms == 30.0


def test_quiet_and_verbose_are_taken_after_the_command_too(capsys):
    """`twotower recommend -q --run R` was "unrecognized arguments: -q": the output flags were taken before the
    command only."""
    from twotower.cli.main import build_parser

    parser = build_parser()
    after = parser.parse_args(["recommend", "-q", "--run", "r", "--user", "1"])
    before = parser.parse_args(["-q", "recommend", "--run", "r", "--user", "1"])
    neither = parser.parse_args(["recommend", "--run", "r", "--user", "1"])
    assert after.quiet and before.quiet and not neither.quiet
    assert parser.parse_args(["search", "query", "--index", "i", "some words", "-v"]).verbose
    assert parser.parse_args(["data", "split", "--input", "x.csv", "--out", "o", "--verbose"]).verbose


def test_print_config_prints_on_rank_0_only(monkeypatch, capsys):
    """Under torchrun `train --print-config` printed the JSON once per rank: the output was no JSON document."""
    import json

    from twotower.cli.main import main

    monkeypatch.setenv("RANK", "1")
    assert main(["train", "--print-config"]) == 0
    assert capsys.readouterr().out == ""
    monkeypatch.setenv("RANK", "0")
    assert main(["train", "--print-config"]) == 0
    assert json.loads(capsys.readouterr().out)["train"]["epochs"] >= 1
