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


def _help_of(*path: str) -> dict[str, str]:
    parser: argparse.ArgumentParser = build_parser()
    for name in path:
        parser = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[name]
    return {o: a.help or "" for a in parser._actions for o in a.option_strings}


def test_flags_refused_together_say_so_in_their_help():
    """serve --exact with --index, and index build --nprobe with --ef-search, are refused at run time
    (ConfigError "use one or the other"); their help did not say it. --no-max-wait with --max-wait-ms is refused too."""
    serve, build = _help_of("serve"), _help_of("index", "build")
    assert serve["--exact"].endswith("not with --index")
    assert serve["--no-max-wait"].endswith("not with --max-wait-ms")
    assert serve["--max-wait-ms"].endswith("not with --no-max-wait")
    assert build["--nprobe"].endswith("not with --ef-search") and build["--ef-search"].endswith("not with --nprobe")
