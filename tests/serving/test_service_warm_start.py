"""The service does its one-off work at start-up, not in the first request, and says what the start-up cost.

A first POST /recommend took 186-244 ms against 5-8 ms for the next ones (a 42,000-item catalogue): exact search
computed the catalogue's largest vector norm on its first call. The precompute of every known user's vector (2.9 s
of a 4.2 s start for 30,000 users of a transformer tower) was said nowhere.
"""
from __future__ import annotations

import logging

from twotower.index import ExactIndex
from twotower.pipeline.artifacts import TrainedRun
from twotower.pipeline.recommend import open_run_index
from twotower.serving import RecommenderService
from twotower.serving.settings import ServiceSettings


def test_the_index_is_warm_before_the_first_request(run_dir):
    run = TrainedRun.load(run_dir)
    index, _ = open_run_index(run, exact=True)
    assert isinstance(index, ExactIndex) and index._max_norm is None
    RecommenderService(run, index)
    assert index._max_norm is not None  # computed at start-up: the first request finds it


def test_start_up_says_the_precompute_and_its_time(run_dir, caplog):
    run = TrainedRun.load(run_dir)
    index, _ = open_run_index(run, exact=True)
    with caplog.at_level(logging.INFO, logger="twotower.serving.service"):
        service = RecommenderService(run, index)
    n = len(run.user_vocab)
    assert service.precompute_note().startswith(f"; {n:,} users' vectors precomputed in ")
    assert service.precompute_note() in caplog.text
    lazy = RecommenderService(run, index, settings=ServiceSettings(precompute_users_max=0))
    assert lazy.user_vectors is None and lazy.precompute_note() == ""


def test_the_explainer_is_warm_before_the_first_explanation(run_dir, monkeypatch):
    """A first POST /explain took 246 ms against 6 ms for the next ones on the demo run (the explainer imported and
    its lookups built), and was a 503 under a 0.1 s budget."""
    import twotower.explain.explainer as explainer

    calls = []
    real = explainer.explain_recommendation
    monkeypatch.setattr(explainer, "explain_recommendation", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setattr("twotower.explain.explain_recommendation", explainer.explain_recommendation)
    run = TrainedRun.load(run_dir)
    index, _ = open_run_index(run, exact=True)
    RecommenderService(run, index)
    assert calls == [1]  # one explanation at start-up
