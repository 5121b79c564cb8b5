"""An earlier run that cannot be removed after the swap is said, naming where it was left.

Review: retraining over a run whose index/ was read-only left the old run hidden in `.NAME.staging-*` for good,
while the warning said the new run had replaced it; the next `train --out` did not remove it either.
"""
from __future__ import annotations

import logging

import twotower.pipeline.staging as staging
from twotower.pipeline.staging import swap_in


def test_an_earlier_run_left_behind_after_the_swap_is_named(tmp_path, monkeypatch, caplog):
    out, stage = tmp_path / "c", tmp_path / ".c.staging-1"
    for folder, text in ((out, "old"), (stage, "new")):
        (folder / "index").mkdir(parents=True)
        (folder / "run.json").write_text(text)
    # a read-only index/ inside: shutil.rmtree(ignore_errors=True) leaves the folder without a word (root ignores
    # chmod, so the failed removal is faked)
    monkeypatch.setattr(staging.shutil, "rmtree", lambda path, ignore_errors=False: None)
    with caplog.at_level(logging.WARNING, logger="twotower.pipeline.staging"):
        swap_in(stage, out)
    assert (out / "run.json").read_text() == "new"
    left = next(p for p in (stage, *tmp_path.glob(".c.old*")) if p.exists())
    assert [r.getMessage() for r in caplog.records] == [
        f"could not remove all of {left}, the earlier run's files the new run replaced (a folder in it is "
        f"read-only?); remove it yourself: rm -r {left}"]
