"""The text encoder's progress lines off a terminal: texts done, rate and ETA."""
from __future__ import annotations

import logging
import re

import numpy as np
import pytest

from twotower.text.encoder import EncoderSettings, TextEncoder


class _FakeST:
    """A stand-in sentence-transformers model: 4-dim vectors, no weights."""

    max_seq_length = 128

    def get_sentence_embedding_dimension(self) -> int:
        return 4

    def encode(self, batch, **_: object) -> np.ndarray:
        return np.ones((len(batch), 4), dtype=np.float32) / 2.0


def test_progress_line_gives_rate_and_eta(caplog: pytest.LogCaptureFixture) -> None:
    enc = TextEncoder(_FakeST(), model_id="fake@1", settings=EncoderSettings(progress_seconds=1e-9))
    with caplog.at_level(logging.INFO, logger="twotower.text.encoder"):
        enc.encode([f"text {i}" for i in range(10)], batch_size=4)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("encoding with")]
    assert lines, caplog.text
    first = re.fullmatch(r"encoding with torch: 4 / 10 texts, [\d.]+ texts/s, ETA \d+s", lines[0])
    assert first, lines[0]
    assert lines[-1].startswith("encoding with torch: 10 / 10 texts") and lines[-1].endswith("ETA 0s")
