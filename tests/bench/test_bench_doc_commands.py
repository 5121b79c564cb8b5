"""Every ``python bench/X.py ...`` command that the README, every docs/*.md page (docs/reliability.md's
overload and soak commands too) and the scripts' own docstrings (their ``--help``) write parses with the script's
argparse as it stands: a flag renamed or dropped in a script (or misspelt in the docs) fails here, not in a reader's copy-paste. Each script's ``main`` runs up to its ``parse_args`` and is
stopped there, so no benchmark work starts. CI runs none of the benchmarks, so nothing else checks these commands."""
from __future__ import annotations

import argparse
import ast
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))

#: placeholders the docs write for a value the reader picks, and a value of the same kind
PLACEHOLDERS = {"S": "42", "E": "3", "N": "10", "W": "2", "FILE": "data.txt", "DIR": "runs/x", "SETTING": "train.lr=0.001"}


def _spans(text: str) -> list[str]:
    """The text of each fenced bash block line (continuations joined) and of each inline code span (which may
    wrap over lines of a paragraph)."""
    spans: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        spans += block.replace("\\\n", " ").splitlines()
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    spans += [s.replace("\n", " ") for s in re.findall(r"`([^`]+)`", prose)]
    return spans


def bench_commands(text: str) -> list[tuple[str, list[str]]]:
    """``(script, arguments)`` of each ``python bench/X.py ...`` command in ``text``, up to a comment, ``;``, ``&&``
    or the next command; usage notation ``[--flag VALUE]`` is kept without its brackets, placeholders get a value."""
    found = []
    for span in _spans(text):
        for m in re.finditer(r"python bench/(\w+)\.py((?:(?!python |[;|&#]).)*)", span):
            args = re.sub(r"\[([^\]]+)\]", r"\1", m.group(2))
            words = [PLACEHOLDERS.get(w, w) for w in shlex.split(args.replace("...", "").replace("…", ""))]
            found.append((m.group(1), words))
    return found


def _docstring_commands(script: Path) -> list[tuple[str, list[str]]]:
    """The commands of a script's module docstring, one a line (``\\`` continuations joined)."""
    doc = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8"))) or ""
    return bench_commands("".join(f"```bash\n{line}\n```\n" for line in doc.replace("\\\n", " ").splitlines()))


SCRIPTS = sorted(p for p in (ROOT / "bench").glob("*.py") if not p.stem.startswith("_"))
COMMANDS = sorted({(name, tuple(words)) for doc in DOCS for name, words in bench_commands(doc.read_text(encoding="utf-8"))}
                  | {(name, tuple(words)) for script in SCRIPTS for name, words in _docstring_commands(script)})


class _Parsed(Exception):
    def __init__(self, namespace: argparse.Namespace) -> None:
        self.namespace = namespace


def test_the_docs_name_every_benchmark() -> None:
    """The extraction finds the commands (an empty list would make the parse test pass by testing nothing)."""
    assert {p.stem for p in SCRIPTS} <= {name for name, _ in COMMANDS}
    assert ("ml1m", ("--rows", "transformer-full", "--seeds", "0,1,2", "--threads", "2")) in COMMANDS  # a wrapped span


@pytest.mark.parametrize("name, words", COMMANDS, ids=[" ".join((n, *w)) for n, w in COMMANDS])
def test_documented_bench_command_parses(bench: Any, monkeypatch: pytest.MonkeyPatch, name: str,
                                         words: tuple[str, ...]) -> None:
    module = bench(name)
    real = argparse.ArgumentParser.parse_args

    def parse_then_stop(self: argparse.ArgumentParser, args: Any = None, namespace: Any = None) -> argparse.Namespace:
        raise _Parsed(real(self, args, namespace))

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)
    monkeypatch.setattr(sys, "argv", [f"{name}.py", *words])
    with pytest.raises(_Parsed):  # a SystemExit here is argparse refusing the documented command
        module.main()
