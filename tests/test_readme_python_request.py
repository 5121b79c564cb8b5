"""Where the README points Python callers to per-request filters and exclusions, the names import.

A README walkthrough: the filters table's Python column named a bare `RecRequest` beside `tt.recommend`, but
`tt.RecRequest` is an AttributeError (it lives in `twotower.serving`), and the per-request exclusions paragraph did
not say that RecRequest takes them as `exclude_items`.
"""
from __future__ import annotations

import importlib
import re
from dataclasses import fields
from pathlib import Path

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def _resolve(dotted: str):
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def test_every_recrequest_the_readme_names_imports_and_takes_filters_and_exclusions():
    named = re.findall(r"`([\w.]*RecRequest)`", README)
    assert named and all("." in n for n in named), named  # a bare `RecRequest` says nowhere where it is
    for dotted in set(named):
        cls = _resolve(dotted)
        assert {"filters", "exclude_items"} <= {f.name for f in fields(cls)}


def test_the_per_request_exclusions_paragraph_names_recrequest_s_field():
    i = README.index("**Per-request exclusions.**")
    paragraph = README[i:README.index("\n\n", i)]
    assert "`exclude_items=" in paragraph and "RecRequest`" in paragraph


def test_the_exclusion_bound_is_said_to_be_the_http_service_s():
    """`serve --max-exclude` bounds the service's requests (HTTP's schema, RecommenderService's own check); on
    ML-100K `recommend --exclude-items` and tt.recommend(exclude=...) with 1,000 ids took them, where the README
    read as if every surface did."""
    i = README.index("**Per-request exclusions.**")
    paragraph = README[i:README.index("\n\n", i)]
    flat = " ".join(paragraph.split())
    assert "An HTTP request, and one a `RecommenderService` answers from Python, lists at most `serve --max-exclude`" in flat
    assert "`tt.recommend`/`tt.similar` take any number" in flat
