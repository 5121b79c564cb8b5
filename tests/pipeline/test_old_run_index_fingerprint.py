"""An index built by the version that trained a run still fits that run after an upgrade.

The fingerprint an index is checked against hashed the model settings as read with today's defaults: every
setting added since (model.item_item, model.user.extra_pools, dropout_rng) changed an older run's fingerprint,
and `recommend`, `similar`, `serve` and `index info` refused its index as "retrained since the index was built"
(MovieLens-100K runs of two earlier commits, both refused; their weights unchanged).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from tests.explain.explain_tiny_run import train_tiny_run
from twotower.pipeline.artifacts import TrainedRun, _old_fingerprint, write_manifest


def _fingerprint_as_saved(run: TrainedRun, model_settings: dict[str, Any]) -> str:
    """The fingerprint the version that saved the run gave it: its model settings as config.json records them."""
    h = hashlib.sha256()
    h.update(json.dumps(model_settings, sort_keys=True).encode())
    for name, t in sorted(run.model.item_tower.state_dict().items()):
        h.update(name.encode())
        h.update(t.detach().contiguous().cpu().numpy().tobytes())
    return h.hexdigest()[:32]


def _as_an_earlier_version_saved_it(out: Path) -> dict[str, Any]:
    cfg = json.loads((out / "config.json").read_text())
    model = cfg["model"]
    del model["item_item"]  # settings that came later, and that the run was trained without
    for tower in ("user", "item"):
        model[tower].pop("dropout_rng", None)
    (out / "config.json").write_text(json.dumps(cfg))
    write_manifest(out)
    return model


def test_an_older_runs_fingerprint_is_the_one_its_version_gave_its_index(tmp_path) -> None:
    out = train_tiny_run(tmp_path / "old", extra=("model.item_item.enabled=false",))
    recorded = _as_an_earlier_version_saved_it(out)
    run = TrainedRun.load(out)
    assert run.fingerprint() == _fingerprint_as_saved(run, recorded)
    assert _old_fingerprint(out) == run.fingerprint()  # what a resume matches its derived folders by


def test_a_run_saved_today_keeps_its_fingerprint(tmp_path) -> None:
    out = train_tiny_run(tmp_path / "new")
    run = TrainedRun.load(out)
    from twotower.config import config_to_dict

    assert run.fingerprint() == _fingerprint_as_saved(run, config_to_dict(run.config.model))


def test_an_older_runs_index_serves_recommendations_without_a_rebuild(tmp_path) -> None:
    from twotower.cli.main import main

    out = train_tiny_run(tmp_path / "idx", extra=("model.item_item.enabled=false",))
    recorded = _as_an_earlier_version_saved_it(out)
    assert main(["index", "build", "--run", str(out), "--index", "exact"]) == 0
    meta = json.loads((out / "index" / "meta.json").read_text())
    assert meta["model_fingerprint"] == _fingerprint_as_saved(TrainedRun.load(out), recorded)
    assert main(["index", "info", "--run", str(out)]) == 0
