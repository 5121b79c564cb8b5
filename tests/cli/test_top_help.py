"""`twotower --help`: the commands in the order a newcomer uses them, and example lines that parse."""
from __future__ import annotations

import argparse
import shlex

from twotower.cli.main import EXAMPLES, build_parser


def _commands() -> list[str]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return list(sub.choices)


def test_commands_are_listed_from_data_to_serving_then_text_search():
    order = _commands()
    # explain sat between rerank and export, after the text-search commands, far from recommend / similar
    assert order[:10] == ["demo", "data", "train", "evaluate", "recommend", "similar", "explain", "index", "serve",
                          "export"]
    assert order.index("search") > order.index("export")


def test_the_help_shows_examples_and_each_one_parses():
    text = build_parser().format_help()
    assert "examples:\n  twotower demo" in text  # kept as written, not re-wrapped into one paragraph
    lines = EXAMPLES.replace("\\\n", " ").splitlines()
    examples = [ln.split("#")[0].split()[1:] for ln in lines if ln.strip().startswith("twotower ")]
    assert [e[0] for e in examples] == ["demo", "data", "train", "evaluate", "recommend", "index", "serve"]
    for argv in examples:
        build_parser().parse_args(shlex.split(" ".join(argv)))  # SystemExit on a flag that does not exist
    assert all(len(ln) <= 80 for ln in EXAMPLES.splitlines())
