"""The README's `recommend --users` line says how long each list is without --k, as --help and the code do: it
showed `--users 42,7 --json` with no word that each user gets 100 rows (a --user list is 10)."""
from __future__ import annotations

import re
from pathlib import Path

from twotower.cli.main import build_parser
from twotower.config import USERS_K
from twotower.serving.settings import ServiceSettings

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def test_the_readme_users_line_states_both_default_list_lengths():
    line = next(ln for ln in README.splitlines() if "--users 42,7 --json" in ln)
    got = re.search(r"--users lists k=(\d+) per user unless --k, --user (\d+)", line)
    assert got is not None, line
    assert (int(got[1]), int(got[2])) == (USERS_K, ServiceSettings.default_k)


def test_recommend_help_states_the_same_defaults():
    sub = build_parser()._subparsers._group_actions[0].choices["recommend"]
    text = " ".join(sub.format_help().split())
    assert f"default {ServiceSettings.default_k} for --user and --history, as the service; {USERS_K} for --users" in text
