"""pipeline/run.py: settings that would do nothing are said out loud."""
from __future__ import annotations

from types import SimpleNamespace

import pandas as pd

from twotower.config import load_config
from twotower.pipeline.run import encode_item_texts


def test_item_text_without_text_embeddings_warns_that_it_has_no_effect(caplog):
    cfg = load_config(overrides=["data.item_text=[\"overview\"]"])
    prep = SimpleNamespace(item_meta=pd.DataFrame({"overview": ["a film"]}), sources=SimpleNamespace(item_spec=None))
    with caplog.at_level("WARNING", logger="twotower.pipeline.run"):
        assert encode_item_texts(cfg, prep) is None  # nothing encoded, as before
    text = " ".join(r.getMessage() for r in caplog.records)
    assert "data.item_text=overview has no effect" in text and "model.item.text_embeddings=true" in text


def test_no_warning_without_item_text(caplog):
    with caplog.at_level("WARNING", logger="twotower.pipeline.run"):
        assert encode_item_texts(load_config(), SimpleNamespace(item_meta=None, sources=None)) is None
    assert not caplog.records
