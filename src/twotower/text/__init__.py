"""Text encoders (sentence-transformers) and a frozen embedding cache."""
from twotower.text.cache import EmbeddingCache, cached_encode, text_key
from twotower.text.encoder import (
    BACKEND_CHOICES,
    BACKENDS,
    RERANK_BACKEND_CHOICES,
    EncoderSettings,
    RerankSettings,
    TextEncoder,
    default_model_path,
    load_text_encoder,
    resolve_backend,
    weights_fingerprint,
)

__all__ = [
    "TextEncoder",
    "EncoderSettings",
    "BACKENDS",
    "BACKEND_CHOICES",
    "RerankSettings",
    "RERANK_BACKEND_CHOICES",
    "resolve_backend",
    "load_text_encoder",
    "default_model_path",
    "weights_fingerprint",
    "EmbeddingCache",
    "cached_encode",
    "text_key",
]
