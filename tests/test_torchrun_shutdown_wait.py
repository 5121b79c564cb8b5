"""docs/distributed.md says how long torchrun waits, after a rank's train.dist_timeout_s error, for a frozen rank.

A run whose rank 1 was frozen (SIGSTOP) ended ~30 s after rank 0's `did not answer within train.dist_timeout_s`
line: rank 0 exits at once, but torchrun sends the other ranks SIGTERM, which a stopped process cannot act on, and
waits its own fixed grace before SIGKILL. The page read as if the run ended with the error line. The number the page
gives is the installed torchrun's.
"""
from __future__ import annotations

from pathlib import Path

from twotower.distributed import torchrun_kill_grace_s

DOC = (Path(__file__).resolve().parents[1] / "docs" / "distributed.md").read_text(encoding="utf-8")


def _grace_s() -> int:
    """The seconds torchrun's agent waits for its workers after SIGTERM when one of them failed (as the timeout line
    `twotower train` prints says it)."""
    grace = torchrun_kill_grace_s()
    assert grace is not None, "this torch's PContext.close has no default timeout: reword the page and the line"
    return grace


def test_the_page_gives_torchruns_wait_for_a_frozen_rank_and_how_to_end_it():
    text = " ".join(DOC.split())
    assert f"waits up to {_grace_s()} s for them before it sends SIGKILL" in text
    assert f"torchrun returns about {_grace_s()} s after the `did not answer` line" in text
    assert "`kill -9` the frozen process" in text
