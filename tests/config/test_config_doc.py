"""docs/config.md is generated from the config dataclasses and says what every setting means."""
from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest

from twotower import config as C
from twotower.cli.main import build_parser
from twotower.config_doc import DOCUMENTED, field_meanings, missing_meanings, reference

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "config.md"


def test_docs_config_md_is_the_generated_reference():
    assert PAGE.read_text(encoding="utf-8") == reference(), (
        "docs/config.md is stale: regenerate it with `PYTHONPATH=src python -m twotower.config_doc > docs/config.md`")


def test_every_setting_has_a_meaning():
    assert missing_meanings() == [], "give each of these a `#:` comment in src/twotower/config.py"


def test_the_page_lists_every_run_setting_with_its_default():
    text = PAGE.read_text(encoding="utf-8")
    for f in dataclasses.fields(C.TrainConfig):
        assert f"| `train.{f.name}` | `" in text
    assert "| `train.grad_clip` | `5.0` | largest gradient norm" in text
    assert "| `data.leave_n` | `1` |" in text
    # the towers' defaults differ (the user tower reads a history): one column each
    assert "| `history` | `\"recency\"` | `\"none\"` |" in text


def test_a_meaning_is_read_from_its_hash_colon_comment_only():
    meanings = field_meanings(C.LossConfig)
    assert meanings["sampled_negatives"] == "sampled: negatives per batch, shared by its queries, 1 to 10,000,000"
    # a plain `#` comment is a note on the code, not the setting's meaning
    assert "MovieLens" not in field_meanings(C.ItemItemConfig)["enabled"]


def _options(argv: list[str]) -> set[str]:
    parser = build_parser()
    for name in argv:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return {o for a in parser._actions for o in a.option_strings}


@pytest.mark.parametrize("cls, argv", [(C.PrepareConfig, ["search", "prepare"]), (C.FinetuneConfig, ["search", "train"]),
                                       (C.RerankTrainConfig, ["rerank", "train"])])
def test_the_flags_a_meaning_names_exist(cls, argv):
    import re

    assert cls in {c for c, _ in DOCUMENTED}
    named = {m for text in field_meanings(cls).values() for m in re.findall(r"--[a-z][a-z-]*", text)}
    assert named and named <= _options(argv)


def test_train_help_links_the_reference(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--help"])
    assert "docs/config.md" in capsys.readouterr().out
