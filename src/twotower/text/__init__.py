"""Text encoders (sentence-transformers) and a frozen embedding cache.

The names below are imported on first use (:mod:`twotower.utils.lazy`): the CLI's start-up reads a few
settings of this package, and importing any one module ran this file, which imported them all.
"""
from twotower.utils.lazy import lazy_exports

# public name -> module that defines it
_LAZY: dict[str, str] = {
    "EmbeddingCache": "twotower.text.cache",
    "cached_encode": "twotower.text.cache",
    "text_key": "twotower.text.cache",
    "BACKEND_CHOICES": "twotower.text.encoder",
    "BACKENDS": "twotower.text.encoder",
    "RERANK_BACKEND_CHOICES": "twotower.text.encoder",
    "EncoderSettings": "twotower.text.encoder",
    "RerankSettings": "twotower.text.encoder",
    "TextEncoder": "twotower.text.encoder",
    "default_model_path": "twotower.text.encoder",
    "load_text_encoder": "twotower.text.encoder",
    "resolve_backend": "twotower.text.encoder",
    "weights_fingerprint": "twotower.text.encoder",
}
# reachable as attributes (twotower.text.bf16_backend), as when this file imported them all
_SUBMODULES = (
    "bf16_backend", "cache", "encoder", "onnx_backend",
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

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), subpackages=_SUBMODULES)
