from __future__ import annotations

import numpy as np
import pytest

from twotower.results import PAD_ID, Results
from twotower.search.rerank import CrossEncoderReranker

from tests.extras import needs_text


class OverlapModel:
    """Test double for a CrossEncoder: score = number of shared words."""

    def predict(self, pairs, **kwargs):
        return np.array([len(set(q.split()) & set(d.split())) for q, d in pairs], dtype=np.float32)


DOCS = ["red apple", "green apple pie", "blue sky", "apple pie with red cream"]


def test_reranker_reorders_the_head_and_keeps_the_tail():
    rr = CrossEncoderReranker.from_model(OverlapModel())
    first = Results(np.array([[2, 0, 1, 3]]), np.array([[4.0, 3.0, 2.0, 1.0]], dtype=np.float32))
    out = rr.rerank(["red apple pie"], first, DOCS, top_n=3)
    # head [2, 0, 1] scored 0, 2 ("red","apple"), 2 ("apple","pie") -> 0 and 1 tie at 2, smaller id first
    assert out.ids[0].tolist() == [0, 1, 2, 3]
    assert out.scores[0, :3].tolist() == [2.0, 2.0, 0.0]
    assert out.scores[0, 3] < out.scores[0, 2]  # tail kept below the reranked head
    assert rr.last_pairs == 3


def test_reranker_skips_padding():
    rr = CrossEncoderReranker.from_model(OverlapModel())
    first = Results(np.array([[2, PAD_ID]]), np.array([[1.0, -np.inf]], dtype=np.float32))
    out = rr.rerank(["blue sky"], first, DOCS, top_n=5)
    assert out.ids[0].tolist() == [2, PAD_ID] and rr.last_pairs == 1


@needs_text
def test_train_cross_encoder_runs_on_the_training_loop_with_the_listwise_loss(tmp_path):
    """Head-only training (every transformer layer frozen) on 4 groups: the loss falls, frozen weights stay."""
    import json

    import torch

    from twotower.search.rerank import NO_LEARNING_SHARE, RerankTrainConfig, train_cross_encoder

    queries = ["red apple", "blue sky", "apple pie", "red cream"]
    negatives = [np.array([2]), np.array([0]), np.array([2]), np.array([2])]
    cfg = RerankTrainConfig(epochs=4, groups_per_step=2, negatives_per_query=1, max_length=16, freeze_layers=6,
                            head_lr=5e-2, warmup_frac=0.0, seed=0)
    rr = train_cross_encoder(queries, [0, 2, 1, 3], negatives, DOCS, tmp_path / "ce", config=cfg, show_progress=False)
    meta = json.loads((tmp_path / "ce" / "twotower_cross_encoder.json").read_text())
    assert meta["steps"] == 4 * 2 and meta["config"]["temperature"] == 1.0
    assert meta["final_loss"] < meta["first_loss"]
    # the mean loss of the last steps `rerank train` reports, beside a constant scorer's on the same groups (1 positive + 1 negative)
    tail = meta["tail"]
    assert tail["steps"] == 8 and tail["group_sizes"] == [2, 2]
    assert tail["chance_loss"] == pytest.approx(np.log(2))
    assert tail["loss"] < tail["chance_loss"] * (1 - NO_LEARNING_SHARE)  # this one learned: no warning
    s = rr.score([("red apple", DOCS[0]), ("red apple", DOCS[2])])
    assert s.shape == (2,) and np.isfinite(s).all()
    # loaded again later (search evaluate --rerank, search query, the service), it reads pairs at the 16 word
    # pieces it was trained on, not at the library default of 256
    again = CrossEncoderReranker(tmp_path / "ce")
    assert again.max_length == 16 and again.model.max_length == 16
    assert CrossEncoderReranker(tmp_path / "ce", max_length=24).model.max_length == 24
    # and says how many pairs it read only in part (search evaluate --rerank reports it)
    cut = again.truncation([("red apple", "apple " * 40), ("red apple", "apple")])
    assert cut["pairs"] == 2 and cut["cut"] == 1 and cut["max_length"] == 16 and cut["longest"] > 40
    first = Results(np.array([[0, 1]]), np.array([[1.0, 0.5]], dtype=np.float32))
    again.rerank(["red apple"], first, ["apple " * 40, "apple"], top_n=2, count_cut=True)
    assert again.last_truncation == {**cut, "longest": again.last_truncation["longest"]}
    from sentence_transformers import CrossEncoder

    from twotower.text.encoder import default_model_path

    base = CrossEncoder(str(default_model_path()), num_labels=1)
    frozen = "bert.embeddings.word_embeddings.weight"
    got = dict(rr.model.model.named_parameters())[frozen]
    assert torch.equal(got, dict(base.model.named_parameters())[frozen])


@needs_text
def test_cross_encoder_training_and_loading_write_no_progress_bars_to_a_redirected_log(tmp_path):
    """`rerank train` and `search evaluate --retriever bm25 --rerank CE` (where the cross-encoder is the first model
    the process loads) wrote Hugging Face's "Loading weights" / "Writing model shards" tqdm bars, carriage returns
    and all, into a log file; the text encoder had them turned off, the cross-encoder did not."""
    import subprocess
    import sys

    script = (
        "import numpy as np\n"
        "from twotower.search.rerank import RerankTrainConfig, train_cross_encoder\n"
        "cfg = RerankTrainConfig(epochs=1, groups_per_step=2, negatives_per_query=1, max_length=16, freeze_layers=6)\n"
        f"train_cross_encoder(['red apple', 'blue sky'], [0, 2], [np.array([2]), np.array([0])], {DOCS!r}, "
        f"{str(tmp_path / 'ce')!r}, config=cfg, show_progress=False)\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert (tmp_path / "ce" / "twotower_cross_encoder.json").is_file()
    assert "\r" not in run.stderr and "it/s]" not in run.stderr, run.stderr[-2000:]


def test_reranking_with_progress_logs_periodic_lines_not_a_tqdm_bar(monkeypatch, caplog):
    """`search evaluate --rerank` scored every (query, candidate) pair in one silent call (76 queries x 20 pairs: minutes
    with no line in a log), and show_progress=True (bench/scifact.py) meant sentence-transformers' tqdm bar."""
    from twotower.text.encoder import EncoderSettings

    class Recording(OverlapModel):
        bars: list = []

        def predict(self, pairs, **kwargs):
            self.bars.append(kwargs.get("show_progress_bar"))
            return super().predict(pairs)

    monkeypatch.setattr(EncoderSettings, "progress_seconds", 1e-9)  # a line after every batch
    rr = CrossEncoderReranker.from_model(Recording(), batch_size=2)
    pairs = [("red apple", d) for d in DOCS] + [("blue sky", DOCS[2])]
    with caplog.at_level("INFO", logger="twotower.search.rerank"):
        s = rr.score(pairs, show_progress=True)
    assert s.tolist() == [2.0, 1.0, 0.0, 2.0, 2.0]
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("reranking: ")]
    assert [line.split(",")[0] for line in lines] == ["reranking: 2 / 5 pairs", "reranking: 4 / 5 pairs",
                                                      "reranking: 5 / 5 pairs"]
    assert Recording.bars == [False, False, False]


@needs_text
def test_train_cross_encoder_refuses_a_max_length_past_the_models_positions(tmp_path):
    # MiniLM reads 512 word pieces: --max-length 1000 was a tensor-size RuntimeError at the first step
    from twotower.errors import ConfigError
    from twotower.search.rerank import RerankTrainConfig, train_cross_encoder

    cfg = RerankTrainConfig(epochs=1, groups_per_step=2, negatives_per_query=1, max_length=1000)
    long_doc = " ".join(["apple"] * 1200)  # longer than 512 word pieces, so the cut would not have hidden it
    with pytest.raises(ConfigError, match=r"max_length 1000 is more word pieces than the model all-MiniLM-L6-v2 "
                                          r"can read \(512\); give at most 512"):
        train_cross_encoder(["red apple", "blue sky"], [0, 1], [np.array([1]), np.array([0])], [long_doc, "blue sky"],
                            tmp_path / "ce", config=cfg, show_progress=False)
    assert not (tmp_path / "ce").exists()


@needs_text
def test_pairs_left_without_a_hard_negative_are_counted_in_the_training_log(tmp_path, caplog):
    """`rerank train` on a prepared SciFact subset logged "868 groups x (1 + 1) per epoch" for 915 training pairs:
    the 47 that mining left without a negative were skipped without a word (only the marker's groups_used said so)."""
    from twotower.search.rerank import RerankTrainConfig, train_cross_encoder

    cfg = RerankTrainConfig(epochs=1, groups_per_step=2, negatives_per_query=1, max_length=16, freeze_layers=6,
                            seed=0)
    negatives = [np.array([2]), np.array([], dtype=np.int64), np.array([0])]
    with caplog.at_level("INFO", logger="twotower.search.rerank"):
        train_cross_encoder(["red apple", "blue sky", "apple pie"], [0, 2, 1], negatives, DOCS, tmp_path / "ce",
                            config=cfg, show_progress=False)
    assert "2 groups of 3 pairs (1 with no hard negative left out) x (1 + 1) per epoch" in caplog.text
