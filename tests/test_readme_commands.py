"""Every ``twotower`` command the README shows parses with the CLI as it stands: a flag renamed or dropped in the code
(or misspelt in the README) fails here, not in a newcomer's copy-paste (found walking the README's commands)."""
from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

from twotower.cli.main import build_parser

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def _bash_commands() -> list[str]:
    """The ``twotower ...`` lines of the README's bash blocks, continuation lines joined, comments dropped."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", README, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            # `[--rerank DIR]` is usage notation for an optional flag: the command with it must parse
            words = shlex.split(re.sub(r"\[(--[^\]]+)\]", r"\1", line), comments=True)
            if words[:1] == ["twotower"]:
                commands.append(shlex.join(words[1:]))
    return commands


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Each command, nested ones by their full name (``index build``), to its parser."""
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found[name] = sub
                found.update({f"{name} {inner}": p for inner, p in _subparsers(sub).items()})
    return found


def _flags_by_command(spans: list[str]) -> list[tuple[str, list[str]]]:
    """Each ``SUB ... --flag`` span's command (``index build`` for nested ones) and the flags it gives."""
    commands = _subparsers(build_parser())
    found = []
    for span in spans:
        words = span.split()
        name = " ".join(words[:2]) if " ".join(words[:2]) in commands else words[0]
        if name in commands:
            found.append((name, [w.split("=")[0] for w in words if re.fullmatch(r"--[a-z][a-z0-9-]*(=.*)?", w)]))
    return found


def _inline_commands() -> list[tuple[str, list[str]]]:
    """``twotower SUB ... --flag`` spans quoted in the prose."""
    return _flags_by_command(re.findall(r"`twotower ([^`]+)`", README))


def test_the_readme_shows_the_quick_start_and_leave_one_out_commands():
    commands = _bash_commands()
    assert len(commands) >= 20
    assert any(c.startswith("serve --run runs/loo --history-from") for c in commands)


@pytest.mark.parametrize("command", _bash_commands())
def test_each_readme_command_parses(command):
    """As ``twotower.cli.main.main`` reads them: dotted overrides may sit between options."""
    args, extra = build_parser().parse_known_args(shlex.split(command))  # exits (status 2) on a bad value
    assert [e for e in extra if e.startswith("-") or "=" not in e or not hasattr(args, "overrides")] == []


def _unknown_flags(used: list[tuple[str, list[str]]]) -> list[tuple[str, str]]:
    """Flags not spelt as the command defines them: argparse takes a prefix (``--target-recal``), so a flag renamed
    to a longer name would still parse the README's old one."""
    commands = _subparsers(build_parser())
    return [(name, flag) for name, flags in used for flag in flags
            if flag not in commands[name]._option_string_actions and flag != "--no-verify"]


def test_each_flag_of_the_readme_commands_is_spelt_in_full():
    assert _unknown_flags(_flags_by_command(_bash_commands())) == []


def test_each_flag_quoted_in_the_prose_exists_for_its_command():
    assert _unknown_flags(_inline_commands()) == []
