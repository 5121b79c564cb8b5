"""Every command docs/distributed.md shows parses as it stands, with each flag spelt in full: the ``twotower``
arguments (also those run under ``torchrun`` / ``python -m torch.distributed.run``) with the CLI's parser, the
launcher's own options with torchrun's. The README's check (tests/test_readme_commands.py) over this page."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_readme_commands import (
    _bash_commands,
    _flags_by_command,
    _inline_commands,
    _launcher_options,
    _unknown_flags,
    _unparsed,
)

DOC = (Path(__file__).resolve().parents[1] / "docs" / "distributed.md").read_text(encoding="utf-8")


def test_the_page_shows_the_one_machine_several_machines_and_index_commands():
    commands = _bash_commands(DOC)
    assert len(commands) >= 8 and len(_launcher_options(DOC)) >= 6
    assert any(c.startswith("index build --run-dir") for c in commands)
    assert any("--resume" in c for c in commands)


@pytest.mark.parametrize("command", _bash_commands(DOC))
def test_each_twotower_command_of_the_page_parses(command):
    # the resume line said `<same overrides>`, which no shell passes on as overrides
    assert _unparsed(command) == []


def test_each_twotower_flag_of_the_page_is_spelt_in_full():
    assert _unknown_flags(_flags_by_command(_bash_commands(DOC))) == []
    assert _unknown_flags(_inline_commands(DOC)) == []


@pytest.mark.parametrize("options", _launcher_options(DOC), ids=" ".join)
def test_each_torchrun_option_of_the_page_parses_and_is_spelt_in_full(options):
    from torch.distributed.run import get_args_parser

    parser = get_args_parser()
    args, extra = parser.parse_known_args([*options, "-m", "twotower"])  # exits (status 2) on a bad value
    assert extra == [] and args.module and args.training_script == "twotower"
    # torchrun takes prefixes too (`--run` for its `--run-path`, docs/distributed.md says), so a renamed flag would
    # still parse the page's old spelling
    assert [w for w in options if w.startswith("--") and w not in parser._option_string_actions] == []
