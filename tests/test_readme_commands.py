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


#: how a bash line starts the launcher rather than `twotower` itself (docs/distributed.md)
_LAUNCHERS = (["torchrun"], ["python", "-m", "torch.distributed.run"])


def _bash_lines(text: str) -> list[list[str]]:
    """The words of each line of ``text``'s bash blocks, continuation lines joined, comments and leading
    ``VAR=value`` environment settings dropped."""
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            # `[--rerank DIR]` is usage notation for an optional flag: the command with it must parse
            words = shlex.split(re.sub(r"\[(--[^\]]+)\]", r"\1", line), comments=True)
            while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):
                words = words[1:]
            lines.append(words)
    return lines


def _launched(words: list[str]) -> tuple[list[str], list[str]] | None:
    """``(launcher options, twotower arguments)`` of a ``torchrun ... -m twotower ...`` line; None for others."""
    for launcher in _LAUNCHERS:
        n = len(launcher)
        if words[:n] == launcher:
            at = next((i for i in range(n, len(words) - 1) if words[i:i + 2] == ["-m", "twotower"]), None)
            return None if at is None else (words[n:at], words[at + 2:])
    return None


def _bash_commands(text: str = README) -> list[str]:
    """The ``twotower ...`` commands of ``text``'s bash blocks, also those run under torchrun (``-m twotower``)."""
    commands = []
    for words in _bash_lines(text):
        launched = _launched(words)
        if words[:1] == ["twotower"] or launched is not None:
            commands.append(shlex.join(words[1:] if launched is None else launched[1]))
    return commands


def _launcher_options(text: str) -> list[list[str]]:
    """The launcher's own options of each ``torchrun ... -m twotower`` line of ``text``'s bash blocks."""
    return [launched[0] for launched in map(_launched, _bash_lines(text)) if launched is not None]


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
        while words and words[0].startswith("-"):  # the global options before the command (`-q train ...`)
            words = words[1:]
        name = " ".join(words[:2]) if " ".join(words[:2]) in commands else words[0]
        if name in commands:
            found.append((name, [w.split("=")[0] for w in words if re.fullmatch(r"--[a-z][a-z0-9-]*(=.*)?", w)]))
    return found


def _inline_commands(text: str = README) -> list[tuple[str, list[str]]]:
    """``twotower SUB ... --flag`` spans quoted in the prose."""
    return _flags_by_command(re.findall(r"`twotower ([^`]+)`", text))


def test_the_readme_shows_the_quick_start_and_leave_one_out_commands():
    commands = _bash_commands()
    assert len(commands) >= 20
    assert any(c.startswith("serve --run runs/loo --history-from") for c in commands)


def _unparsed(command: str) -> list[str]:
    """What ``command`` leaves unread, as ``twotower.cli.main.main`` reads it: dotted overrides may sit between
    options (exits, status 2, on a bad value)."""
    args, extra = build_parser().parse_known_args(shlex.split(command))
    # an override without "=" (`<same overrides>`) is taken as a positional override and refused only later
    loose = [o for o in getattr(args, "overrides", None) or [] if "=" not in o]
    return loose + [e for e in extra if e.startswith("-") or "=" not in e or not hasattr(args, "overrides")]


@pytest.mark.parametrize("command", _bash_commands())
def test_each_readme_command_parses(command):
    assert _unparsed(command) == []


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
