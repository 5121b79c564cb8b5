"""The defaults README.md and docs/*.md state beside a setting are the config dataclasses' defaults.

The pages name settings in prose: "`model.item_item.rank` (64)", "`model.user.seq_positions = right` (default)",
"`train.budget_schedule`, on by default". Each such mention is read here and compared with RunConfig(), so a
changed default cannot leave a page stating the old one.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from twotower.config import RunConfig, config_to_dict

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
KEY = r"((?:data|model|loss|train|eval)(?:\.[a-z_]+)+)"
NUMBER = r"\d+(?:,\d{3})*(?:\.\d+)?"  # 64, 20,000, 0.05


def _default(dotted: str):
    node = config_to_dict(RunConfig())
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(dotted)
        node = node[part]
    return node


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def mentions() -> list[tuple[str, str, object, object]]:
    """(page, key, stated, default) of each default a page states beside a setting."""
    found = []
    for page in PAGES:
        text = " ".join(page.read_text(encoding="utf-8").split())
        # `key` (64) / `key` (20,000 items ... / `key` (0, 0.05, 0.1, ..., 1)
        for m in re.finditer(rf"`{KEY}` \(({NUMBER}(?:, {NUMBER})*)", text):
            values = [_number(v) for v in m.group(2).split(", ")]
            found.append((page.name, m.group(1), values if len(values) > 1 else values[0], _default(m.group(1))))
        # `key = value` (default
        for m in re.finditer(rf"`{KEY} ?= ?([^`|]+)` \(default", text):
            found.append((page.name, m.group(1), m.group(2).strip().strip('"'), _default(m.group(1))))
        # `key`, on by default / `key`, off by default (a section: its `enabled` switch)
        for m in re.finditer(rf"`{KEY}`,? (on|off) by default", text):
            default = _default(m.group(1))
            found.append((page.name, m.group(1), m.group(2) == "on",
                          default["enabled"] if isinstance(default, dict) else default))
    return found


def test_the_pages_state_defaults_beside_settings():
    # the parser must keep finding the README's mentions: a rewording that hides them all would pass vacuously
    assert len(mentions()) >= 10


@pytest.mark.parametrize("page, key, stated, default", mentions(), ids=lambda v: v if isinstance(v, str) else "")
def test_a_default_stated_beside_a_setting_is_the_config_s(page, key, stated, default):
    if isinstance(default, list):
        assert [float(v) for v in default] == stated, f"{page} states {key} = {stated}, the config's default is {default}"
    elif isinstance(default, (int, float)) and not isinstance(default, bool):
        assert float(default) == stated, f"{page} states {key} = {stated}, the config's default is {default}"
    else:
        assert default == stated, f"{page} states {key} = {stated!r}, the config's default is {default!r}"
