"""Every number flag of the command line refuses a value out of its range in one wording, the words of `recommend --k 0`
(``--k: must be at least 1, got 0``): ``--FLAG: must be at least N, got V``, ``... at most N (why), got V``, ``...
between A and B, got V`` (twotower.pipeline.refusals.range_refusal). They said it seven ways: "--epochs must be >= 1",
"--queries must be a positive integer", "--lr must be > 0, got 0.0", "--target-recall must be in (0, 1]", "encoder
threads must be a positive integer up to 1024 or None" (no flag), and `train --epochs 0` named the setting it stands for,
"train.epochs: must be >= 1", a key the user never typed. Each value here is refused before any work: the run, index
and files named do not exist (a small BEIR folder where the command reads it first). A float flag refuses NaN (in no
range) and, where the range has an upper bound, infinity in the same words."""
from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from twotower.cli.main import build_parser, main

HUGE = "1000000000000"
THREADS = "between 1 and 1024"  # twotower.config.MAX_THREADS, of every --threads and --encoder-threads
RUN, OUT = "/nonexistent-run", "/nonexistent-dir/out"

#: (command, flag, the bound said, the values refused): the message is "FLAG: must be BOUND, got VALUE"
REFUSED = [
    ("demo", "--epochs", "at least 1", ("0", "-1")),
    ("demo", "--threads", THREADS, ("0", "-1", HUGE)),
    ("data split", "--n", "at least 1", ("0", "-1")),
    ("data split", "--seed", "at least 0", ("-1",)),
    ("train", "--threads", THREADS, ("0", "-1", HUGE)),
    ("train", "--epochs", "at least 1", ("0", "-1")),
    ("train", "--encoder-threads", THREADS, ("0", "-1", HUGE)),
    ("evaluate", "--ease-max-items", "at least 1", ("0", "-1")),
    ("evaluate", "--ease-low-rank-max-items", "at least 1", ("0", "-1")),
    ("evaluate", "--threads", THREADS, ("0", "-1", HUGE)),
    ("recommend", "--k", "at least 1", ("0", "-1")),
    ("recommend", "--k", "at most 10000 (twotower.config.MAX_K)", (HUGE,)),
    ("recommend", "--filter-exact-max", "at least 0", ("-1",)),
    ("recommend", "--threads", THREADS, ("0", "-1", HUGE)),
    ("similar", "--k", "at least 1", ("0", "-1")),
    ("similar", "--k", "at most 10000 (twotower.config.MAX_K)", (HUGE,)),
    ("similar", "--filter-exact-max", "at least 0", ("-1",)),
    ("similar", "--threads", THREADS, ("0", "-1", HUGE)),
    ("explain", "--top", "at least 0 (history items listed)", ("-1",)),
    ("explain", "--threads", THREADS, ("0", "-1", HUGE)),
    ("index build", "--exact-budget-ms", "at least 0 (0: never exact)", ("-1", "nan")),
    ("index build", "--target-recall", "more than 0 and at most 1", ("0", "-1", HUGE, "nan", "inf")),
    ("index build", "--k", "at least 1", ("0", "-1")),
    ("index build", "--k", "at most 10000 (twotower.config.MAX_K)", (HUGE,)),
    ("index build", "--queries", "at least 1", ("0", "-1")),
    ("index build", "--max-train", "at least 1", ("0", "-1")),
    ("index build", "--seed", "at least 0", ("-1",)),
    ("index build", "--latency-threads", THREADS, ("0", "-1", HUGE)),
    ("index build", "--threads", THREADS, ("0", "-1", HUGE)),
    ("index build", "--nprobe", "at least 1", ("0", "-1")),
    ("index build", "--ef-search", "at least 1", ("0", "-1")),
    ("serve", "--port", "between 0 and 65535", ("-1", HUGE)),
    ("serve", "--max-concurrency", THREADS, ("0", "-1", HUGE)),
    ("serve", "--max-queue", "at least 0", ("-1",)),
    ("serve", "--max-wait-ms", "more than 0 and at most 3600000 (milliseconds)", ("0", "-1", HUGE, "nan", "inf")),
    ("serve", "--max-k", "between 1 and 10000 (twotower.config.MAX_K)", ("0", "-1", HUGE)),
    ("serve", "--max-batch", "at least 1", ("0", "-1")),
    ("serve", "--max-history", "at least 1", ("0", "-1")),
    ("serve", "--max-exclude", "at least 1", ("0", "-1")),
    ("serve", "--max-body-bytes", "between 64 and 1073741824", ("0", "-1", HUGE)),
    ("serve", "--body-timeout", "more than 0 and at most 3600 (seconds)", ("0", "-1", HUGE, "nan", "inf")),
    ("serve", "--threads", THREADS, ("0", "-1", HUGE)),
    ("serve", "--explain-k", "at least 1", ("0", "-1")),
    ("serve", "--filter-exact-max", "at least 0", ("-1",)),
    ("serve", "--time-budget", "more than 0 and at most 3600 (seconds)", ("0", "-1", HUGE, "nan", "inf")),
    ("serve", "--workers", THREADS, ("0", "-1", HUGE)),
    ("export", "--check-users", "at least 1", ("0", "-1")),
    ("export", "--threads", THREADS, ("0", "-1", HUGE)),
    ("search prepare", "--test-share", "at least 0 and less than 1", ("-1", HUGE, "nan", "inf")),
    ("search prepare", "--seed", "between 0 and 2**64 - 1 (the largest torch takes)", ("-1",)),
    ("search evaluate", "--rrf-k", "between 1 and 1000000 (the RRF constant)", ("0", "-1", HUGE)),
    ("search evaluate", "--bm25-weight", "between 0 and 1", ("-1", HUGE, "nan", "inf")),
    ("search evaluate", "--rerank-top", "at least 1", ("0", "-1")),
    ("search evaluate", "--max-length", "at least 1", ("0", "-1")),
    ("search evaluate", "--query-max-length", "at least 1", ("0", "-1")),
    ("search evaluate", "--threads", THREADS, ("0", "-1", HUGE)),
    ("search evaluate", "--encoder-threads", THREADS, ("0", "-1", HUGE)),
    ("search index", "--max-length", "at least 1", ("0", "-1")),
    ("search index", "--query-max-length", "at least 1", ("0", "-1")),
    ("search index", "--rrf-k", "between 1 and 1000000 (the RRF constant)", ("0", "-1", HUGE)),
    ("search index", "--bm25-weight", "between 0 and 1", ("-1", HUGE, "nan", "inf")),
    ("search index", "--threads", THREADS, ("0", "-1", HUGE)),
    ("search index", "--encoder-threads", THREADS, ("0", "-1", HUGE)),
    ("search query", "--k", "at least 1", ("0", "-1")),
    ("search query", "--k", "at most 10000 (twotower.config.MAX_K)", (HUGE,)),
    ("search query", "--rerank-top", "at least 1", ("0", "-1")),
    ("search query", "--rerank-top", "at most 10000 (twotower.config.MAX_K)", (HUGE,)),
    ("search query", "--threads", THREADS, ("0", "-1", HUGE)),
    ("search train", "--seed", "between 0 and 2**64 - 1 (the largest torch takes)", ("-1",)),
    ("search train", "--threads", THREADS, ("0", "-1", HUGE)),
    ("search train", "--epochs", "at least 1", ("0", "-1")),
    ("search train", "--lr", "more than 0", ("0", "-1", "nan")),
    ("search train", "--batch-size", "at least 2 (in-batch negatives need company)", ("0", "-1")),
    ("search train", "--temperature", "more than 0 and at most 10000 (above it every scaled score is ~0 and training learns nothing)", ("0", "-1", HUGE, "nan", "inf")),
    ("search train", "--max-length", "at least 1", ("0", "-1")),
    ("search train", "--query-max-length", "at least 1", ("0", "-1")),
    ("search train", "--negatives", "at least 0", ("-1",)),
    ("search train", "--mining-depth", "at least 1", ("0", "-1")),
    ("search train", "--mining-margin", "at least 0 and less than 1", ("-1", HUGE, "nan", "inf")),
    ("search train", "--valid-frac", "at least 0 and less than 1 (0: no validation)", ("-1", HUGE, "nan", "inf")),
    ("search train", "--patience", "at least 1", ("0", "-1")),
    ("search train", "--encoder-threads", THREADS, ("0", "-1", HUGE)),
    ("rerank train", "--seed", "between 0 and 2**64 - 1 (the largest torch takes)", ("-1",)),
    ("rerank train", "--threads", THREADS, ("0", "-1", HUGE)),
    ("rerank train", "--epochs", "at least 1", ("0", "-1")),
    ("rerank train", "--negatives", "at least 1", ("0", "-1")),
    ("rerank train", "--max-length", "at least 1", ("0", "-1")),
    ("rerank train", "--lr", "more than 0", ("0", "-1", "nan")),
    ("rerank train", "--batch-size", "at least 1", ("0", "-1")),
    ("rerank train", "--mining-depth", "at least 1", ("0", "-1")),
    ("rerank train", "--mining-margin", "at least 0 and less than 1", ("-1", HUGE, "nan", "inf")),
    ("rerank train", "--valid-frac", "at least 0 and less than 1 (0: no validation)", ("-1", HUGE, "nan", "inf")),
    ("rerank train", "--patience", "at least 1", ("0", "-1")),
]

#: what each command needs besides the flag; BEIR: a small BEIR folder (read before some of the flags are checked)
BASE = {
    "demo": ["demo", "--out", OUT],
    "data split": ["data", "split", "--input", "/nonexistent.csv", "--out", OUT],
    "train": ["train", "--data", "/nonexistent.csv", "--out", OUT],
    "evaluate": ["evaluate", "--run", RUN],
    "recommend": ["recommend", "--run", RUN, "--user", "u1"],
    "similar": ["similar", "--run", RUN, "--item", "i1"],
    "explain": ["explain", "--run", RUN, "--user", "u1", "--item", "i3"],
    "index build": ["index", "build", "--run", RUN],
    "serve": ["serve", "--run", RUN, "--port", "0"],
    "export": ["export", "--run", RUN, "--out", OUT],
    "search prepare": ["search", "prepare", "--passages", "/nonexistent.csv", "--pairs", "/nonexistent.csv",
                       "--out", OUT],
    "search evaluate": ["search", "evaluate", "--beir", "BEIR"],
    "search index": ["search", "index", "--beir", "BEIR", "--out", OUT],
    "search query": ["search", "query", "--index", "/nonexistent-index", "q"],
    "search train": ["search", "train", "--beir", "BEIR", "--out", OUT],
    "rerank train": ["rerank", "train", "--beir", "BEIR", "--out", OUT],
}
#: flags that apply with another one alone (a flag of another split method is refused as such)
WITH = {("data split", "--seed"): ["--method", "random"], ("data split", "--n"): ["--method", "leave_last"],
        ("search evaluate", "--rerank-top"): ["--rerank", "/nonexistent-cross-encoder"]}


@pytest.fixture(scope="module")
def beir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("ranges") / "beir"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text('{"_id": "d1", "text": "coffee"}\n')
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "coffee"}\n')
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    return folder


CASES = [(cmd, flag, value, f"{flag}: must be {bound}, got {value}") for cmd, flag, bound, values in REFUSED
         for value in values]


@pytest.mark.parametrize("cmd, flag, value, said", CASES, ids=[f"{c[0]} {c[1]} {c[2]}" for c in CASES])
def test_a_number_flag_out_of_range_is_refused_in_the_words_of_k(cmd, flag, value, said, beir, capsys, tmp_path,
                                                                 monkeypatch):
    monkeypatch.chdir(tmp_path)  # `demo` and `train` write nothing: refused first
    argv = [str(beir) if a == "BEIR" else a for a in BASE[cmd]] + WITH.get((cmd, flag), []) + [f"{flag}={value}"]
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines()[-1] == f"error: {said}", err


def _number_flags() -> set[tuple[str, str]]:
    """(command, flag) of every flag that takes a number, read off the parser."""
    found: set[tuple[str, str]] = set()

    def walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, (*path, name))
            elif action.option_strings and getattr(action.type, "__name__", "") in ("int", "float", "count_or_typed"):
                found.add((" ".join(path), max(action.option_strings, key=len)))

    walk(build_parser(), ())
    return found


def test_every_number_flag_is_in_the_survey() -> None:
    """A new number flag is added to REFUSED, with its range said in these words."""
    assert _number_flags() - {(cmd, flag) for cmd, flag, _, _ in REFUSED} == set()


def test_a_config_key_is_still_named_as_typed(capsys, tmp_path, monkeypatch) -> None:
    """The flag's words are the command line's; a `key=value` override (or a config file) names the key typed."""
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--print-config", "train.epochs=0"]) == 2
    # and says it was typed on the command line, as a file's value names the file
    assert capsys.readouterr().err.strip() == "error: command line: 'train.epochs=0': train.epochs: must be >= 1, got 0"


@pytest.mark.parametrize("value, bounds, said", [
    (0, dict(lo=1), "must be at least 1, got 0"),
    (2000, dict(lo=1, hi=1024), "must be between 1 and 1024, got 2000"),
    (0.0, dict(lo=0, hi=1, lo_open=True), "must be more than 0 and at most 1, got 0"),
    (1.0, dict(lo=0, hi=1, hi_open=True, why="0: none"), "must be at least 0 and less than 1 (0: none), got 1"),
    (0.25, dict(hi=0.1), "must be at most 0.1, got 0.25"),
    (float("nan"), dict(lo=0), "must be at least 0, got nan"),  # NaN lies in no range
    (10**20, dict(lo=0, hi=2**64 - 1, hi_said="2**64 - 1"), "must be between 0 and 2**64 - 1, got a number of 21 digits"),
])
def test_range_refusal_words(value, bounds, said) -> None:
    from twotower.pipeline.refusals import range_refusal

    assert range_refusal(value, **bounds) == said
    inside = bounds.get("lo", bounds.get("hi"))
    assert range_refusal(inside if not bounds.get("lo_open") else bounds["hi"], **bounds) is None
