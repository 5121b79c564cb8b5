"""The Python search calls that write a folder, each stubbed at its first step of work (tests of their out checks
and writer locks: the check must come before any work)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import twotower.search.finetune as finetune
import twotower.search.prepare as prepare
import twotower.search.rerank as rerank
from twotower.search import SearchIndex, finetune_bi_encoder, train_cross_encoder
from twotower.search.prepare import prepare_beir


def writer_calls(tmp_path, monkeypatch, work: Callable[..., Any],  # noqa: ANN001
                 **kwargs: Any) -> dict[str, Callable[[Any], Any]]:
    """Each writing call by name, taking its output folder; ``work`` replaces the first step of each body;
    ``kwargs`` (``force=True``) are passed to each call."""

    class _NoIndex:
        def __getattr__(self, name: str):  # noqa: ANN204
            work()

    monkeypatch.setattr(finetune, "encoder_settings", work)  # the first step of each body
    monkeypatch.setattr(rerank, "_with_bm25", work)
    monkeypatch.setattr(prepare, "_read_passages", work)
    docs = ["a", "b"]
    return {
        "finetune_bi_encoder": lambda out: finetune_bi_encoder(["q1", "q2"], [0, 1], docs, out, threads=1, **kwargs),
        "train_cross_encoder": lambda out: train_cross_encoder(["q1", "q2"], [0, 1], [np.array([1]), np.array([0])],
                                                               docs, out, **kwargs),
        "SearchIndex.save": lambda out: SearchIndex.save(_NoIndex(), out, **kwargs),
        "prepare_beir": lambda out: prepare_beir(tmp_path / "p.csv", tmp_path / "q.csv", out, **kwargs),
    }
